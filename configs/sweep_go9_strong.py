"""The Elo curve of the ``go9_strong`` run: its snapshots against fixed anchors, by compute.

The run's snapshots live in the workdirs of its phases (the KataGo-PUCT phase, the
Gumbel phase, the annealed phase continued from it) and in ``models/go9_strong_state``;
gather the ones to rate in one folder first, e.g. (links are enough)::

    mkdir -p runs/go9_lineage/checkpoints && cd runs/go9_lineage/checkpoints
    ln -s ../../go9_strong/snapshots/checkpoints/480 480    # ... one per snapshot
    ln -s ../../../models/go9_strong_state/checkpoints/16386 16386  # its newest step

then (both cores: one XLA host device per core)::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax sweep --config configs/sweep_go9_strong.py --workdir runs/go9_strong_sweep

Grid: every snapshot in that folder x KataGo's PUCT with 64 visits (no noise, the
most visited move; the search the shipped net plays with) x opponents: random play
(the anchor, Elo 0), UCT with 64 random playouts over the same move set, and GnuGo
3.8 at levels 0 and 10 (GTP games, counted by GnuGo's ``final_score`` when they end
by passes); 16 games a cell, each colour pair opening with two random moves so that
deterministic engines do not repeat one game. 9x9, komi 7, chinese, the run's
140-move cap. ``elo_vs_compute.png`` plots the ratings against the self-play games
and CPU-hours recorded with each snapshot (a continuation keeps counting).

Cost on 2 cores: about a minute a cell, the GnuGo level-10 cells two; 4 cells a
snapshot.
"""

from eval.sweep import default_config


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = "runs/go9_lineage"
    c.checkpoints.steps = ()  # every snapshot
    c.checkpoints.label = "go9_strong"
    c.search.kinds = ("katago",)
    c.search.simulations = (64,)
    c.opponents = ("random", "uct:64", "gnugo:0", "gnugo:10")
    c.games.num_games = 16
    c.games.opening_moves = 2
    c.games.referee = "gnugo --mode gtp --chinese-rules"
    c.ratings.anchor = "random"
    return c
