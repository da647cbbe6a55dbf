"""Flax networks: KataGo's residual net with global pooling, AlphaGo Zero's net and
AlphaGo's.

All take NHWC inputs and return a dict of raw (pre-softmax, pre-tanh) outputs.

**KataGoNet** follows KataGo's architecture family (model versions 8-17 without
transformer blocks, as in ``reference/KATAGO_NOTES.md`` section 2):

* trunk: a ``k x k`` input conv plus the global inputs through a matmul, added
  as a per-channel bias; pre-activation residual blocks, some of them
  global-pooling blocks, or nested bottleneck blocks of those (KataGo's "nbt"
  nets); a final BN + activation (ReLU, or Mish / SiLU from version 11);
* policy head: board logits from a 1x1 conv path biased by pooled features,
  and a pass logit from the same pooled vector (through a hidden layer from
  version 15); with ``policy_outputs=2`` a second channel predicts the
  opponent's reply (KataGo's auxiliary policy target, trained only; KataGo's
  version-8 files hold the first channel), or with ``optimistic_policy`` it is
  KataGo's optimistic policy (versions >= 12), the opponent's reply then third;
* value head: 3 value logits ``[win, loss, noResult]``, the raw score outputs
  and a 1x1-conv ownership map, all for the side to move; with ``td_outputs``
  also KataGo's training-only predictions of the value and score a few moves
  ahead (temporal-difference targets at three horizons), which no model file
  holds.

**Masking.** Spatial input plane 0 is 1 on the board and 0 elsewhere. Every
BN is followed by the activation and then multiplied by that mask; pooled means divide
by the on-board area. Conv outputs and the residual stream are not masked
(every consumer reads them through a masked BN), so one net serves every
board size up to the tensor size: pad a smaller board into the top-left of
a 19x19 tensor with plane 0 off the board, and the on-board outputs equal
those of the exact-size tensor. Off-board policy and ownership values are
garbage; the caller masks them (see ``gojax.katago_outputs``).

**BatchNorm.** Every BN is a real ``flax.linen.BatchNorm`` with a scale and
a bias (``train=True`` uses batch statistics over on-board points only and
updates the ``batch_stats`` collection; ``train=False`` uses the running
averages). A loaded KataGo net is already in inference form ``x*s + b``; it
maps onto these layers as ``scale=s, bias=b, mean=0, var=1-eps``, so that
``var + eps == 1`` and the layer computes ``x*s + b`` (see
``gojax.katago_model``).

Outputs (``B`` batch, ``H x W`` tensor, positions row-major from the top row):

* ``policy_logits [B, H*W+1]``: board points, then pass;
* ``opponent_policy_logits [B, H*W+1]`` (``policy_outputs=2`` only): the
  same for the opponent's move after this one;
* ``value_logits [B, 3]``: win, loss, noResult for the side to move;
* ``score [B, 4]`` (versions <= 8) or ``[B, 6]`` (versions >= 9): raw
  ``[scoreMean, scoreStdev, lead, varTimeLeft, (stWinlossErr, stScoreErr)]``;
* ``ownership [B, H*W]``: raw, side-to-move view (``tanh`` gives ownership).

**AlphaGoZeroNet** is the dual-head net of Silver et al. 2017 ("Mastering the
game of Go without human knowledge", Methods): 17 input planes, a 3x3 conv
tower of residual blocks with BN, a 2-filter policy head and a 1-filter value
head. It returns ``policy_logits [B, N*N+1]`` and ``value [B]`` in [-1, 1].

**AlphaGoNet** is AlphaGo's pair of networks (Silver et al. 2016, "Mastering
the game of Go with deep neural networks and tree search", Methods): a 13-layer
convolutional policy net on 48 hand-made feature planes and a value net of the
same convolutions plus the colour plane, run side by side behind the same
interface (``policy_logits``, ``value``).

**CPU convolutions.** On a CPU the 3x3 convolutions run as Winograd F(4x4, 3x3)
in a native kernel (``gojax.winograd``: 3.6x fewer multiply-adds on 19x19, as
KataGo's own CPU backend), with XLA's convolution elsewhere and for gradients.
Inference that reuses one set of weights should call
:func:`with_winograd_kernels` once: it adds the transformed kernels as a
``winograd`` collection, which the call would otherwise recompute every time.

Presets are ``functools.partial`` constructors in ``PRESETS``; their
docstrings give parameter counts (``params`` only, BN statistics excluded;
AlphaGo Zero and AlphaGo counts at 19x19, since their dense layers and per-point
biases depend on board size).

The code: the layers in ``gojax._nn_layers``, KataGo's net in ``gojax._katago_net``,
AlphaGo Zero's and AlphaGo's in ``gojax._alphago_nets``, the presets in
``gojax._nn_presets``; this module re-exports them and holds the inference helpers
(chunked batches, Winograd kernels, example inputs, parameter counts).
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from gojax import winograd
from gojax._alphago_nets import AlphaGoNet, AlphaGoZeroNet
from gojax._alphago_nets import _AGZResBlock as _AGZResBlock
from gojax._katago_net import KataGoConfig, KataGoNet
from gojax._nn_layers import (
    ACTIVATIONS,
    BLOCK_KINDS,
    BN_EPSILON,
    GPOOL,
    NESTED,
    ORDINARY,
    WINOGRAD,
    activate,
    global_pool,
    value_pool,
)
from gojax._nn_layers import _InputConv as _InputConv
from gojax._nn_presets import (
    NBT,
    NBT_GPOOL,
    PRESETS,
    agz_b8c16,
    agz_b8c16_conv,
    agz_b8c16_sep,
    agz_b8c16_sep_conv,
    agz_b20c256,
    agz_tiny,
    agz_tiny_conv,
    agz_tiny_sep,
    agz_tiny_sep_conv,
    alphago,
    alphago_tiny,
    alphago_tiny_raw,
    b5c192nbt,
    b6c64,
    b6c96,
    b10c128,
    b10c384nbt,
    b15c192,
    b18c384,
    b18c384nbt,
    b20c256,
    b28c512nbt,
    b40c256,
    b60c320,
    g170_blocks,
    nbt_blocks,
    tiny,
    tiny_nbt,
)

__all__ = [
    "ORDINARY",
    "GPOOL",
    "BLOCK_KINDS",
    "NESTED",
    "ACTIVATIONS",
    "BN_EPSILON",
    "WINOGRAD",
    "KataGoConfig",
    "activate",
    "global_pool",
    "value_pool",
    "KataGoNet",
    "AlphaGoZeroNet",
    "AlphaGoNet",
    "g170_blocks",
    "NBT",
    "NBT_GPOOL",
    "nbt_blocks",
    "tiny",
    "b6c96",
    "b6c64",
    "b10c128",
    "b15c192",
    "b18c384",
    "b20c256",
    "b40c256",
    "b60c320",
    "tiny_nbt",
    "b5c192nbt",
    "b10c384nbt",
    "b18c384nbt",
    "b28c512nbt",
    "agz_b20c256",
    "agz_tiny",
    "agz_tiny_sep",
    "agz_tiny_conv",
    "agz_tiny_sep_conv",
    "agz_b8c16",
    "agz_b8c16_sep",
    "agz_b8c16_conv",
    "agz_b8c16_sep_conv",
    "alphago",
    "alphago_tiny",
    "alphago_tiny_raw",
    "PRESETS",
    "CPU_CHUNK_POINTS",
    "default_chunk",
    "apply_in_chunks",
    "with_winograd_kernels",
    "example_inputs",
    "count_params",
]


# Board points per inference chunk on a CPU: up to 17 positions of 19x19, 75 of 9x9
# (apply_in_chunks balances them: at batch 256, chunks of 16 and 64).
CPU_CHUNK_POINTS = 6144


def default_chunk(size: int = 19) -> int | None:
    """Batch chunk for inference on ``size x size`` boards: about 6,000 points on a CPU,
    none elsewhere.

    On a CPU a b6c96 forward pass at batch 256 runs its activations (35 MB a
    layer on 19x19) out of cache and is slower per position than at a small
    batch; running the batch as a loop over chunks keeps the speed of the
    small batch. Measured at batch 256 (``bench/net.py``, 2 cores): 19x19 is
    fastest with chunks of 16-32 positions, 9x9 with 64-128. Accelerators
    want the whole batch at once.
    """
    if jax.default_backend() != "cpu":
        return None
    return max(1, CPU_CHUNK_POINTS // (size * size))


def apply_in_chunks(
    module: nn.Module, variables: Any, *inputs: jax.Array, chunk: int | None
) -> dict[str, jax.Array]:
    """``module.apply(variables, *inputs, train=False)`` over the batch in chunks of at most
    ``chunk``.

    Inputs are ``[B, ...]``; the batch is cut into the fewest chunks of at
    most ``chunk`` positions, of equal size (B=256 with ``chunk=17``: 16 of
    16), padded to whole chunks and run as a ``lax.map`` over them.
    ``chunk=None`` (or a batch no larger than one chunk) applies the module
    once. Same outputs as one call (BN uses running statistics in inference).
    """
    batch = inputs[0].shape[0]
    if chunk is None or batch <= chunk:
        return module.apply(variables, *inputs, train=False)
    chunks = -(-batch // chunk)
    chunk = -(-batch // chunks)
    pad = chunks * chunk - batch

    def split(x):
        x = jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)]) if pad else x
        return x.reshape(chunks, chunk, *x.shape[1:])

    def one(xs):
        return module.apply(variables, *xs, train=False)

    out = jax.lax.map(one, tuple(map(split, inputs)))
    return jax.tree.map(lambda x: x.reshape(chunks * chunk, *x.shape[2:])[:batch], out)


def with_winograd_kernels(module: nn.Module, variables: Any) -> Any:
    """``variables`` plus the ``winograd`` collection: every 3x3 kernel Winograd-transformed,
    for inference on a CPU; ``variables`` unchanged off the CPU or without the kernel.

    The transformed kernels (``[36, C_in, C_out]`` each, 4x the 3x3 weights) are
    read by the convolutions instead of being transformed in every call: on
    19x19 at batch 1, b6c96's twelve 96x96 transforms would cost about as much
    as its convolutions. With them go the global-pooling blocks' first two kernels
    side by side (the one kernel their joint call reads; concatenated in every call
    otherwise). They are derived data, for inference: recompute them after the
    parameters change, leave them out of checkpoints, and leave them out of
    variables you differentiate (the side-by-side copy does not lead back to the
    parameters; training never adds them).
    """
    if jax.default_backend() != "cpu" or not winograd.available():
        return variables
    base = {k: v for k, v in variables.items() if k != WINOGRAD}
    n = 19
    if isinstance(module, AlphaGoZeroNet):
        # Its dense layers fix the board size: read it off the policy layer.
        n = int(round((base["params"]["policy_fc"]["kernel"].shape[-1] - 1) ** 0.5))
    elif isinstance(module, AlphaGoNet):  # so do its per-point policy biases
        n = int(round(base["params"]["policy_bias"].shape[0] ** 0.5))
    # Enough positions for the convolutions to take the Winograd path.
    inputs = example_inputs(module, -(-winograd.MIN_POINTS // (n * n)), n)
    prepare = jax.jit(functools.partial(module.apply, train=False, mutable=[WINOGRAD]))
    _, extra = prepare(base, *inputs)
    return {**base, **extra} if extra.get(WINOGRAD) else variables


def example_inputs(module: nn.Module, batch: int = 1, size: int = 19) -> tuple[jax.Array, ...]:
    """All-on-board zero inputs with the right shapes for ``module.init``."""
    if isinstance(module, KataGoNet):
        cfg = module.config
        spatial = jnp.zeros((batch, size, size, cfg.num_spatial), jnp.float32).at[..., 0].set(1.0)
        return spatial, jnp.zeros((batch, cfg.num_global), jnp.float32)
    if isinstance(module, AlphaGoZeroNet | AlphaGoNet):
        return (jnp.zeros((batch, size, size, module.num_planes), jnp.float32),)
    raise TypeError(f"no example inputs for {type(module).__name__}")


def count_params(module: nn.Module, size: int = 19) -> int:
    """Number of trainable parameters (``params`` collection), without running anything."""
    shapes = jax.eval_shape(
        lambda: module.init(jax.random.PRNGKey(0), *example_inputs(module, 1, size))
    )
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(shapes["params"])))
