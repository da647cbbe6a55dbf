"""AlphaGo's Fig. 4b on 9x9: one net with the value network alone, rollouts alone, and the mix.

After ``configs/value_alphago_go9.py`` (its seed-0 run)::

    gojax sweep --config configs/sweep_alphago_lambda_go9.py --workdir runs/alphago_lambda_sweep

The value run's net (the SL policy with its new value network), searched by
PUCT with 32 simulations over the sensible moves, its leaves valued
``(1 - lambda) v + lambda r`` (``r``: one random game from the leaf), plays
itself with another lambda: the grid's lambda 0 and 0.5 against opponents
with lambda 0 and 1 (``checkpoint:latest@lam...``), a round robin of the
three variants plus lambda 0 against itself (a control at 50%, and the
cheapest cell). 64 games a cell (9x9, komi 7, colour pairs opening with two
random moves); the ratings are anchored at the value network alone. Results
in docs/papers/alphago.md ("AlphaGo: the value network").
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
    c.search.rollout_lambda = (0.0, 0.5)
    c.search.rollouts = 1
    c.opponents = ("checkpoint:latest@lam0", "checkpoint:latest@lam1")
    c.games.num_games = 64
    c.games.batch_size = 0
    c.games.opening_moves = 2
    c.ratings.anchor = "value/step8000/puct32/c1.25"
    return c
