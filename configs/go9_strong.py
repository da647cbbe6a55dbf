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

Why each choice (9x9 experiments of docs/papers/ at 16 simulations, and
the throughput of a 2-core CPU):

* Net: ``b6c64`` (6 blocks x 64 channels, two global-pooling blocks, 0.48M
  parameters), KataGo's architecture and input features. ``tiny`` (2x16) is
  too small to hold tactics; ``b6c96`` self-played at 39 moves/s on 2 cores
  (random weights, 64 games) against 52-56 for ``b6c64`` in the run: at a
  fixed CPU budget, more games.
* Targets: KataGo's ownership and score targets (their nets beat nets trained
  without them 66-86%) and the score's spread (read by the score utility of
  the first phase).
* Search: Gumbel AlphaZero (Danihelka et al. 2022), 16 simulations over 16
  root moves sampled by the Gumbel-top-k trick; the policy learns
  ``softmax(logits + sigma(completed Q))`` over every legal move, and the
  game plays the noisy sequential-halving winner for 30 moves, then the
  plain one. Why: the run's first 1,537 learner steps searched with KataGo's
  PUCT (32 simulations, its score utility, root noise 0.25, root and move
  temperatures 1.25/1.1 and 0.75/0.15). Its policy loss stopped at 3.2 from
  step ~400 while its targets' entropy was ~1.5 nats: 32 visits split by a
  noisy prior give targets the policy cannot predict, and it stopped
  learning from them (nets 0/40 against GnuGo level 0). Gumbel's targets
  move the policy on every move by the search's values (the best of the
  four arms of our 9x9 Gumbel experiment in docs/papers/gumbel_alphazero.md) and need no
  root noise; with half the simulations self-play runs at ~90 moves/s
  instead of ~52. From step 1,537 the run continued under this search
  (``--config.train.init_from`` of the PUCT run's checkpoint; the lineage in
  its checkpoints records both).
* Slots: the 128 games of an iteration are played on 32 slots (16 per core),
  a slot that frees taking the next game (``selfplay.num_slots``): games end
  between 30 and 140 moves, and with one slot per game half the searches went
  to games already over. Whole-game self-play 1.5-1.7x faster on 2 cores
  (``bench/selfplay_slots.py``, BENCHMARKS.md "Whole games"), from step
  11,105; the games are what they were.
* Resignation at a value of 0.9, 10% of games never resign to measure false
  positives (``selfplay.resign_false_positive_rate`` in metrics.jsonl).
* Learner: AdamW 1e-3, batch 256, 96 steps per 128 games (about two samples
  per position; each sample under a random symmetry); a cosine schedule
  stretched far beyond the run, so the rate stays about constant while it
  grows; the replay holds the last ~200k positions (about 2,000 games).
  From step 9,000 the rate is 0.3e-3 (``learner.lr_drops``), AlphaGo Zero's
  annealing: from step 5,282 to 7,859 the net gained in head-to-head play
  (67.5%) but not measurably against GnuGo level 10 (47.5% -> 45%), so the
  run takes the smaller steps' gain in precision. The steps before 9,000 ran
  at 1e-3 (the continuation at 8,793 is recorded in the checkpoints' lineage).
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
    c.selfplay.num_slots = 32
    c.selfplay.search_kind = "gumbel"
    c.selfplay.num_simulations = 16
    c.selfplay.gumbel_considered = 16
    c.selfplay.gumbel_scale = 1.0
    c.selfplay.temperature_moves = 30  # the noisy sequential-halving winner, then the plain one
    c.selfplay.resign_threshold = 0.9
    c.selfplay.no_resign_fraction = 0.1

    c.replay.capacity = 200_000
    c.replay.min_size = 10_000

    c.learner.optimizer = "adamw"
    c.learner.learning_rate = 1e-3
    c.learner.warmup_steps = 200
    c.learner.total_steps = 1_000_000
    c.learner.lr_drops = (9_000,)
    c.learner.lr_drop_factor = 0.3
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
