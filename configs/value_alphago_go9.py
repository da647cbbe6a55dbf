"""AlphaGo's value-network stage on 9x9: one position per game of the SL and RL policies.

After the SL run (``configs/sl_alphago_go9.py``) and the RL run
(``configs/pg_alphago_go9.py``)::

    gojax train-value --config configs/value_alphago_go9.py --workdir runs/value_alphago_go9 \\
        --init runs/sl_alphago_go9 --rl runs/pg_alphago_go9

Every position comes from a game of its own: the SL policy plays moves
1..U-1 (U uniform in 1..81), move U is uniformly random, the RL policy
finishes the game. 16,384 training and 1,024 held-out positions (each
held-out one with 16 random rollouts); the value network of the SL run's
net is fitted by SGD with momentum (learning rate 1e-2; 3e-3 ended 0.02
higher in half the steps) on the squared error, 8,000 steps of 64, every
sample in a random symmetry. About 10 minutes to play the games and 4 to
train on 2 CPU cores. The result holds the SL policy and the
new value network, as AlphaGo's search used them. Results in
docs/papers/alphago.md ("AlphaGo: the value network").
"""

from train.value_network import default_value_config


def get_config():
    c = default_value_config()
    c.board.size = 9
    c.board.komi = 7.0
    c.board.rules = "tromp-taylor"
    c.model.preset = "alphago_tiny"
    c.data.positions = 16_384
    c.data.holdout = 1_024
    c.data.games = 512
    c.data.rollouts = 16
    c.learner.lr_values = (1e-2,)
    c.learner.batch_size = 64
    c.train.total_steps = 8_000
    c.train.max_minutes = 30.0
    c.train.checkpoint_every = 1_000
    c.train.eval_every = 500
    return c
