"""The nets of ``configs/katago_puct_go9.py`` against their controls.

Run (after the three ``gojax train`` commands in that file's docstring and
the three ``aux_on`` runs of ``configs/katago_aux_go9.py``, seeds 0, 1, 2)::

    gojax sweep --config configs/sweep_katago_puct_go9.py --workdir runs/katago_puct_sweep

Grid: the final net of ``runs/kpuct`` (self-play with KataGo's PUCT, seed 0)
with a 16-simulation PUCT search (mctx's, as every net here: the nets differ,
not their search) x random play, 16-playout UCT and the three control nets
(``aux_on``, ``aux_on_seed1``, ``aux_on_seed2``: the same recipe with mctx's
PUCT in self-play): 5 cells of 128 games (9x9, komi 7, 120-move cap, colour
pairs opening with two random moves, every search over the sensible moves).
The other seeds' nets against the same three, so that every net meets every
control (9 pairings in all)::

    gojax sweep --config configs/sweep_katago_puct_go9.py \\
        --workdir runs/katago_puct_sweep_seed1 \\
        --config.checkpoints.workdir=runs/kpuct_seed1 \\
        --config.checkpoints.label=kpuct_seed1 \\
        "--config.opponents=('run:runs/aux_on', 'run:runs/aux_on_seed1', 'run:runs/aux_on_seed2')"

and the same with ``seed2``.
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sweep_katago_aux_go9.py"))
    c.checkpoints.workdir = "runs/kpuct"
    c.checkpoints.label = "kpuct"
    c.opponents = (
        "random",
        "uct:16",
        "run:runs/aux_on",
        "run:runs/aux_on_seed1",
        "run:runs/aux_on_seed2",
    )
    return c
