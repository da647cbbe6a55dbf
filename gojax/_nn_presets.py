"""The named network sizes of ``gojax.nn`` (``PRESETS``): KataGo's g170 and nested
bottleneck layouts, AlphaGo Zero's and AlphaGo's, each a ``functools.partial`` whose
docstring gives its parameter count.

Separate from the nets so that adding a size touches no architecture code. Public
through ``gojax.nn``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import flax.linen as nn

from gojax._alphago_nets import AlphaGoNet, AlphaGoZeroNet
from gojax._katago_net import KataGoConfig, KataGoNet
from gojax._nn_layers import GPOOL, NESTED, ORDINARY


def g170_blocks(num_blocks: int) -> tuple[str, ...]:
    """Block kinds for a g170-style trunk: every third block, from the third, is gpool.

    (The b6c96 preset instead copies the reference file, whose gpool blocks are 3 and 5.)
    """
    return tuple(GPOOL if (i + 1) % 3 == 0 else ORDINARY for i in range(num_blocks))


# The two nested bottleneck blocks of KataGo's "nbt" nets ("bottlenest2" and
# "bottlenest2gpool" in its training code): two inner blocks, the first one gpool or not.
NBT = (NESTED, ORDINARY, ORDINARY)
NBT_GPOOL = (NESTED, GPOOL, ORDINARY)


def nbt_blocks(num_blocks: int) -> tuple[tuple[str, ...], ...]:
    """Block kinds for KataGo's "nbt" trunks: nested bottleneck blocks of two inner blocks,
    the first inner block a gpool one in every third block from the third, except the last.

    (KataGo's b18c384nbt, b10c384nbt, b28c512nbt layouts; b5c192nbt has its own.)
    """
    return tuple(
        NBT_GPOOL if (i + 1) % 3 == 0 and i + 1 < num_blocks else NBT for i in range(num_blocks)
    )


def _katago_preset(
    name: str,
    blocks: tuple[str | tuple[str, ...], ...],
    channels: int,
    regular: int,
    gpool: int,
    head: int,
    value_hidden: int,
    params: int,
    *,
    mid: int | None = None,
    value_head: int | None = None,
) -> Callable[..., KataGoNet]:
    """A ``functools.partial(KataGoNet, config=...)`` with a docstring giving its size.

    ``mid``: the inner width of ordinary blocks and the stream of nested blocks
    (default ``channels``); ``head``: the policy head's widths, and the value head's
    unless ``value_head`` is given.
    """
    config = KataGoConfig(
        blocks=blocks,
        trunk_channels=channels,
        mid_channels=mid or channels,
        regular_channels=regular,
        gpool_channels=gpool,
        policy_channels=head,
        policy_gpool_channels=head,
        value_channels=value_head or head,
        value_hidden=value_hidden,
    )
    ctor = functools.partial(KataGoNet, config=config)
    gpools = [i + 1 for i, kind in enumerate(blocks) if GPOOL in (kind, *kind)]
    nested = all(isinstance(kind, tuple) for kind in blocks)
    kind = "nested bottleneck blocks of 2" if nested else "blocks"
    widths = f"{channels} channels, mid {mid}" if nested else f"{channels} channels"
    heads = (
        f"heads {head}" if value_head is None else f"policy head {head}, value head {value_head}"
    )
    ctor.__doc__ = (
        f"KataGoNet {name}: {len(blocks)} {kind} (gpool at {gpools}), {widths}, "
        f"regular/gpool {regular}/{gpool}, {heads}, value hidden {value_hidden}; "
        f"{params:,} parameters."
    )
    return ctor


# Parameter counts are checked by tests/test_nn.py::test_preset_parameter_counts.
tiny = _katago_preset("tiny", (ORDINARY, GPOOL), 16, 8, 8, 8, 16, 18_703)
# The reference g170 net's layout, block kinds in file order.
b6c96 = _katago_preset(
    "b6c96", (ORDINARY, ORDINARY, GPOOL, ORDINARY, GPOOL, ORDINARY), 96, 64, 32, 32, 64, 1_028_743
)
# A 9x9-sized net between tiny and b6c96 (b6c96's layout at two thirds of its width, so
# about 2.2x cheaper an evaluation): the net of configs/go9_strong.py, sized for CPU self-play.
b6c64 = _katago_preset(
    "b6c64", (ORDINARY, ORDINARY, GPOOL, ORDINARY, GPOOL, ORDINARY), 64, 48, 16, 32, 64, 482_855
)
b10c128 = _katago_preset("b10c128", g170_blocks(10), 128, 96, 32, 32, 64, 2_966_759)
b15c192 = _katago_preset("b15c192", g170_blocks(15), 192, 128, 64, 32, 80, 9_674_535)
b18c384 = _katago_preset("b18c384", g170_blocks(18), 384, 288, 96, 64, 128, 46_641_991)
b20c256 = _katago_preset("b20c256", g170_blocks(20), 256, 192, 64, 48, 80, 23_152_535)
b40c256 = _katago_preset("b40c256", g170_blocks(40), 256, 192, 64, 48, 80, 45_991_831)
b60c320 = _katago_preset("b60c320", g170_blocks(60), 320, 224, 96, 64, 96, 106_705_799)

# KataGo's nested-bottleneck ("nbt") nets, the architecture of its current kata1 runs
# (layouts as KataGo's training code names them): every block a 1x1 down to ``mid``,
# two inner blocks at that width (the first gpool in every third block), a 1x1 back up.
# The inner gpool blocks split ``mid`` into regular + gpool channels.
tiny_nbt = _katago_preset("tiny_nbt", (NBT, NBT_GPOOL), 32, 8, 8, 8, 16, 39_807, mid=16)
b5c192nbt = _katago_preset(
    "b5c192nbt", (NBT, NBT_GPOOL, NBT, NBT_GPOOL, NBT), 192, 64, 32, 32, 80, 1_946_727, mid=96
)
b10c384nbt = _katago_preset(
    "b10c384nbt", nbt_blocks(10), 384, 128, 64, 48, 112, 14_813_463, mid=192
)
b18c384nbt = _katago_preset(
    "b18c384nbt", nbt_blocks(18), 384, 128, 64, 48, 128, 26_498_855, mid=192, value_head=96
)
b28c512nbt = _katago_preset(
    "b28c512nbt", nbt_blocks(28), 512, 192, 64, 64, 144, 72_998_407, mid=256, value_head=128
)


def _agz_preset(
    name: str,
    num_blocks: int,
    channels: int,
    params: int,
    *,
    residual: bool = True,
    separate: bool = False,
) -> Callable[..., AlphaGoZeroNet]:
    """A ``functools.partial(AlphaGoZeroNet, ...)`` with a docstring giving its size."""
    ctor = functools.partial(
        AlphaGoZeroNet,
        num_blocks=num_blocks,
        channels=channels,
        residual=residual,
        separate=separate,
    )
    blocks = f"{num_blocks} residual blocks" if residual else f"{2 * num_blocks} conv layers"
    towers = "separate policy and value towers, each" if separate else "one tower"
    ctor.__doc__ = (
        f"AlphaGoZeroNet {name}: {towers} a conv block + {blocks}, {channels} channels; "
        f"{params:,} parameters at 19x19."
    )
    return ctor


# The paper's "20 block" net: one conv block and 19 residual blocks.
agz_b20c256 = _agz_preset("agz_b20c256", 19, 256, 22_827_877)
agz_tiny = _agz_preset("agz_tiny", 2, 16, 366_533)
# The other cells of the paper's Fig. 4 at agz_tiny's size: "sep-res", "dual-conv", "sep-conv".
agz_tiny_sep = _agz_preset("agz_tiny_sep", 2, 16, 378_357, separate=True)
agz_tiny_conv = _agz_preset("agz_tiny_conv", 2, 16, 366_533, residual=False)
agz_tiny_sep_conv = _agz_preset("agz_tiny_sep_conv", 2, 16, 378_357, residual=False, separate=True)
# The four again 4x as deep (8 blocks: 17 convolutions a tower), where skips should matter.
agz_b8c16 = _agz_preset("agz_b8c16", 8, 16, 394_565)
agz_b8c16_sep = _agz_preset("agz_b8c16_sep", 8, 16, 434_421, separate=True)
agz_b8c16_conv = _agz_preset("agz_b8c16_conv", 8, 16, 394_565, residual=False)
agz_b8c16_sep_conv = _agz_preset(
    "agz_b8c16_sep_conv", 8, 16, 434_421, residual=False, separate=True
)


def _alphago_preset(
    name: str, filters: int, num_layers: int, params: int, raw_inputs: bool = False
) -> Callable[..., AlphaGoNet]:
    """A ``functools.partial(AlphaGoNet, ...)`` with a docstring giving its size."""
    ctor = functools.partial(
        AlphaGoNet, filters=filters, num_layers=num_layers, raw_inputs=raw_inputs
    )
    inputs = "board and move history only" if raw_inputs else "all features"
    ctor.__doc__ = (
        f"AlphaGoNet {name}: policy and value nets of {num_layers} layers, {filters} filters, "
        f"{inputs}; {params:,} parameters at 19x19."
    )
    return ctor


# The match version of AlphaGo's networks (k = 192 filters).
alphago = _alphago_preset("alphago", 192, 13, 7_863_148)
alphago_tiny = _alphago_preset("alphago_tiny", 16, 4, 141_452)
alphago_tiny_raw = _alphago_preset("alphago_tiny_raw", 16, 4, 141_452, raw_inputs=True)

PRESETS: dict[str, Callable[..., nn.Module]] = {
    "tiny": tiny,
    "b6c96": b6c96,
    "b6c64": b6c64,
    "b10c128": b10c128,
    "b15c192": b15c192,
    "b18c384": b18c384,
    "b20c256": b20c256,
    "b40c256": b40c256,
    "b60c320": b60c320,
    "tiny_nbt": tiny_nbt,
    "b5c192nbt": b5c192nbt,
    "b10c384nbt": b10c384nbt,
    "b18c384nbt": b18c384nbt,
    "b28c512nbt": b28c512nbt,
    "agz_tiny": agz_tiny,
    "agz_tiny_sep": agz_tiny_sep,
    "agz_tiny_conv": agz_tiny_conv,
    "agz_tiny_sep_conv": agz_tiny_sep_conv,
    "agz_b8c16": agz_b8c16,
    "agz_b8c16_sep": agz_b8c16_sep,
    "agz_b8c16_conv": agz_b8c16_conv,
    "agz_b8c16_sep_conv": agz_b8c16_sep_conv,
    "agz_b20c256": agz_b20c256,
    "alphago": alphago,
    "alphago_tiny": alphago_tiny,
    "alphago_tiny_raw": alphago_tiny_raw,
}
