"""The layers the networks of ``gojax.nn`` are built from: KataGo's activations, its
global and value-head pooling, masked BatchNorm, and the convolutions (XLA's, or on a CPU
the Winograd kernel of ``gojax.winograd``, with the input convolution split at a multiple
of 16 planes).

Separate from the nets because every net shares them (KataGo's, AlphaGo Zero's,
AlphaGo's) and they hold the arithmetic the loaded weights must reproduce exactly: the
masking, the pooling, the convolution paths. Public names are re-exported by
``gojax.nn``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

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
