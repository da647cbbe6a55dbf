"""Sweep of a ``go9_tiny`` training run: its checkpoints x simulations against fixed opponents.

Run (after ``gojax train --config configs/go9_tiny.py --workdir runs/go9_tiny``)::

    gojax sweep --config configs/sweep_go9_tiny.py --workdir runs/go9_tiny_sweep

Grid: the run's checkpoints (every one it kept; go9_tiny keeps 8, one
every 200 steps) x PUCT with 16 simulations x opponents random, capture,
UCT with 16 rollouts and the run's newest checkpoint: 32 cells of 64 games
(9x9, komi 7, the run's 120-move cap), colour pairs opening with two random
moves, every search over the run's move set. ``ratings.txt`` is then the
Elo table of the run's checkpoints, anchored at random play = 0.

Cost: each new (simulations, opponent) pair compiles one program, about
30 s on a CPU; checkpoints of the same net reuse it. See BENCHMARKS.md for a
measured run. Smaller::

    gojax sweep --config configs/sweep_go9_tiny.py --workdir runs/smoke_sweep \\
        --config.checkpoints.steps='(-1,)' --config.search.simulations='(8,)' \\
        --config.games.num_games=8
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/go9_tiny"
    c.checkpoints.steps = ()  # every checkpoint the run kept
    c.search.kinds = ("puct",)
    c.search.simulations = (16,)
    c.search.c_puct = (1.25,)
    c.opponents = ("random", "capture", "uct:16", "checkpoint:latest")
    c.games.num_games = 64
    c.games.batch_size = 0  # all of a cell's games in one batch
    c.games.opening_moves = 2  # colour pairs share a random two-move opening
    c.ratings.anchor = "random"
    return c
