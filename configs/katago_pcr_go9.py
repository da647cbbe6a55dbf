"""KataGo's playout-cap randomisation on 9x9 self-play, at no more self-play compute.

The experiment of docs/papers/katago.md ("KataGo: playout-cap randomisation",
after Wu, "Accelerating Self-Play Learning in Go", 2019):
``configs/katago_aux_go9.py`` (KataGo ``tiny`` net, PUCT with 16 simulations
and Dirichlet noise, ownership and score targets, 1,200 learner steps) with
playout-cap randomisation: a quarter of the moves get the full 16-simulation
search with root noise and become policy targets, the others a 4-simulation
search without noise that only plays (``selfplay.fast_simulations = 4``,
``selfplay.full_search_prob = 0.25``: 7 simulations a move on average). The
self-play compute so saved buys more games: 64 games an iteration instead of
32, so 4,800 games in the 1,200 steps instead of 2,400, for 80-90% of the
control's simulations. Every position is a value, score and ownership
target; the policy targets are half the control's. Its control is that
config's ``aux_on`` runs. Three seeds, run as those were::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_pcr_go9.py --workdir runs/pcr \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_pcr_go9.py --workdir runs/pcr_seed1 \\
        --config.learner.num_devices=1 --config.seed=1
    gojax train --config configs/katago_pcr_go9.py --workdir runs/pcr_seed2 \\
        --config.learner.num_devices=1 --config.seed=2

with three control runs of ``configs/katago_aux_go9.py`` (seeds 0, 1, 2,
workdirs ``runs/aux_on``, ``runs/aux_on_seed1``, ``runs/aux_on_seed2``); then
``configs/sweep_katago_pcr_go9.py`` plays the nets against the control nets.

Cost and result (2 CPU cores, 2026-12-04): 8.4 minutes a run on an idle
machine, the same as a control run. At this scale the cap costs strength:
every capped net lost to every control net (15-44% of 128 games a pairing,
31.0% over the nine pairings; docs/papers/katago.md).
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("katago_aux_go9.py"))
    c.selfplay.num_games = 64
    c.selfplay.fast_simulations = 4
    c.selfplay.full_search_prob = 0.25
    return c
