"""KataGo's PUCT in self-play on 9x9 with its score utility, against the value-only arm.

The second arm of docs/papers/katago.md ("KataGo: its PUCT in self-play"):
``configs/katago_puct_go9.py`` (KataGo's PUCT on the value alone) with KataGo's
score utility added to every playout's value, at KataGo's weights (0.1 static,
0.3 dynamic; ``gojax._utility``), read from the net's own score heads: the mean
from the trained lead channel, the deviation from the stdev channel, which this
recipe does not train (``learner.score_stdev_weight`` 0: as initialised, about
14 points, a fixed smoothing). Everything else is that arm's and the
controls'. Three seeds::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_puct_score_go9.py --workdir runs/kpuct_score \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_puct_score_go9.py --workdir runs/kpuct_score_seed1 \\
        --config.learner.num_devices=1 --config.seed=1
    gojax train --config configs/katago_puct_score_go9.py --workdir runs/kpuct_score_seed2 \\
        --config.learner.num_devices=1 --config.seed=2

then ``configs/sweep_katago_puct_go9.py`` with ``--config.checkpoints.workdir``
and ``--config.checkpoints.label`` set to each run, against the three
``aux_on`` control nets (docs/papers/katago.md has the command lines).
"""

from pathlib import Path

from gojax.search import SearchConfig
from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("katago_puct_go9.py"))
    c.selfplay.static_score_utility = SearchConfig.static_score_utility
    c.selfplay.dynamic_score_utility = SearchConfig.dynamic_score_utility
    return c
