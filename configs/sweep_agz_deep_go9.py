"""The four 8-block networks of ``configs/sl_agz_deep_go9.py`` played against each other.

Run (after that file's ``gojax train-sl`` commands)::

    gojax sweep --config configs/sweep_agz_deep_go9.py --workdir runs/agz_deep_go9_sweep

then the sep-conv net against the two nets that differ from it in one
factor::

    R=runs/sl_agz_deep_go9
    gojax sweep --config configs/sweep_agz_deep_go9.py \\
        --workdir runs/agz_deep_go9_sweep_sep_conv \\
        --config.checkpoints.workdir=$R/sep_conv_seed0 --config.checkpoints.label=sep_conv_seed0 \\
        "--config.opponents=('run:$R/sep_res_seed0', 'run:$R/dual_conv_seed0')"

and both again for the second seed's nets, without the fixed opponents::

    gojax sweep --config configs/sweep_agz_deep_go9.py --workdir runs/agz_deep_go9_sweep_seed1 \\
        --config.checkpoints.workdir=$R/dual_res_seed1 --config.checkpoints.label=dual_res_seed1 \\
        "--config.opponents=('run:$R/sep_res_seed1', 'run:$R/dual_conv_seed1', \\
                             'run:$R/sep_conv_seed1')"
    gojax sweep --config configs/sweep_agz_deep_go9.py \\
        --workdir runs/agz_deep_go9_sweep_sep_conv_seed1 \\
        --config.checkpoints.workdir=$R/sep_conv_seed1 --config.checkpoints.label=sep_conv_seed1 \\
        "--config.opponents=('run:$R/sep_res_seed1', 'run:$R/dual_conv_seed1')"

The grid is ``configs/sweep_agz_arch_go9.py``'s (PUCT 16, 128 games a cell,
9x9, komi 7, the data's 120-move cap, two random opening moves) with the
dual-res 8-block net against the other three, random and 16-playout UCT.
"""

from pathlib import Path

from train.loop import load_config

RUNS = "runs/sl_agz_deep_go9"


def get_config():
    c = load_config(Path(__file__).with_name("sweep_agz_arch_go9.py"))
    # The same grid, each net replaced by its 8-block counterpart.
    shallow = "runs/sl_agz_arch_go9"
    c.checkpoints.workdir = c.checkpoints.workdir.replace(shallow, RUNS)
    c.opponents = tuple(name.replace(shallow, RUNS) for name in c.opponents)
    return c
