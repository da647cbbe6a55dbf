"""The nets of ``configs/katago_opponent_go9.py`` against their controls.

Run (after the three ``gojax train`` commands in that file's docstring and
the three ``aux_on`` runs of ``configs/katago_aux_go9.py`` and
``configs/katago_forced_go9.py``)::

    gojax sweep --config configs/sweep_katago_opponent_go9.py \\
        --workdir runs/katago_opponent_sweep

Grid: the final net of ``runs/opponent`` (the opponent-reply target, seed 0)
with a 16-simulation PUCT search x the three control nets (``aux_on``,
``aux_on_seed1``, ``aux_on_seed2``: the same recipe without the target): 3
cells of 128 games (9x9, komi 7, 120-move cap, colour pairs opening with two
random moves, every search over the sensible moves). The other seeds' nets
against the same three, so that every net with the target meets every net
without it (9 cells in all)::

    gojax sweep --config configs/sweep_katago_opponent_go9.py \\
        --workdir runs/katago_opponent_sweep_seed1 \\
        --config.checkpoints.workdir=runs/opponent_seed1 \\
        --config.checkpoints.label=opponent_seed1
    gojax sweep --config configs/sweep_katago_opponent_go9.py \\
        --workdir runs/katago_opponent_sweep_seed2 \\
        --config.checkpoints.workdir=runs/opponent_seed2 \\
        --config.checkpoints.label=opponent_seed2
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sweep_katago_aux_go9.py"))
    c.checkpoints.workdir = "runs/opponent"
    c.checkpoints.label = "opponent"
    c.opponents = ("run:runs/aux_on", "run:runs/aux_on_seed1", "run:runs/aux_on_seed2")
    return c
