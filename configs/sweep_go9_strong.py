"""The Elo curve of the ``go9_strong`` run: its snapshots against fixed anchors, by compute.

Run (after ``gojax train --config configs/go9_strong.py --workdir runs/go9_strong``)::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax sweep --config configs/sweep_go9_strong.py --workdir runs/go9_strong_sweep

Grid: every replay-free snapshot the run kept (``train.snapshot_every``) x KataGo's
PUCT with 64 visits (the search the run self-plays with, no noise, the most visited
move) x opponents: random play (the anchor, Elo 0), UCT with 64 and 512 random
playouts over the same move set, and GnuGo 3.8 at levels 0 and 10 (GTP games,
counted by GnuGo's ``final_score`` when they end by passes); 32 games a cell, each
colour pair opening with two random moves so that deterministic engines do not
repeat one game. 9x9, komi 7, chinese, the run's 140-move cap.
``elo_vs_compute.png`` plots the ratings against the self-play games and CPU-hours
recorded with each snapshot. A snapshot continued elsewhere (``train.init_from``)
keeps counting: point ``checkpoints.workdir`` at a folder holding the snapshots of
the whole lineage (``gojax snapshot`` copies one in).

Cost: the GnuGo cells dominate (about 10 s a game at level 0, 20-30 s at level 10
on 2 cores); each new snapshot adds 5 cells.
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/go9_strong/snapshots"
    c.checkpoints.steps = ()  # every snapshot
    c.checkpoints.label = "go9_strong"
    c.search.kinds = ("katago",)
    c.search.simulations = (64,)
    c.opponents = ("random", "uct:64", "uct:512", "gnugo:0", "gnugo:10")
    c.games.num_games = 32
    c.games.opening_moves = 2
    c.games.referee = "gnugo --mode gtp --chinese-rules"
    c.ratings.anchor = "random"
    return c
