"""AlphaGo Zero's 20-block recipe (Silver et al. 2017) on 19x19: a TPU pod slice.

Run the same command on every host of the slice, with a workdir on a
filesystem they share (``multihost`` makes each host call
``jax.distributed.initialize()``, which finds the coordinator itself)::

    gojax train --config configs/go19_b20c256_agz.py --workdir /shared/runs/agz

Recipe: ``agz_b20c256`` (1 conv block + 19 residual blocks, 256 channels,
17 input planes), 1600 simulations per move, Dirichlet noise 0.25 with
alpha 0.03, temperature 1 for the first 30 moves, resignation at -0.9 with
10% no-resign games, komi 7.5, SGD momentum 0.9, L2 1e-4, learning rate
1e-2 -> 1e-3 -> 1e-4 at 400k and 600k steps, 700k steps of batch 2048
(split over all devices).

Cost: AlphaGo Zero used 29 million self-play games (about 4.9M in the 3-day
run) on thousands of TPUs; with this code expect a large pod slice for
weeks. The paper's window was the last 500k games (~10^8 positions); the
replay here is per host, 5M positions of uint8 planes (about 6 KB each:
30 GB) on every host.
"""

from train.loop import default_config


def get_config():
    c = default_config()
    c.multihost = True
    c.board.size = 19
    c.board.komi = 7.5

    c.model.preset = "agz_b20c256"

    c.selfplay.num_games = 2048
    c.selfplay.num_simulations = 1600
    c.selfplay.temperature_moves = 30
    c.selfplay.dirichlet_fraction = 0.25  # alpha defaults to 0.03 at 19x19
    c.selfplay.resign_threshold = 0.9
    c.selfplay.no_resign_fraction = 0.1
    c.selfplay.moves = "legal"  # AlphaGo Zero searched every legal move, pass included

    c.replay.capacity = 5_000_000
    c.replay.min_size = 500_000

    c.learner.optimizer = "sgd"
    c.learner.momentum = 0.9
    c.learner.lr_boundaries = (400_000, 600_000)
    c.learner.lr_values = (1e-2, 1e-3, 1e-4)
    c.learner.l2 = 1e-4
    c.learner.value_loss = "mse"
    c.learner.batch_size = 2048

    c.train.total_steps = 700_000
    c.train.updates_per_iteration = 256
    c.train.checkpoint_every = 1_000
    c.train.sgf_games = 4

    c.eval.num_games = 128
    c.eval.num_simulations = 800
    c.eval.every_iterations = 200
    return c
