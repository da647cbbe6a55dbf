"""The six nets of ``configs/gumbel_go9.py``'s runs played against each other under one search.

Run (after the ``gojax train`` commands in that file's docstring and in
docs/papers/gumbel_alphazero.md: the four arms and the 2-simulation arms again with seed 1)::

    gojax sweep --config configs/sweep_gumbel_go9.py --workdir runs/gumbel_go9_sweep

Grid: the final net of ``runs/gumbel_n2`` x Gumbel and PUCT search with 2
and 16 simulations x opponents random, 16-playout UCT and the final nets of
the five other runs (``run:`` opponents, searched exactly as the cell's
agent): 28 cells of 64 games (9x9, komi 7, 120-move cap, colour pairs
opening with two random moves, every search over the sensible moves).
Within a cell both nets search alike, so a cell measures the nets, not the
searches. ``ratings.txt`` rates all six nets (anchored at random play = 0)
under each search; the tables of docs/papers/gumbel_alphazero.md come from ``results.json``.
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/gumbel_n2"
    c.checkpoints.steps = (-1,)
    c.checkpoints.label = "gumbel_n2"
    c.search.kinds = ("gumbel", "puct")
    c.search.simulations = (2, 16)
    c.search.c_puct = (1.25,)
    c.opponents = (
        "random",
        "uct:16",
        "run:runs/puct_n2",
        "run:runs/gumbel_n16",
        "run:runs/puct_n16",
        "run:runs/gumbel_n2_seed1",
        "run:runs/puct_n2_seed1",
    )
    c.games.num_games = 64
    c.games.batch_size = 0
    c.games.opening_moves = 2
    c.ratings.anchor = "random"
    return c
