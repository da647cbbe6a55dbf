"""AlphaGo's fast rollout policy on 9x9 game records: a linear softmax over local patterns.

Fitted to the moves of 9x9 games (``gojax.rollout_policy``: 3x3 patterns with
atari, the same patterns as answers to the last move, distance to the last two
moves). The first 100 files are held out: their moves measure the policy, and
``gojax value-mse --max-games 100`` evaluates rollouts on those same games::

    gojax train-rollout --config configs/rollout_alphago_go9.py \\
        --workdir runs/rollout_alphago_go9 --sgf-dir ../shared/reference/sgf/katago-9x9

Results in docs/papers/alphago.md ("AlphaGo: the fast rollout policy").
"""

from train.rollout_policy import default_rollout_config


def get_config():
    c = default_rollout_config()
    c.board.size = 9
    c.board.komi = 7.0
    c.board.rules = "tromp-taylor"
    c.data.holdout_games = 100
    c.train.total_steps = 1_000
    c.train.batch_size = 512
    c.train.learning_rate = 0.05
    c.train.l2 = 1e-5  # 1e-6 over-fitted (held-out log-loss 2.32 against 2.27), 1e-4 under-fitted
    return c
