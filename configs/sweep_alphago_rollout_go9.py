"""AlphaGo's fast rollout policy in play on 9x9: UCT with it against UCT with random moves.

After ``configs/rollout_alphago_go9.py`` and the SL run of
``configs/sl_alphago_go9.py`` (seed 0)::

    gojax sweep --config configs/sweep_alphago_rollout_go9.py --workdir runs/alphago_rollout_sweep

Grid: the SL run's net with a 32-simulation PUCT search (the net alone, no
rollouts) x two classical UCT opponents with 32 simulations a move, one
rollout each: uniform random moves (``uct:32``) and the fast rollout policy
(``uct:32:<file>``, named ``uct32+rollout_alphago_go9``). The common
opponent places both UCTs on one rating scale. 64 games a cell (9x9, komi 7,
colour pairs opening with two random moves, every search over the sensible
moves). On 2 CPU cores the cells take 3.6 and 5.0 minutes. The SL net won
all 64 games of both cells: too strong a common opponent to separate the two
UCTs (the head-to-head ``gojax match`` in docs/papers/alphago.md does). Results in
docs/papers/alphago.md ("AlphaGo: the fast rollout policy").
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/sl_alphago_go9/alphago_seed0"
    c.checkpoints.steps = (-1,)
    c.checkpoints.label = "sl"
    c.search.kinds = ("puct",)
    c.search.simulations = (32,)
    c.search.c_puct = (1.25,)
    c.search.moves = "sensible"
    c.opponents = ("uct:32", "uct:32:runs/rollout_alphago_go9/rollout_policy.npz")
    c.games.num_games = 64
    c.games.batch_size = 0
    c.games.opening_moves = 2
    c.ratings.anchor = "uct32"
    return c
