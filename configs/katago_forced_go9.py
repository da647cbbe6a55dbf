"""KataGo's forced playouts and policy target pruning on 9x9 self-play.

The experiment of docs/papers/katago.md ("KataGo: forced playouts and policy target
pruning", after Wu, "Accelerating Self-Play Learning in Go", 2019):
``configs/katago_aux_go9.py`` (KataGo ``tiny`` net, PUCT with 16 simulations
and Dirichlet noise, ownership and score targets, 1,200 learner steps and
2,400 games) with ``selfplay.forced_playouts = 2``, KataGo's ``k``. Its
control is that config's ``aux_on`` runs, which differ in this key alone.
Three seeds, run as those were::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_forced_go9.py --workdir runs/forced \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_forced_go9.py --workdir runs/forced_seed1 \\
        --config.learner.num_devices=1 --config.seed=1
    gojax train --config configs/katago_forced_go9.py --workdir runs/forced_seed2 \\
        --config.learner.num_devices=1 --config.seed=2

with a third control run (``configs/katago_aux_go9.py``, ``--config.seed=2``,
workdir ``runs/aux_on_seed2``); then ``configs/sweep_katago_forced_go9.py``
plays the forced nets against the control nets.

Cost and result (2 CPU cores, 2026-12-01): 10-11 minutes a run. At 16
simulations the technique did not pay: over the nine pairings of a forced
net against a control net (128 games each) the forced nets scored 36%
(docs/papers/katago.md).
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("katago_aux_go9.py"))
    c.selfplay.forced_playouts = 2.0
    return c
