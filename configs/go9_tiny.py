"""9x9, AlphaGo Zero's tiny net: a complete run on a laptop CPU in about ten minutes.

Run::

    gojax train --config configs/go9_tiny.py --workdir runs/go9_tiny

Cost (measured on 2 CPU cores): 2000 learner steps in about 6 minutes,
125 iterations, 4000 games; self-play 750-1100 moves/s, learner about 14k
samples/s; ``train.max_minutes`` caps it at 10. Board 9x9, komi 7,
``agz_tiny`` (2 residual blocks x 16 channels), PUCT with 16 simulations,
32 games per iteration, AdamW. Caveat: at this budget the run exercises the
whole pipeline but does not learn to play: self-play drifts into early passes
(games of ~20 moves that Black wins), and the final net loses to random
play (measured 0/32). The final evaluation plays 32 games each against
random play and 16-playout UCT. For a smoke test on 5x5 in about one minute::

    gojax train --config configs/go9_tiny.py --workdir runs/smoke \\
        --config.board.size=5 --config.train.total_steps=20
"""

from train.loop import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.board.size = 9
    c.board.komi = 7.0
    c.board.max_moves = 120  # random-ish early games would otherwise run to 162 moves

    c.model.preset = "agz_tiny"

    c.selfplay.num_games = 32
    c.selfplay.num_simulations = 16
    c.selfplay.temperature_moves = 8
    c.selfplay.dirichlet_fraction = 0.25

    c.replay.capacity = 50_000
    c.replay.min_size = 2_000

    c.learner.optimizer = "adamw"
    c.learner.learning_rate = 2e-3
    c.learner.warmup_steps = 50
    c.learner.total_steps = 2_000
    c.learner.l2 = 1e-4
    c.learner.batch_size = 128

    c.train.total_steps = 2_000
    c.train.updates_per_iteration = 16
    c.train.max_minutes = 10.0
    c.train.checkpoint_every = 200
    c.train.keep_checkpoints = 8  # for an Elo table over the run (configs/sweep_go9_tiny.py)
    c.train.plot_every = 2

    c.eval.num_games = 64
    c.eval.num_simulations = 16
    return c
