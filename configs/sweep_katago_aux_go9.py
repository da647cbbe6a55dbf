"""The four nets of ``configs/katago_aux_go9.py``'s runs played against each other.

Run (after the four ``gojax train`` commands in that file's docstring)::

    gojax sweep --config configs/sweep_katago_aux_go9.py --workdir runs/katago_aux_sweep

Grid: the final net of ``runs/aux_on`` (ownership and score targets, seed 0)
with a 16-simulation PUCT search x opponents random, 16-playout UCT and the
final nets of the three other runs (``run:`` opponents, searched exactly
as the cell's agent): 5 cells of 128 games (9x9, komi 7, 120-move cap,
colour pairs opening with two random moves, every search over the sensible
moves). ``ratings.txt`` rates the four nets (anchored at random play = 0);
the tables of docs/papers/katago.md come from ``results.json``. The second seed's
net against the two nets trained without the targets (2 cells)::

    gojax sweep --config configs/sweep_katago_aux_go9.py \\
        --workdir runs/katago_aux_sweep_seed1 \\
        --config.checkpoints.workdir=runs/aux_on_seed1 \\
        --config.checkpoints.label=aux_on_seed1 \\
        "--config.opponents=('run:runs/aux_off_seed1', 'run:runs/aux_off')"
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/aux_on"
    c.checkpoints.steps = (-1,)
    c.checkpoints.label = "aux_on"
    c.search.kinds = ("puct",)
    c.search.simulations = (16,)
    c.search.c_puct = (1.25,)
    c.opponents = (
        "random",
        "uct:16",
        "run:runs/aux_off",
        "run:runs/aux_on_seed1",
        "run:runs/aux_off_seed1",
    )
    c.games.num_games = 128
    c.games.batch_size = 0
    c.games.opening_moves = 2
    c.ratings.anchor = "random"
    return c
