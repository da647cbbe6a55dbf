"""19x19 with KataGo's current architecture, b18c384nbt with Mish: a long run on many hosts.

Run (every host of a TPU pod slice or GPU cluster; see docs/training.md)::

    gojax train --config configs/go19_b18c384nbt.py --workdir runs/go19_b18c384nbt \\
        --config.multihost=true

The net is KataGo's b18c384nbt (18 nested bottleneck blocks, 384 channels,
192 inside; 26.5M parameters) with the Mish activation of KataGo's kata1 runs
(``model.activation``) and KataGo's short-term heads, exported by ``gojax
export`` as a model-version-12 file that KataGo's engine reads. The recipe is
``go19_b10c128.py``'s (KataGo's: playout-cap randomisation, forced playouts
with policy target pruning, ownership, score and opponent-reply targets, the
short-term heads and optimistic policy, resignation with 10% no-resign
games) with a bigger batch and a longer schedule. Cost: one b18c384nbt
evaluation is about 9x a b10c128 one (multiply-adds per point); KataGo's own
kata1 run trained nets of this size for years on donated GPUs, so expect this
to be a research-scale run (weeks on a pod slice), not a benchmark.
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("go19_b10c128.py"))  # the recipe

    c.model.preset = "b18c384nbt"
    c.model.activation = "mish"

    c.selfplay.num_games = 1024
    c.replay.capacity = 500_000
    c.replay.min_size = 100_000

    c.learner.lr_boundaries = (300_000, 450_000)
    c.learner.batch_size = 2048
    c.train.total_steps = 500_000
    return c
