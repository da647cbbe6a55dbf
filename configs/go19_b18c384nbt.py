"""19x19 with KataGo's current architecture, b18c384nbt with Mish: a long run on many hosts.

Run (every host of a TPU pod slice or GPU cluster; see docs/training.md)::

    gojax train --config configs/go19_b18c384nbt.py --workdir runs/go19_b18c384nbt \\
        --config.multihost=true

The net is KataGo's b18c384nbt (18 nested bottleneck blocks, 384 channels,
192 inside; 26.5M parameters) with the Mish activation of KataGo's kata1 runs
(``model.activation``), exported by ``gojax export`` as a model-version-11
file that KataGo's engine reads. The recipe is ``go19_b10c128.py``'s
(KataGo's: playout-cap randomisation, forced playouts with policy target
pruning, ownership, score and opponent-reply targets, resignation with 10%
no-resign games) with a bigger batch and a longer schedule. Cost: one b18c384nbt
evaluation is about 9x a b10c128 one (multiply-adds per point); KataGo's own
kata1 run trained nets of this size for years on donated GPUs, so expect this
to be a research-scale run (weeks on a pod slice), not a benchmark.
"""

from train.loop import default_config


def get_config():
    c = default_config()
    c.board.size = 19
    c.board.komi = 7.5

    c.model.preset = "b18c384nbt"
    c.model.activation = "mish"
    c.model.opponent_policy = True  # KataGo's auxiliary target (learner weight 0.15)

    c.selfplay.num_games = 1024
    c.selfplay.num_simulations = 600
    c.selfplay.fast_simulations = 100
    c.selfplay.full_search_prob = 0.25
    c.selfplay.forced_playouts = 2.0
    c.selfplay.temperature_moves = 20
    c.selfplay.resign_threshold = 0.9
    c.selfplay.no_resign_fraction = 0.1

    c.replay.capacity = 500_000
    c.replay.min_size = 100_000

    c.learner.optimizer = "sgd"
    c.learner.momentum = 0.9
    c.learner.lr_boundaries = (300_000, 450_000)
    c.learner.lr_values = (6e-3, 6e-4, 6e-5)
    c.learner.l2 = 3e-5
    c.learner.batch_size = 2048
    c.learner.score_stdev_weight = 0.05  # the spread of the final score (scoreStdev)

    c.train.total_steps = 500_000
    c.train.updates_per_iteration = 128
    c.train.checkpoint_every = 2_000
    c.train.sgf_games = 4

    c.eval.num_games = 64
    c.eval.num_simulations = 200
    c.eval.every_iterations = 100
    return c
