"""AlphaGo Zero's Fig. 4 on 9x9: dual or separate heads, residual or plain convolutions.

AlphaGo Zero (Silver et al. 2017, Fig. 4) trained four networks on the same
games and compared their move prediction, value error and playing strength:
"dual-res" (its own: one residual tower, both heads), "sep-res" (a policy net
and a value net, each a residual tower), "dual-conv" and "sep-conv" (the
same without the skip connections; AlphaGo's nets were "sep-conv"). Here:
``agz_tiny`` (2 blocks x 16 channels) and its variants ``agz_tiny_sep``,
``agz_tiny_conv`` and ``agz_tiny_sep_conv`` (``gojax.nn.AlphaGoZeroNet``'s
``separate`` and ``residual``), on the 4,000 self-play games of
``configs/agz_data_go9.py``; the newest 192 games (the last 6 iterations) are
held out. Three seeds of each (another initialisation and order of the data)::

    for seed in 0 1 2; do
      for arch in dual_res:agz_tiny sep_res:agz_tiny_sep dual_conv:agz_tiny_conv \\
                  sep_conv:agz_tiny_sep_conv; do
        gojax train-sl --config configs/sl_agz_arch_go9.py \\
            --workdir runs/sl_agz_arch_go9/${arch%%:*}_seed$seed \\
            --config.model.preset=${arch#*:} --config.seed=$seed
      done
    done

then ``configs/sweep_agz_arch_go9.py`` plays them. Results in
docs/papers/alphago_zero.md ("AlphaGo Zero: dual and residual networks").

AdamW 2e-3, batch 128, 4,000 steps: 512,000 samples, one pass over the
411,508 positions of the 3,808 training games (each position drawn 1.25
times on average, with a random symmetry, from a 300,000-position shuffle
window); the 22,637 held-out positions are evaluated every 500 steps. The
separate nets' two towers train together, each by its own loss alone (the
policy loss reaches only the policy tower, the value loss only the value
tower). Cost (2 CPU cores): under 2 minutes a run since 2026-12-04 (about 12
minutes before, when replaying each game recompiled the board's setup).
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sl_go9.py"))
    c.data.sgf_dir = "runs/agz_data_go9/sgf"
    c.data.holdout_games = 192
    c.data.holdout_from = "last"
    c.data.window = 300_000
    c.data.min_size = 10_000
    c.data.games_per_chunk = 32
    c.data.samples_per_position = 1.25  # one pass: 4,000 x 128 samples of 411,508
    c.learner.total_steps = 4_000
    c.train.total_steps = 4_000
    c.train.max_minutes = 0.0
    c.train.checkpoint_every = 1_000
    c.train.eval_every = 500
    return c
