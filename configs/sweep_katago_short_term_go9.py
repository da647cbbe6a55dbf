"""The nets of ``configs/katago_short_term_go9.py`` against their controls.

Run (after the three ``gojax train`` commands in that file's docstring and the
``aux_on``, ``aux_on_seed1`` and ``aux_on_seed2`` runs of
``configs/katago_aux_go9.py``)::

    gojax sweep --config configs/sweep_katago_short_term_go9.py \\
        --workdir runs/katago_short_term_sweep

Grid: the final net of ``runs/short_term`` (short-term heads, seed 0) with a
16-simulation PUCT search and no policy optimism x the three control nets
(``aux_on``, ``aux_on_seed1``, ``aux_on_seed2``: the same recipe without the
heads): 3 cells of 128 games (9x9, komi 7, 120-move cap, colour pairs
opening with two random moves, every search over the sensible moves). The
other seeds' nets against the same three, so that every net with the heads
meets every net without them (9 cells in all)::

    gojax sweep --config configs/sweep_katago_short_term_go9.py \\
        --workdir runs/katago_short_term_sweep_seed1 \\
        --config.checkpoints.workdir=runs/short_term_seed1 \\
        --config.checkpoints.label=short_term_seed1

and the same with ``seed2``.
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sweep_katago_aux_go9.py"))
    c.checkpoints.workdir = "runs/short_term"
    c.checkpoints.label = "short_term"
    c.opponents = ("run:runs/aux_on", "run:runs/aux_on_seed1", "run:runs/aux_on_seed2")
    return c
