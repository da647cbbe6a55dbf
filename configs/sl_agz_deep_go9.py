"""AlphaGo Zero's Fig. 4 on 9x9 with towers 4x as deep: 8 blocks, 17 convolutions.

``configs/sl_agz_arch_go9.py`` compares dual/separate heads and residual/plain
towers at 2 blocks, where a plain tower is only 5 convolutions deep. Here the
same four comparisons with ``agz_b8c16`` (8 blocks of 16 channels) and its
variants ``agz_b8c16_sep``, ``agz_b8c16_conv`` and ``agz_b8c16_sep_conv``, on
the same games, held-out set, optimiser and steps, two seeds::

    for seed in 0 1; do
      for arch in dual_res:agz_b8c16 sep_res:agz_b8c16_sep dual_conv:agz_b8c16_conv \\
                  sep_conv:agz_b8c16_sep_conv; do
        gojax train-sl --config configs/sl_agz_deep_go9.py \\
            --workdir runs/sl_agz_deep_go9/${arch%%:*}_seed$seed \\
            --config.model.preset=${arch#*:} --config.seed=$seed
      done
    done

then ``configs/sweep_agz_deep_go9.py`` plays them. Results in docs/papers/alphago_zero.md
("AlphaGo Zero: dual and residual networks").
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sl_agz_arch_go9.py"))
    c.model.preset = "agz_b8c16"
    return c
