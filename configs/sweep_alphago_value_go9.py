"""AlphaGo's leaf evaluation on 9x9: the value network, random rollouts and their mix.

After ``configs/value_alphago_go9.py`` (its seed-0 run)::

    gojax sweep --config configs/sweep_alphago_value_go9.py --workdir runs/alphago_value_sweep

Grid: the value run's net (the SL policy with the new value network) with a
32-simulation PUCT search whose leaves are valued ``(1 - lambda) v + lambda
r`` (``r``: one random game from the leaf), lambda 0, 0.5 and 1, against the
SL run's own net searched the same way (its value head is the one train-sl
fitted on whole games; with lambda 1 neither value net is used, so the two
differ only in values the search never reads: a control at 50%). 128 games
a cell (9x9, komi 7, colour pairs opening with two random moves, every
search over the sensible moves). On 2 CPU cores the lambda-0 cell takes
about 8 minutes, a cell with rollouts about 15 (28 with two sweeps at
once). Classical UCT with 128 random playouts was first listed as a second
opponent and dropped: its cells were the slowest and never finished.
Results in docs/papers/alphago.md ("AlphaGo: the value network"); the same net's
lambdas against each other: ``configs/sweep_alphago_lambda_go9.py``.
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/value_alphago_go9/seed0"
    c.checkpoints.steps = (-1,)
    c.checkpoints.label = "value"
    c.search.kinds = ("puct",)
    c.search.simulations = (32,)
    c.search.c_puct = (1.25,)
    c.search.moves = "sensible"
    c.search.rollout_lambda = (0.0, 0.5, 1.0)
    c.search.rollouts = 1
    c.opponents = ("run:runs/sl_alphago_go9/alphago_seed0",)
    c.games.num_games = 128
    c.games.batch_size = 0
    c.games.opening_moves = 2
    return c
