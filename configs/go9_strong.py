"""9x9 from random weights towards GnuGo's strength: the recipe of the shipped net.

Run (both cores: one XLA host device per core, self-play split over them)::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/go9_strong.py --workdir runs/go9_strong

The run has no end of its own (``train.total_steps`` is far away): stop it with
Ctrl-C or SIGTERM (a checkpoint is saved) and start the same command again to
resume exactly. To go on from a saved network in a fresh workdir, on this or
another machine (parameters, optimiser state and counters; the replay refilled
by self-play), add ``--config.train.init_from=<a run's workdir, snapshot or step directory>``
(docs/training.md, "Continuing a run elsewhere").

Nothing but self-play: no game records, no other engine's network, no GnuGo
games. The domain knowledge is the rules, KataGo's input features (liberties,
ladders, pass-alive areas, ko), the board's 8 symmetries (replay augmentation)
and the "sensible" move set (no filling of one's own eyes; pass after a pass).

Why each choice (9x9 experiments of docs/papers.md at 16 simulations, and
the throughput of a 2-core CPU):

* Net: ``b6c64`` (6 blocks x 64 channels, two global-pooling blocks, 0.48M
  parameters), KataGo's architecture and input features. ``tiny`` (2x16) is
  too small to hold tactics; ``b6c96`` self-played at 39 moves/s on 2 cores
  (random weights, 64 games) against 52-56 for ``b6c64`` in the run: at a
  fixed CPU budget, more games.
* Targets: KataGo's ownership and score targets (their nets beat nets trained
  without them 66-86%) and the score's spread (the score utility reads it).
* Search: KataGo's PUCT with its score utility (70-76% against mctx's PUCT),
  its root policy temperature (1.25 early, 1.1 late) and its move
  temperature (0.75 early, 0.15 late, halving every ~9 moves): 73-76% in our
  runs. 32 simulations every move, no playout-cap randomisation (it cost
  strength at 16 simulations here), root Dirichlet noise 0.25.
* Resignation at a value of 0.9, 10% of games never resign to measure false
  positives (``selfplay.resign_false_positive_rate`` in metrics.jsonl).
* Learner: AdamW 1e-3, batch 256, 96 steps per 128 games (about two samples
  per position; each sample under a random symmetry); a cosine schedule
  stretched far beyond the run, so the rate stays about constant while it
  grows; the replay holds the last ~200k positions (about 2,000 games).
"""

from train.loop import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.board.size = 9
    c.board.komi = 7.0
    c.board.rules = "chinese"
    c.board.max_moves = 140  # sensible moves fill the board; a cap for early random games

    c.model.preset = "b6c64"

    c.selfplay.num_games = 128
    c.selfplay.search_kind = "katago"
    c.selfplay.num_simulations = 32
    c.selfplay.dirichlet_fraction = 0.25
    c.selfplay.root_policy_temperature = 1.1
    c.selfplay.root_policy_temperature_early = 1.25
    c.selfplay.move_temperature = 0.15
    c.selfplay.move_temperature_early = 0.75
    c.selfplay.resign_threshold = 0.9
    c.selfplay.no_resign_fraction = 0.1

    c.replay.capacity = 200_000
    c.replay.min_size = 10_000

    c.learner.optimizer = "adamw"
    c.learner.learning_rate = 1e-3
    c.learner.warmup_steps = 200
    c.learner.total_steps = 1_000_000
    c.learner.weight_decay = 1e-4
    c.learner.l2 = 0.0
    c.learner.batch_size = 256
    c.learner.num_devices = 1  # the learner on one device; self-play on both
    c.learner.score_stdev_weight = 0.05

    c.train.total_steps = 1_000_000
    c.train.updates_per_iteration = 96
    c.train.checkpoint_every = 960
    c.train.keep_checkpoints = 3
    c.train.snapshot_every = 480  # ~20 minutes here: the networks of the Elo curve
    c.train.plot_every = 5
    c.train.sgf_games = 4

    c.eval.num_games = 32
    c.eval.num_simulations = 32
    return c
