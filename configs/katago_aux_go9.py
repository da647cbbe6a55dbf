"""KataGo's ownership and score targets, with and without, on 9x9 self-play.

The experiment of docs/papers/katago.md ("KataGo: ownership and score targets",
after Wu, "Accelerating Self-Play Learning in Go", 2019). A
KataGo-architecture net (``tiny``: 2 blocks x 16 channels, one of them with
global pooling; KataGo's 22 + 19 input features) trained as ``go9_tiny`` is
(PUCT, 16 simulations, 32 games and 16 learner steps an iteration) for a
fixed 1,200 learner steps and 2,400 games, with the learner's default
auxiliary losses: per-point ownership cross-entropy (weight 1) and the Huber
loss of the score lead (weight 0.02). The ablation sets both weights to 0,
so that the net learns only from the policy and the game's outcome, as
AlphaZero's does. Two seeds of each, self-play split over two host devices
(one per core; the recorded runs were made so, and another split plays
other games)::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_aux_go9.py --workdir runs/aux_on \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_aux_go9.py --workdir runs/aux_off \\
        --config.learner.num_devices=1 \\
        --config.learner.ownership_weight=0 --config.learner.score_weight=0

and the same with ``--config.seed=1`` (workdirs ``runs/aux_on_seed1`` and
``runs/aux_off_seed1``); then ``configs/sweep_katago_aux_go9.py`` plays the
final nets against each other and against fixed opponents.

Cost and result (2 CPU cores, 2026-12-01): 11-12 minutes a run. Every net
trained with the targets beat every net trained without them head to head
(66-86% of 128 games); against 16-playout UCT the four scored 97% and 78%
with, 66% and 82% without (docs/papers/katago.md).

Both arms see the same games' worth of data (the heads are there either way:
without their losses they are trained by nothing and ignored by the search,
which reads only the policy and the value).
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("go9_tiny.py"))
    c.model.preset = "tiny"
    c.train.total_steps = 1_200
    c.train.max_minutes = 0.0  # equal data for every arm, not equal time
    c.train.checkpoint_every = 300
    c.train.keep_checkpoints = 4
    return c
