"""AlphaGo's RL policy stage on 9x9: the SL policy of sl_alphago_go9 against its earlier selves.

Start from the SL run (``configs/sl_alphago_go9.py``), then::

    gojax train-pg --config configs/pg_alphago_go9.py --workdir runs/pg_alphago_go9 \\
        --init runs/sl_alphago_go9

Mini-batches of 64 games (moves sampled from the policies, no search) against
an opponent drawn from the pool, which the learner joins every 25 iterations;
REINFORCE with the net's own value head as baseline; plain SGD as in the
paper, learning rate 1e-3 (1e-2 collapsed the policy's entropy from 2.0 to
0.9 nats in three iterations). Every 25 iterations the learner plays 256
games against the SL policy it started from (``eval.json``). 100 iterations
take about 9 minutes on 2 CPU cores. Results in docs/papers/alphago.md ("AlphaGo:
the RL policy network").
"""

from train.policy_gradient import default_pg_config


def get_config():
    c = default_pg_config()
    c.board.size = 9
    c.board.komi = 7.0
    c.board.rules = "tromp-taylor"
    c.model.preset = "alphago_tiny"
    c.pg.games = 64
    c.pg.pool_every = 25
    c.pg.baseline = "value"
    c.learner.lr_values = (1e-3,)
    c.train.total_steps = 100
    c.train.max_minutes = 20.0
    c.train.checkpoint_every = 25
    c.train.eval_every = 25
    c.train.eval_games = 256
    return c
