"""KataGo's short-term heads on 9x9 self-play, against the same recipe without them.

The experiment of docs/papers/katago.md ("KataGo: short-term heads and the
optimistic policy"): ``configs/katago_aux_go9.py`` (KataGo ``tiny`` net, PUCT
with 16 simulations and Dirichlet noise, ownership and score targets, 1,200
learner steps and 2,400 games) with ``model.short_term_heads = True``: the
value head also learns the value and score at KataGo's three
temporal-difference horizons and the expected squared error of the short
ones, and the policy head KataGo's short-term optimistic policy, with
KataGo's loss weights (docs/training.md). Self-play searches with the
ordinary policy, so the heads can help the searched policy and value only
through what they teach the shared trunk. Its control is that config's
``aux_on`` runs, which differ in this key alone. Three seeds, run as those
were::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_short_term_go9.py --workdir runs/short_term \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_short_term_go9.py --workdir runs/short_term_seed1 \\
        --config.learner.num_devices=1 --config.seed=1
    gojax train --config configs/katago_short_term_go9.py --workdir runs/short_term_seed2 \\
        --config.learner.num_devices=1 --config.seed=2

then ``configs/sweep_katago_short_term_go9.py`` plays the nets against the
control nets (``aux_on``, ``aux_on_seed1``, ``aux_on_seed2``: that config
with seeds 0, 1 and 2).
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("katago_aux_go9.py"))
    c.model.short_term_heads = True
    return c
