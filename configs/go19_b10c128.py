"""19x19 with a KataGo b10c128 net: a serious run on one TPU/GPU host (8 devices).

Run (one host, all local devices)::

    gojax train --config configs/go19_b10c128.py --workdir runs/go19_b10c128

Cost: days on 8 accelerators for 200k learner steps (KataGo's g170 b10c128
stage took about 5 days on ~28 V100s with a C++ self-play engine; expect
slower self-play here). Host memory: 250k positions of KataGo features
(float32, about 32 KB each at 19x19: about 8 GB). KataGo's recipe:
playout-cap randomisation (600 full / 100 fast simulations, full on 25% of
moves), forced playouts with policy target pruning (k = 2), ownership and
score targets, the opponent-reply policy target (weight 0.15), the
short-term heads (temporal-difference value and score targets, their error
outputs and the optimistic policy; exports as model version 12), SGD with
momentum, resignation with 10% no-resign games.
"""

from train.loop import default_config


def get_config():
    c = default_config()
    c.board.size = 19
    c.board.komi = 7.5

    c.model.preset = "b10c128"
    c.model.opponent_policy = True  # KataGo's auxiliary target (learner weight 0.15)
    c.model.short_term_heads = True  # KataGo's short-term errors and optimistic policy

    c.selfplay.num_games = 512
    c.selfplay.num_simulations = 600
    c.selfplay.fast_simulations = 100
    c.selfplay.full_search_prob = 0.25
    c.selfplay.forced_playouts = 2.0
    c.selfplay.temperature_moves = 20
    c.selfplay.resign_threshold = 0.9
    c.selfplay.no_resign_fraction = 0.1

    c.replay.capacity = 250_000
    c.replay.min_size = 50_000

    c.learner.optimizer = "sgd"
    c.learner.momentum = 0.9
    c.learner.lr_boundaries = (100_000, 160_000)
    c.learner.lr_values = (6e-3, 6e-4, 6e-5)
    c.learner.l2 = 3e-5
    c.learner.batch_size = 1024
    c.learner.score_stdev_weight = 0.05  # the spread of the final score (scoreStdev)

    c.train.total_steps = 200_000
    c.train.updates_per_iteration = 128
    c.train.checkpoint_every = 2_000
    c.train.sgf_games = 4

    c.eval.num_games = 64
    c.eval.num_simulations = 200
    c.eval.every_iterations = 100
    return c
