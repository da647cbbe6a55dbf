"""9x9, AlphaGo Zero's tiny net: a complete run on a laptop CPU in about ten minutes.

Run::

    gojax train --config configs/go9_tiny.py --workdir runs/go9_tiny

Cost and result (measured on 2 CPU cores shared with other jobs,
2026-11-29): ``train.max_minutes`` stops it at 10 minutes, 1249 learner
steps, 79 iterations, 2528 games; self-play 530 moves/s (median; 670 at the
end), learner about 8k-12k samples/s. The final net with a 16-simulation
search beat random play in 64 of 64 games and 16-playout UCT (searching the
same "sensible" move set) with 55 wins, 3 draws and 6 losses in 64 (88%, 95%
interval 78-94%; Elo table of its checkpoints in BENCHMARKS.md). Board 9x9,
komi 7, ``agz_tiny`` (2 residual blocks x 16 channels), PUCT with 16
simulations over the sensible moves (``selfplay.moves``: no own-eye fills,
pass only after a pass; with every legal move allowed, self-play at this
budget drifts into early passes and learns nothing), 32 games per
iteration, AdamW. The final evaluation plays 64 games each against
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
