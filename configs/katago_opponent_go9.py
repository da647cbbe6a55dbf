"""KataGo's auxiliary opponent-reply policy target on 9x9 self-play.

The experiment of docs/papers/katago.md ("KataGo: the opponent-reply policy
target", after Wu, "Accelerating Self-Play Learning in Go", 2019):
``configs/katago_aux_go9.py`` (KataGo ``tiny`` net, PUCT with 16 simulations
and Dirichlet noise, ownership and score targets, 1,200 learner steps and
2,400 games) with ``model.opponent_policy = True``: the policy head gets a
second output trained on the next position's policy target (the opponent's
reply) with KataGo's weight, ``learner.opponent_policy_weight = 0.15``. The
search reads only the first output, so the target can help only through
what it teaches the shared trunk. Its control is that config's ``aux_on``
runs, which differ in this key alone. Three seeds, run as those were::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_opponent_go9.py --workdir runs/opponent \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_opponent_go9.py --workdir runs/opponent_seed1 \\
        --config.learner.num_devices=1 --config.seed=1
    gojax train --config configs/katago_opponent_go9.py --workdir runs/opponent_seed2 \\
        --config.learner.num_devices=1 --config.seed=2

then ``configs/sweep_katago_opponent_go9.py`` plays the nets against the
control nets (``aux_on``, ``aux_on_seed1``, ``aux_on_seed2``).

Cost and result (2 CPU cores, 2026-12-01): 11-12 minutes a run. Two seeds
of three beat every control net (63-98% of 128 games), the third lost to
all three (15-46%); over the nine pairings the nets with the target scored
67% (docs/papers/katago.md).
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("katago_aux_go9.py"))
    c.model.opponent_policy = True
    return c
