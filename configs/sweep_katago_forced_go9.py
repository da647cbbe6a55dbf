"""The nets of ``configs/katago_forced_go9.py`` against their controls.

Run (after the two ``gojax train`` commands in that file's docstring and the
``aux_on`` runs of ``configs/katago_aux_go9.py``)::

    gojax sweep --config configs/sweep_katago_forced_go9.py --workdir runs/katago_forced_sweep

Grid: the final net of ``runs/forced`` (forced playouts and policy target
pruning, seed 0) with a 16-simulation PUCT search x opponents random,
16-playout UCT, the two control nets (``aux_on``, ``aux_on_seed1``: the same
recipe without forced playouts) and the second seed's net: 5 cells of 128
games (9x9, komi 7, 120-move cap, colour pairs opening with two random
moves, every search over the sensible moves). The other seeds' nets against
the controls, so that every forced net meets every control net (7 cells)::

    gojax sweep --config configs/sweep_katago_forced_go9.py \\
        --workdir runs/katago_forced_sweep_seed1 \\
        --config.checkpoints.workdir=runs/forced_seed1 \\
        --config.checkpoints.label=forced_seed1 \\
        "--config.opponents=('run:runs/aux_on_seed1', 'run:runs/aux_on')"
    gojax sweep --config configs/sweep_katago_forced_go9.py \\
        --workdir runs/katago_forced_sweep_seed2 \\
        --config.checkpoints.workdir=runs/forced_seed2 \\
        --config.checkpoints.label=forced_seed2 \\
        "--config.opponents=('run:runs/aux_on_seed2', 'run:runs/aux_on', 'run:runs/aux_on_seed1')"
    gojax sweep --config configs/sweep_katago_forced_go9.py \\
        --workdir runs/katago_forced_sweep_control2 \\
        --config.checkpoints.workdir=runs/aux_on_seed2 \\
        --config.checkpoints.label=aux_on_seed2 \\
        "--config.opponents=('run:runs/forced', 'run:runs/forced_seed1')"
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sweep_katago_aux_go9.py"))
    c.checkpoints.workdir = "runs/forced"
    c.checkpoints.label = "forced"
    c.opponents = (
        "random",
        "uct:16",
        "run:runs/aux_on",
        "run:runs/aux_on_seed1",
        "run:runs/forced_seed1",
    )
    return c
