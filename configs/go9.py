"""9x9 with a KataGo b6c96 net: hours on a many-core CPU, or about an hour on one GPU.

Run::

    gojax train --config configs/go9.py --workdir runs/go9

Cost: one GPU (A100/H100 class) for roughly 1-2 hours for 20k learner steps
(about 10^5 self-play games); on a CPU expect tens of hours. Host memory:
the replay holds 300k positions of KataGo features (float32, about 7.5 KB
each at 9x9: about 2.3 GB). KataGo's recipe at small scale: ownership and
score targets, playout-cap randomisation (full 128-simulation searches on a
quarter of the moves, 24-simulation fast searches on the rest), resignation
with 10% no-resign games to measure false positives, AdamW.
"""

from train.loop import default_config


def get_config():
    c = default_config()
    c.board.size = 9
    c.board.komi = 7.0

    c.model.preset = "b6c96"

    c.selfplay.num_games = 256
    c.selfplay.num_simulations = 128
    c.selfplay.fast_simulations = 24
    c.selfplay.full_search_prob = 0.25
    c.selfplay.temperature_moves = 10
    c.selfplay.resign_threshold = 0.9
    c.selfplay.no_resign_fraction = 0.1

    c.replay.capacity = 300_000
    c.replay.min_size = 20_000

    c.learner.optimizer = "adamw"
    c.learner.learning_rate = 1e-3
    c.learner.warmup_steps = 500
    c.learner.total_steps = 20_000
    c.learner.weight_decay = 1e-4
    c.learner.l2 = 0.0
    c.learner.batch_size = 256
    c.learner.score_stdev_weight = 0.05  # the spread of the final score (scoreStdev)

    c.train.total_steps = 20_000
    c.train.updates_per_iteration = 64
    c.train.checkpoint_every = 1_000
    c.train.plot_every = 5
    c.train.sgf_games = 4

    c.eval.num_games = 128
    c.eval.num_simulations = 64
    c.eval.every_iterations = 50
    return c
