"""Flax networks: KataGo's residual net with global pooling, and AlphaGo Zero's net.

Both take NHWC inputs and return a dict of raw (pre-softmax, pre-tanh) outputs.

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
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from gojax import winograd

ORDINARY = "ordinary"
GPOOL = "gpool"
BLOCK_KINDS = (ORDINARY, GPOOL)
# A nested bottleneck block is the tuple ``(NESTED, kind, kind, ...)`` of its inner blocks.
NESTED = "nested"
# Activations after every BatchNorm (and in the heads' hidden layers): KataGo's kinds.
ACTIVATIONS = ("relu", "mish", "silu", "identity")
# BatchNorm epsilon of every net here (flax's default); loaded nets rely on it (var = 1 - eps).
BN_EPSILON = 1e-5
# Variable collection of the Winograd-transformed 3x3 kernels (see with_winograd_kernels).
WINOGRAD = "winograd"


@dataclasses.dataclass(frozen=True)
class KataGoConfig:
    """Shape of a KataGo net (hashable, so it can be a Flax module attribute).

    Attributes:
      blocks: kind of each residual block in order, ``"ordinary"``, ``"gpool"`` or a
        nested bottleneck block ``("nested", kind, ...)`` (KataGo's
        ``nested_bottleneck_block``, the "nbt" nets): a 1x1 convolution from ``C`` down
        to ``mid_channels``, the inner ordinary/gpool blocks on a ``mid_channels``-wide
        stream, a 1x1 convolution back up to ``C``, all one residual step.
      trunk_channels: residual stream width ``C``.
      mid_channels: inner width of ordinary blocks (and the stream of nested ones).
      regular_channels: inner width of the regular path of gpool blocks.
      gpool_channels: width of the pooled path of gpool blocks.
      policy_channels: policy head conv width (``p1``).
      policy_gpool_channels: policy head pooled-path width (``g1``).
      value_channels: value head conv width (``v1``).
      value_hidden: value head hidden layer width (``v2``).
      score_channels: raw score outputs: 4 for model version 8, 6 from version 9.
      num_spatial: spatial input planes (22 for KataGo's input version 7).
      num_global: global inputs (19 for input version 7).
      initial_kernel: side of the first conv (5 in g170 nets).
      block_kernel: side of the convs inside residual blocks (3).
      bn_epsilon: BatchNorm epsilon.
      policy_outputs: policy head output channels: 1 (the move to play), or 2 (and
        the opponent's reply after it, KataGo's auxiliary target; Wu 2019, sec. 4.1);
        with ``optimistic_policy`` 2 or 4 (KataGo model versions 12-15 and 16), or 3
        (a net in training: channel 2 is the opponent's reply).
      optimistic_policy: channel 1 is KataGo's "optimistic" policy (model version >= 12)
        rather than the opponent's reply; channels 2 and 3 of a version-16 net (Q-value
        predictions) are computed and not returned, as KataGo's engine ignores them.
      td_outputs: the value head also predicts, from its hidden layer, the value
        (``[win, loss, noResult]`` logits) and the score lead (units of 20 points) at
        KataGo's three temporal-difference horizons (long, mid, short): training
        targets only, for the short-term error outputs (``score_channels`` 6).
      activation: the activation after every BatchNorm and of the value head's hidden
        layer: ``"relu"`` (every net before model version 11), ``"mish"``, ``"silu"``.
      pass_activation: ``None``: the pass logits are one bias-free matmul of the policy
        head's pooled vector (model version < 15); else (version >= 15) a hidden layer
        of ``policy_channels`` units with a bias and this activation comes first.
    """

    blocks: tuple[str | tuple[str, ...], ...]
    trunk_channels: int
    mid_channels: int
    regular_channels: int
    gpool_channels: int
    policy_channels: int
    policy_gpool_channels: int
    value_channels: int
    value_hidden: int
    score_channels: int = 4
    num_spatial: int = 22
    num_global: int = 19
    initial_kernel: int = 5
    block_kernel: int = 3
    bn_epsilon: float = BN_EPSILON
    policy_outputs: int = 1
    optimistic_policy: bool = False
    td_outputs: bool = False
    activation: str = "relu"
    pass_activation: str | None = None

    def __post_init__(self) -> None:
        for block in self.blocks:
            inner = block[1:] if isinstance(block, tuple) and block[:1] == (NESTED,) else (block,)
            unknown = [kind for kind in inner if kind not in BLOCK_KINDS]
            if unknown or not inner:
                raise ValueError(
                    f"unknown block {block!r} (known: {BLOCK_KINDS}, or ({NESTED!r}, kind, ...) "
                    "of those)"
                )
        if self.score_channels not in (4, 6):
            raise ValueError(f"score_channels must be 4 or 6, not {self.score_channels}")
        allowed = (2, 3, 4) if self.optimistic_policy else (1, 2)
        if self.policy_outputs not in allowed:
            with_optimistic = " with optimistic_policy" if self.optimistic_policy else ""
            choices = ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}"
            raise ValueError(
                f"policy_outputs must be {choices}{with_optimistic}, not {self.policy_outputs}"
            )
        for name in ("activation", "pass_activation"):
            value = getattr(self, name)
            if value not in ACTIVATIONS and not (name == "pass_activation" and value is None):
                raise ValueError(f"{name} must be one of {ACTIVATIONS}, not {value!r}")


def activate(kind: str, x: jax.Array) -> jax.Array:
    """KataGo's activation ``kind`` (one of ``ACTIVATIONS``) applied to ``x``."""
    if kind == "relu":
        return nn.relu(x)
    if kind == "mish":
        return x * jnp.tanh(jax.nn.softplus(x))
    if kind == "silu":
        return jax.nn.silu(x)
    return x


def _pool_inputs(x: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sum over the board, mean and ``sqrt(area) - 14`` of a masked ``[B, H, W, C]`` map.

    Returns ``mean [B, C]``, ``b = sqrt(area) - 14`` as ``[B, 1]``, and the
    float32 ``x``. Pooling runs in float32 whatever the compute dtype.
    """
    x = x.astype(jnp.float32)
    area = jnp.sum(mask.astype(jnp.float32), axis=(1, 2))  # [B, 1]
    # An all-off-board row (batch padding) would divide by zero; its outputs are junk anyway.
    area = jnp.maximum(area, 1.0)
    mean = jnp.sum(x, axis=(1, 2)) / area
    return mean, jnp.sqrt(area) - 14.0, x


def global_pool(x: jax.Array, mask: jax.Array) -> jax.Array:
    """KataGo's gpool of a post-activation, masked map: ``[B, H, W, C] -> [B, 3C]``.

    ``[mean, mean * (sqrt(area) - 14) / 10, max over on-board points]``,
    channel-blocked. The size term lets one net adapt to the board size.
    """
    mean, b, x = _pool_inputs(x, mask)
    # KataGo's max starts at -1 and sees off-board points as -1: below any ReLU, Mish
    # (>= -0.31) or SiLU (>= -0.28) value, so the max of on-board points, floored at -1.
    on_board = mask.astype(jnp.float32) > 0
    maximum = jnp.maximum(_board_max(jnp.where(on_board, x, -1.0)), -1.0)
    return jnp.concatenate([mean, mean * (b * 0.1), maximum], axis=-1)


def _board_max(x: jax.Array) -> jax.Array:
    """``max`` over the board, ``[B, H, W, C] -> [B, C]``, whose gradient goes to the
    first point holding it.

    ``jnp.max``'s gradient divides by how many points equal the max. XLA may compute
    ``x`` twice, in two fusions that round differently (the max in one, the equality
    test in the other); then no point equals the max, the count is 0 and the gradient
    NaN (seen training the ``tiny`` net on the CPU at XLA optimisation level 0). The
    gradient here is a one-hot of the argmax: no division, and inference is unchanged.
    """
    batch, height, width, channels = x.shape
    return _max_over_points(x.reshape(batch, height * width, channels))


@jax.custom_vjp
def _max_over_points(flat: jax.Array) -> jax.Array:
    """``[B, P, C] -> [B, C]``; see ``_board_max``."""
    return jnp.max(flat, axis=1)


def _max_over_points_forward(flat: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    first = jnp.argmax(flat, axis=1)  # [B, C]
    points = jnp.arange(flat.shape[1], dtype=first.dtype)  # [P]: its length is P, for the VJP
    return jnp.max(flat, axis=1), (first, points)


def _max_over_points_backward(residual, g: jax.Array) -> tuple[jax.Array]:
    first, points = residual
    return (jnp.where(points[None, :, None] == first[:, None, :], g[:, None, :], 0.0),)


_max_over_points.defvjp(_max_over_points_forward, _max_over_points_backward)


def value_pool(x: jax.Array, mask: jax.Array) -> jax.Array:
    """KataGo's value-head pooling: ``[B, H, W, C] -> [B, 3C]``.

    ``[mean, mean * (sqrt(area) - 14) / 10, mean * ((sqrt(area) - 14)^2 / 100 - 0.1)]``.
    """
    mean, b, _ = _pool_inputs(x, mask)
    return jnp.concatenate([mean, mean * (b * 0.1), mean * (b * b * 0.01 - 0.1)], axis=-1)


def _bn_relu(
    name: str,
    x: jax.Array,
    mask: jax.Array,
    train: bool,
    epsilon: float,
    momentum: float,
    dtype: Any,
    activation: str = "relu",
) -> jax.Array:
    """BatchNorm -> activation (ReLU unless told) -> times mask, the step before every conv.

    Must be called inside a compact method: it creates the ``BatchNorm``
    submodule ``name`` there. In training the statistics use on-board points only.
    """
    bn = nn.BatchNorm(
        use_running_average=not train,
        momentum=momentum,
        epsilon=epsilon,
        dtype=dtype,
        name=name,
    )
    stats_mask = jnp.broadcast_to(mask > 0, x.shape) if train else None
    return activate(activation, bn(x, mask=stats_mask)) * mask.astype(dtype)


def _bn_relu_in(module: nn.Module, mask: jax.Array, train: bool) -> Callable[..., jax.Array]:
    """``_bn_relu`` bound to a block's config, momentum and dtype: call it as ``bnr(name, x)``."""
    return functools.partial(
        _bn_relu,
        mask=mask,
        train=train,
        epsilon=module.config.bn_epsilon,
        momentum=module.bn_momentum,
        dtype=module.dtype,
        activation=module.config.activation,
    )


def _conv(features: int, kernel: int, name: str, dtype: Any) -> nn.Conv:
    """Bias-free 'same' cross-correlation, as KataGo's convs (HWIO kernel)."""
    return nn.Conv(
        features,
        (kernel, kernel),
        padding="SAME",
        use_bias=False,
        dtype=dtype,
        name=name,
    )


def _conv_kernel(module: nn.Module, size: int, c_in: int, features: int) -> jax.Array:
    """``module``'s ``kernel [size, size, c_in, features]``: ``nn.Conv``'s parameter
    (name, shape, initialiser, float32) for the convolutions gojax writes itself."""
    shape = (size, size, c_in, features)
    return module.param("kernel", nn.linear.default_kernel_init, shape, jnp.float32)


class _Kernel(nn.Module):
    """The kernel of a :func:`_conv`, alone: lets convolutions of the same input run as
    one while keeping their own parameters."""

    features: int
    kernel_size: int

    @nn.compact
    def __call__(self, c_in: int) -> jax.Array:
        return _conv_kernel(self, self.kernel_size, c_in, self.features)


class _InputConv(nn.Module):
    """:func:`_conv` for input planes whose count is a multiple of 16 plus a few.

    The same parameter (``kernel [k, k, C_in, C_out]``, ``nn.Conv``'s initialiser)
    and the same result, computed as a convolution over the first ``16 * (C_in //
    16)`` planes plus, for each of the ``C_in % 16 <= 4`` others, ``k * k`` shifted
    multiply-adds that XLA fuses into one elementwise pass. XLA's CPU convolutions
    pack input channels in blocks: AlphaGo Zero's 17 planes into 16 channels on
    9x9 at batch 256 took 577 us as one convolution and 471 us split (Eigen), 1,571
    and 485 us (YNNPACK); a b1c16 Gumbel search at batch 256 ran 3.4% faster for it.
    On a CPU the aligned part goes to the Winograd kernel (``agz_tiny`` on 9x9 at
    batch 64: 1.26-1.32x -> 1.40-1.41x XLA's whole pass).
    """

    features: int
    kernel_size: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k, c_in = self.kernel_size, x.shape[-1]
        kernel = _conv_kernel(self, k, c_in, self.features)
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        aligned = 16 * (c_in // 16)
        if aligned == 0 or c_in - aligned > 4:
            return _convolve(x, kernel)
        out = _conv_by(self, x[..., :aligned], kernel[:, :, :aligned])
        if aligned == c_in:
            return out
        h, w = x.shape[1:3]
        pad = k // 2
        rest = jnp.pad(x[..., aligned:], ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        for i in range(k):
            for j in range(k):
                out = out + rest[:, i : i + h, j : j + w, :] @ kernel[i, j, aligned:]
        return out


def _convolve(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """'same' cross-correlation, NHWC input and HWIO kernel (``nn.Conv``'s arithmetic)."""
    return jax.lax.conv_general_dilated(
        x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _conv_by(
    module: nn.Module, x: jax.Array, kernel: jax.Array, keep_kernel: bool = False
) -> jax.Array:
    """``module``'s 'same' convolution of ``x`` by ``kernel``: Winograd on a CPU for 3x3.

    3x3 kernels go to :func:`gojax.winograd.conv3x3` (XLA's convolution off the
    CPU, for other dtypes or channel counts), with the transformed kernel the
    module holds in the ``winograd`` collection when :func:`with_winograd_kernels`
    prepared one, else transformed in the call (~0.1 ms a 96x96 kernel: noticeable
    at batch 1, nothing at batch 256). ``keep_kernel``: ``kernel`` is computed from
    parameters (two kernels side by side): prepare it too, since calls on a few
    boards read it instead of ``u`` (see ``gojax.winograd.SMALL_TILES``).
    """
    if not winograd.applicable(x.shape, x.dtype, kernel.shape):
        return _convolve(x, kernel)
    if module.is_mutable_collection(WINOGRAD) and not module.is_initializing():
        module.put_variable(WINOGRAD, "u", winograd.transform_kernel(kernel))
        if keep_kernel:
            module.put_variable(WINOGRAD, "kernel", kernel)
    if module.has_variable(WINOGRAD, "kernel"):
        kernel = module.get_variable(WINOGRAD, "kernel")
    u = module.get_variable(WINOGRAD, "u") if module.has_variable(WINOGRAD, "u") else None
    return winograd.conv3x3(x, kernel, u)


class _SameConv(nn.Module):
    """:func:`_conv` (same parameter, same result) through :func:`_conv_by`."""

    features: int
    kernel_size: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = _conv_kernel(self, self.kernel_size, x.shape[-1], self.features)
        return _conv_by(self, x.astype(self.dtype), kernel.astype(self.dtype))


class _OrdinaryBlock(nn.Module):
    """Pre-activation residual block: ``x + w2(bnrelu(w1(bnrelu(x))))``. ``[B,H,W,C]``.

    ``C`` is the trunk's width, or ``mid_channels`` inside a nested bottleneck block.
    """

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, train: bool) -> jax.Array:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        k = cfg.block_kernel
        h = bnr("norm1", x)
        h = _SameConv(cfg.mid_channels, k, self.dtype, name="w1")(h)
        h = bnr("norm2", h)
        h = _SameConv(x.shape[-1], k, self.dtype, name="w2")(h)
        return x + h


class _GPoolBlock(nn.Module):
    """Residual block whose regular path gets a channel bias from a pooled path. ``[B,H,W,C]``
    (``C`` as in ``_OrdinaryBlock``)."""

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, train: bool) -> jax.Array:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        k = cfg.block_kernel
        a = bnr("norm1", x)
        # The regular and pooled paths read the same input: one convolution with both
        # kernels side by side (bit-identical outputs; 96 -> 64 + 32 channels on 19x19 at
        # batch 16 took 2.49 ms as two Eigen convolutions, 2.21 ms as one).
        w1a = _Kernel(cfg.regular_channels, k, name="w1a")(a.shape[-1])
        w1b = _Kernel(cfg.gpool_channels, k, name="w1b")(a.shape[-1])
        both = jnp.concatenate([w1a, w1b], axis=-1).astype(self.dtype)
        r, g = jnp.split(
            _conv_by(self, a.astype(self.dtype), both, keep_kernel=True),
            [cfg.regular_channels],
            axis=-1,
        )
        g = bnr("norm1b", g)
        pooled = global_pool(g, mask)  # [B, 3 * gpool_channels]
        bias = nn.Dense(cfg.regular_channels, use_bias=False, dtype=self.dtype, name="w1r")(pooled)
        r = r + bias[:, None, None, :].astype(r.dtype)
        h = bnr("norm2", r)
        h = _SameConv(x.shape[-1], k, self.dtype, name="w2")(h)
        return x + h


class _NestedBlock(nn.Module):
    """KataGo's nested bottleneck block ``(NESTED, kind, ...)``: ``[B,H,W,C]``.

    ``x + wq(bnrelu(blocks(wp(bnrelu(x)))))``: 1x1 convolutions ``wp`` (``C`` to
    ``mid_channels``) and ``wq`` (back), with the inner residual blocks (``inner1``,
    ...) on the ``mid_channels``-wide stream between them.
    """

    config: KataGoConfig
    kinds: tuple[str, ...]
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, train: bool) -> jax.Array:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        h = _conv(cfg.mid_channels, 1, "wp", self.dtype)(bnr("normp", x))
        kw = dict(config=cfg, dtype=self.dtype, bn_momentum=self.bn_momentum)
        for i, kind in enumerate(self.kinds):
            block = _OrdinaryBlock if kind == ORDINARY else _GPoolBlock
            h = block(**kw, name=f"inner{i + 1}")(h, mask, train)
        return x + _conv(x.shape[-1], 1, "wq", self.dtype)(bnr("normq", h))


class _PolicyHead(nn.Module):
    """Board logits ``[B, H*W, K]`` and pass logits ``[B, K]`` from the trunk ``[B,H,W,C]``
    (``K = policy_outputs``)."""

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, t: jax.Array, mask: jax.Array, train: bool) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        p = _conv(cfg.policy_channels, 1, "p1", self.dtype)(t)
        g = bnr("g1_norm", _conv(cfg.policy_gpool_channels, 1, "g1", self.dtype)(t))
        pooled = global_pool(g, mask)
        bias = nn.Dense(cfg.policy_channels, use_bias=False, dtype=self.dtype, name="g2")(pooled)
        p = bnr("p1_norm", p + bias[:, None, None, :].astype(p.dtype))
        k = cfg.policy_outputs
        board = _conv(k, 1, "p2", self.dtype)(p)
        if cfg.pass_activation is None:
            # Version < 15: the pass logit is one bias-free matmul of the same pooled vector.
            pass_logit = nn.Dense(k, use_bias=False, dtype=self.dtype, name="pass")(pooled)
        else:
            hidden = nn.Dense(cfg.policy_channels, dtype=self.dtype, name="pass1")(pooled)
            hidden = activate(cfg.pass_activation, hidden)
            pass_logit = nn.Dense(k, use_bias=False, dtype=self.dtype, name="pass")(hidden)
        b, h, w, _ = board.shape
        return board.reshape(b, h * w, k), pass_logit


class _ValueHead(nn.Module):
    """Value logits ``[B, 3]``, score ``[B, 4|6]`` and ownership ``[B, H*W]``; with
    ``td_outputs`` also ``td_value_logits [B, 3, 3]`` (horizon, outcome) and raw
    ``td_score [B, 3]`` (units of 20 points)."""

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, t: jax.Array, mask: jax.Array, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        v = _conv(cfg.value_channels, 1, "v1", self.dtype)(t)
        v = _bn_relu_in(self, mask, train)("v1_norm", v)  # [B, H, W, value_channels]
        pooled = value_pool(v, mask)
        h = activate(
            cfg.activation, nn.Dense(cfg.value_hidden, dtype=self.dtype, name="v2")(pooled)
        )
        value_logits = nn.Dense(3, dtype=self.dtype, name="v3")(h)
        score = nn.Dense(cfg.score_channels, dtype=self.dtype, name="sv3")(h)
        own = _conv(1, 1, "ownership", self.dtype)(v)
        b, hh, ww, _ = own.shape
        out = {"value_logits": value_logits, "score": score, "ownership": own.reshape(b, hh * ww)}
        if cfg.td_outputs:
            td = nn.Dense(3 * 3 + 3, dtype=self.dtype, name="td")(h)
            out["td_value_logits"] = td[:, :9].reshape(b, 3, 3)
            out["td_score"] = td[:, 9:]
        return out


class KataGoNet(nn.Module):
    """KataGo's residual net with global pooling (see the module docstring).

    Call with ``spatial [B, H, W, num_spatial]`` (plane 0 = on board) and
    ``global_features [B, num_global]``; returns float32 ``policy_logits
    [B, H*W+1]``, ``value_logits [B, 3]``, ``score [B, score_channels]``,
    ``ownership [B, H*W]`` (and ``opponent_policy_logits [B, H*W+1]`` when
    ``config.policy_outputs == 2``, or 3 with the optimistic policy;
    ``optimistic_policy_logits [B, H*W+1]`` with ``config.optimistic_policy``;
    ``td_value_logits [B, 3, 3]`` and ``td_score [B, 3]`` with
    ``config.td_outputs``). With ``train=True`` the BNs use batch statistics
    and the ``batch_stats`` collection must be mutable.

    ``policy_optimism`` (KataGo model versions >= 12): ``policy_logits`` become
    ``p + (p_optimistic - p) * policy_optimism``, as KataGo's ``policyOptimism``
    (its GTP engine: 0.2 at the root of a search, 1.0 below it, 0.2 for
    ``kata-raw-nn``).
    """

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99
    policy_optimism: float = 0.0

    @nn.compact
    def __call__(
        self, spatial: jax.Array, global_features: jax.Array, train: bool = False
    ) -> dict[str, jax.Array]:
        cfg = self.config
        if spatial.shape[-1] != cfg.num_spatial or global_features.shape[-1] != cfg.num_global:
            raise ValueError(
                f"expected {cfg.num_spatial} spatial and {cfg.num_global} global inputs, got "
                f"{spatial.shape[-1]} and {global_features.shape[-1]}"
            )
        mask = spatial[..., :1].astype(self.dtype)  # [B, H, W, 1]
        x = _conv(cfg.trunk_channels, cfg.initial_kernel, "conv1", self.dtype)(spatial)
        g = nn.Dense(cfg.trunk_channels, use_bias=False, dtype=self.dtype, name="ginput")(
            global_features
        )
        x = x + g[:, None, None, :].astype(x.dtype)
        kw = dict(config=cfg, dtype=self.dtype, bn_momentum=self.bn_momentum)
        for i, kind in enumerate(cfg.blocks):
            name = f"rconv{i + 1}"
            if isinstance(kind, tuple):
                x = _NestedBlock(**kw, kinds=kind[1:], name=name)(x, mask, train)
            else:
                block = _OrdinaryBlock if kind == ORDINARY else _GPoolBlock
                x = block(**kw, name=name)(x, mask, train)
        trunk = _bn_relu_in(self, mask, train)("trunk_norm", x)
        board, pass_logit = _PolicyHead(**kw, name="policy")(trunk, mask, train)
        value = _ValueHead(**kw, name="value")(trunk, mask, train)
        logits = jnp.concatenate([board, pass_logit[:, None, :]], axis=1)  # [B, H*W+1, K]
        out = {"policy_logits": logits[..., 0], **value}
        if cfg.optimistic_policy:
            optimistic = logits[..., 1]
            out["optimistic_policy_logits"] = optimistic
            if self.policy_optimism:
                # KataGo mixes the logits: p + (p_optimistic - p) * optimism.
                out["policy_logits"] = out["policy_logits"] + self.policy_optimism * (
                    optimistic - out["policy_logits"]
                )
            if cfg.policy_outputs == 3:
                out["opponent_policy_logits"] = logits[..., 2]
        elif cfg.policy_outputs == 2:
            out["opponent_policy_logits"] = logits[..., 1]
        return {k: v.astype(jnp.float32) for k, v in out.items()}


class _AGZResBlock(nn.Module):
    """AlphaGo Zero residual block: ``relu(x + bn(conv(relu(bn(conv(x))))))``. ``[B,N,N,C]``.

    ``residual=False``: the same two layers without the skip, ``relu(bn(conv(relu(bn(conv(x))))))``.
    """

    channels: int
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99
    bn_epsilon: float = BN_EPSILON
    residual: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        bn = functools.partial(
            nn.BatchNorm,
            use_running_average=not train,
            momentum=self.bn_momentum,
            epsilon=self.bn_epsilon,
            dtype=self.dtype,
        )
        h = nn.relu(bn(name="bn1")(_SameConv(self.channels, 3, self.dtype, name="conv1")(x)))
        h = bn(name="bn2")(_SameConv(self.channels, 3, self.dtype, name="conv2")(h))
        return nn.relu(x + h if self.residual else h)


class AlphaGoZeroNet(nn.Module):
    """AlphaGo Zero's dual-head residual net (Silver et al. 2017, Methods).

    Input ``planes [B, N, N, 17]`` (``gojax.agz_planes``); returns float32
    ``policy_logits [B, N*N+1]`` (row-major from the top row, then pass) and
    ``value [B]`` in [-1, 1] for the side to move. The dense layers fix ``N``
    at ``init``.

    The variants the paper compares in its Fig. 4: ``residual=False`` ("conv")
    drops the blocks' skip connections, leaving a plain stack of
    ``2 * num_blocks + 1`` convolutions; ``separate=True`` ("sep") gives the
    value head a tower of its own (``value_tower_*``), so that the policy and
    the value are two networks in one module, each trained by its own loss
    alone. The default is the paper's "dual-res".
    """

    num_blocks: int = 19
    channels: int = 256
    value_hidden: int = 256
    num_planes: int = 17
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99
    bn_epsilon: float = BN_EPSILON
    residual: bool = True
    separate: bool = False

    @nn.compact
    def __call__(self, planes: jax.Array, train: bool = False) -> dict[str, jax.Array]:
        if planes.shape[-1] != self.num_planes:
            raise ValueError(f"expected {self.num_planes} input planes, got {planes.shape[-1]}")
        bn = functools.partial(
            nn.BatchNorm,
            use_running_average=not train,
            momentum=self.bn_momentum,
            epsilon=self.bn_epsilon,
            dtype=self.dtype,
        )
        b, n, m, _ = planes.shape

        def tower(prefix: str) -> jax.Array:
            conv = _InputConv(self.channels, 3, self.dtype, name=f"{prefix}conv")
            x = nn.relu(bn(name=f"{prefix}bn")(conv(planes)))
            for i in range(self.num_blocks):
                x = _AGZResBlock(
                    self.channels,
                    self.dtype,
                    self.bn_momentum,
                    self.bn_epsilon,
                    residual=self.residual,
                    name=f"{prefix}block{i + 1}",
                )(x, train)
            return x

        x = tower("")
        value_x = tower("value_tower_") if self.separate else x
        p = nn.relu(bn(name="policy_bn")(_conv(2, 1, "policy_conv", self.dtype)(x)))
        policy = nn.Dense(n * m + 1, dtype=self.dtype, name="policy_fc")(p.reshape(b, -1))
        v = nn.relu(bn(name="value_bn")(_conv(1, 1, "value_conv", self.dtype)(value_x)))
        v = nn.relu(
            nn.Dense(self.value_hidden, dtype=self.dtype, name="value_fc1")(v.reshape(b, -1))
        )
        value = jnp.tanh(nn.Dense(1, dtype=self.dtype, name="value_fc2")(v))[:, 0]
        return {"policy_logits": policy.astype(jnp.float32), "value": value.astype(jnp.float32)}


class _ConvTower(nn.Module):
    """AlphaGo's convolutional layers: a 5x5 convolution, then ``num_layers - 1`` 3x3 ones,
    ``filters`` each, with biases and ReLU, no normalisation. ``[B, N, N, C] -> [B, N, N, F]``."""

    filters: int
    num_layers: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(self.num_layers):
            if i == 0:
                conv = _InputConv(self.filters, 5, self.dtype, name="conv1")
            else:
                conv = _SameConv(self.filters, 3, self.dtype, name=f"conv{i + 1}")
            bias = self.param(f"bias{i + 1}", nn.initializers.zeros, (self.filters,), jnp.float32)
            x = nn.relu(conv(x) + bias.astype(self.dtype))
        return x


class AlphaGoNet(nn.Module):
    """AlphaGo's policy and value networks (Silver et al. 2016, Methods), side by side.

    Input ``planes [B, N, N, 49]`` (``gojax.alphago_planes``). Returns float32
    ``policy_logits [B, N*N+1]`` (pass last) and ``value [B]`` in [-1, 1] for the
    side to move, from two networks that share nothing:

    * policy: the first 48 planes; a 5x5 convolution and ``num_layers - 2`` 3x3
      ones (``filters`` each, ReLU), then a 1x1 convolution to one filter with a
      bias of its own at every point. The paper's net has no pass output; here
      pass gets one logit, linear in the last hidden layer's mean over the board.
    * value: all 49 planes; the same convolutions, a 1x1 convolution to one
      filter (ReLU), a dense layer of ``value_hidden`` (ReLU), one tanh unit.

    The paper's nets: ``num_layers=13`` and ``filters=192`` (the match version;
    it also tried 128, 256 and 384). No batch norm. The per-point biases and the
    dense layer fix ``N`` at ``init``.

    ``raw_inputs`` ablates the hand-made features as the paper did: the net
    zeroes planes 12-47 and sees only the board, the move history (turns since)
    and the colour, the same parameters (the paper: 57.0% of expert moves
    predicted with every feature, 55.7% with these).
    """

    filters: int = 192
    num_layers: int = 13
    value_hidden: int = 256
    num_planes: int = 49
    raw_inputs: bool = False
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, planes: jax.Array, train: bool = False) -> dict[str, jax.Array]:
        del train  # nothing behaves differently in training: no BN, no dropout
        if planes.shape[-1] != self.num_planes:
            raise ValueError(f"expected {self.num_planes} input planes, got {planes.shape[-1]}")
        b, n, m, _ = planes.shape
        planes = planes.astype(self.dtype)
        if self.raw_inputs:  # planes 0-11 (stones, ones, turns since) and the colour
            planes = planes * (jnp.arange(self.num_planes) < 12).at[48].set(True)
        hidden = self.num_layers - 1

        p = _ConvTower(self.filters, hidden, self.dtype, name="policy")(planes[..., :48])
        board = nn.Dense(1, use_bias=False, dtype=self.dtype, name="policy_out")(p)
        point_bias = self.param("policy_bias", nn.initializers.zeros, (n * m,), jnp.float32)
        board = board.reshape(b, n * m).astype(jnp.float32) + point_bias
        pass_logit = nn.Dense(1, dtype=self.dtype, name="policy_pass")(p.mean(axis=(1, 2)))
        policy = jnp.concatenate([board, pass_logit.astype(jnp.float32)], axis=-1)

        v = _ConvTower(self.filters, hidden, self.dtype, name="value")(planes)
        v = nn.relu(nn.Dense(1, dtype=self.dtype, name="value_conv")(v))
        v = nn.Dense(self.value_hidden, dtype=self.dtype, name="value_fc")(v.reshape(b, -1))
        v = nn.relu(v)
        value = jnp.tanh(nn.Dense(1, dtype=self.dtype, name="value_out")(v))[:, 0]
        return {"policy_logits": policy, "value": value.astype(jnp.float32)}


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
