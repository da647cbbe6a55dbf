"""The four networks of ``configs/sl_agz_arch_go9.py`` played against each other.

Run (after that file's ``gojax train-sl`` commands)::

    gojax sweep --config configs/sweep_agz_arch_go9.py --workdir runs/agz_arch_go9_sweep

Grid: the final "dual-res" net (``runs/sl_agz_arch_go9/dual_res_seed0``)
with a 16-simulation PUCT search x opponents random, 16-playout UCT and the
final nets of the three other architectures (``run:`` opponents, searched
exactly as the cell's agent): 5 cells of 128 games (9x9, komi 7, the data's
120-move cap, colour pairs opening with two random moves, every search over
the sensible moves). The "sep-conv" net against "sep-res" and "dual-conv"
completes the four comparisons of one factor at a time (dual against sep
with residual and with plain towers, residual against plain with dual and
with separate heads)::

    R=runs/sl_agz_arch_go9
    gojax sweep --config configs/sweep_agz_arch_go9.py --workdir runs/agz_arch_go9_sweep_sep_conv \
        --config.checkpoints.workdir=$R/sep_conv_seed0 --config.checkpoints.label=sep_conv_seed0 \
        "--config.opponents=('run:$R/sep_res_seed0', 'run:$R/dual_conv_seed0')"

and both again for the second seed's nets (and the third's, ``seed2`` in every path
and label), without the fixed opponents::

    gojax sweep --config configs/sweep_agz_arch_go9.py --workdir runs/agz_arch_go9_sweep_seed1 \\
        --config.checkpoints.workdir=$R/dual_res_seed1 --config.checkpoints.label=dual_res_seed1 \\
        "--config.opponents=('run:$R/sep_res_seed1', 'run:$R/dual_conv_seed1', \\
                             'run:$R/sep_conv_seed1')"
    gojax sweep --config configs/sweep_agz_arch_go9.py \\
        --workdir runs/agz_arch_go9_sweep_sep_conv_seed1 \\
        --config.checkpoints.workdir=$R/sep_conv_seed1 --config.checkpoints.label=sep_conv_seed1 \\
        "--config.opponents=('run:$R/sep_res_seed1', 'run:$R/dual_conv_seed1')"
"""

from eval.sweep import default_config

RUNS = "runs/sl_agz_arch_go9"


def get_config():
    c = default_config()
    c.seed = 0
    c.checkpoints.workdir = f"{RUNS}/dual_res_seed0"
    c.checkpoints.steps = (-1,)
    c.checkpoints.label = "dual_res_seed0"
    c.search.kinds = ("puct",)
    c.search.simulations = (16,)
    c.search.c_puct = (1.25,)
    c.opponents = (
        "random",
        "uct:16",
        f"run:{RUNS}/sep_res_seed0",
        f"run:{RUNS}/dual_conv_seed0",
        f"run:{RUNS}/sep_conv_seed0",
    )
    c.board.max_moves = 120  # the data's cap (an SL run's config has none)
    c.games.num_games = 128
    c.games.batch_size = 0
    c.games.opening_moves = 2
    c.ratings.anchor = "random"
    return c
