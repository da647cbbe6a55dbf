"""3x3 convolutions on the CPU by Winograd's F(4x4, 3x3), a native kernel called from XLA.

A direct 3x3 convolution multiplies every board point by nine taps; Winograd's
minimal filtering computes each 4x4 block of outputs from a 6x6 block of inputs
with 36 products per channel pair instead of 144, and on a 19x19 board (25
blocks) does 3.6x fewer multiply-adds than the direct form (9x9: 2.25x).
KataGo's own CPU backend computes its convolutions this way. XLA's CPU backend
does not, and written in jnp the transforms cost more than they save (the
strided gathers and 36 small matmuls ran 0.5-1.5x the direct convolution), so
``_winograd.cc`` does the whole convolution in one pass over cache-sized chunks
of tiles, called through ``jax.ffi``.

The kernel is compiled on first use with the system's C++ compiler (``$CXX`` or
``c++``) for this CPU (``-march=native``) into a cache folder
(``$GOJAX_WINOGRAD_CACHE``, else ``$GOJAX_NATIVE_CACHE``, else
``$XDG_CACHE_HOME/gojax``, else ``~/.cache/gojax``), keyed by the source, the
flags, jaxlib and the CPU, and loaded from there afterwards (``gojax._native``).
Without a compiler, with ``GOJAX_WINOGRAD=0``, on other platforms (GPU, TPU)
or other dtypes, :func:`conv3x3` is XLA's direct convolution; results agree to
float32 rounding (relative 1e-5).

The kernel is the forward pass only: gradients are the direct convolution's
(``jax.custom_vjp``), so training differentiates exactly what it always did.

Shapes: ``x [..., H, W, C_in]`` (NHWC), ``kernel [3, 3, C_in, C_out]`` (HWIO, as
``flax.linen.Conv``), transformed kernel ``u [36, C_in, C_out]``; C_in a multiple
of 8 and C_out of 16 (every KataGo trunk: 32...512 channels).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np

from gojax._native import Kernel

_TARGET = "gojax_winograd_conv3x3"
_KERNEL = Kernel(
    "_winograd.cc",
    prefix="winograd",
    targets={_TARGET: "GojaxWinogradConv3x3"},
    title="the Winograd kernel",
    fallback="Winograd convolutions off, XLA's used instead",
    switch="GOJAX_WINOGRAD",
    cache_env="GOJAX_WINOGRAD_CACHE",
)

# G (6x3): the kernel transform U = G g G^T of Lavin & Gray's F(4x4, 3x3).
_G = np.array(
    [
        [1 / 4, 0, 0],
        [-1 / 6, -1 / 6, -1 / 6],
        [-1 / 6, 1 / 6, -1 / 6],
        [1 / 24, 1 / 12, 1 / 6],
        [1 / 24, -1 / 12, 1 / 6],
        [0, 0, 1],
    ]
)


def available() -> bool:
    """Whether the native kernel is compiled, loaded and registered with XLA (CPU).

    The first call compiles it if needed (a few seconds); a failure is logged
    once with the compiler's message and :func:`conv3x3` falls back to XLA.
    """
    return _KERNEL.available()


# Below about this many board points a call (one 9x9 board, 81) the kernel is slower than
# XLA's: with 9 tiles, transforming (or reading) the kernel costs more than the multiplies
# it saves. Measured on b6c96 (2 cores, evaluations/s, XLA vs Winograd): 9x9 batch 1 428
# vs 216 reading u, 789 vs 705 (best calls) transforming g in the cache; batch 2 (162
# points) 425 vs 482; 13x13 batch 1 (169) 374 vs 373; 19x19 batch 1 (361) about 200 vs 250.
MIN_POINTS = 160

_switch = threading.local()


@contextlib.contextmanager
def disabled():
    """Within this block, functions traced take XLA's convolution (for comparisons).

    Only traces made inside the block see it: a function ``jax.jit`` has already
    traced for the same shapes keeps its compiled program.
    """
    before = getattr(_switch, "off", False)
    _switch.off = True
    try:
        yield
    finally:
        _switch.off = before


def applicable(x_shape: tuple[int, ...], x_dtype, kernel_shape: tuple[int, ...]) -> bool:
    """Whether :func:`conv3x3` uses the native kernel for these shapes and dtype."""
    kh, kw, c_in, c_out = kernel_shape
    return (
        (kh, kw) == (3, 3)
        and jnp.dtype(x_dtype) == jnp.float32
        and c_in % 8 == 0
        and c_out % 16 == 0
        and math.prod(x_shape[:-1]) >= MIN_POINTS
        and not getattr(_switch, "off", False)
        # Off the CPU the platform choice below would drop the kernel anyway: do not
        # compile it on an accelerator's host.
        and jax.default_backend() == "cpu"
        and available()
    )


def transform_kernel(kernel: jax.Array) -> jax.Array:
    """``u [36, C_in, C_out]`` from ``kernel [3, 3, C_in, C_out]``: ``u[6a + b] = (G g G^T)[a, b]``.

    Written as 36 sums of up to nine ``[C_in, C_out]`` slices, which XLA fuses into
    one pass (an einsum with the 6x3 matrix ran ~40x slower on a CPU).
    """
    kernel = kernel.astype(jnp.float32)

    def combine(row, slices):
        terms = [slices[i] * np.float32(c) for i, c in enumerate(row) if c != 0]
        return functools.reduce(jnp.add, terms)

    taps = [[kernel[i, j] for j in range(3)] for i in range(3)]
    rows = [[combine(_G[a], [taps[i][j] for i in range(3)]) for j in range(3)] for a in range(6)]
    return jnp.stack([combine(_G[b], rows[a]) for a in range(6) for b in range(6)])


def direct_conv3x3(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """XLA's 'same' cross-correlation, NHWC x HWIO (``flax.linen.Conv``'s arithmetic)."""
    lead, spatial = x.shape[:-3], x.shape[-3:]
    out = jax.lax.conv_general_dilated(
        x.reshape(-1, *spatial), kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return out.reshape(*lead, *out.shape[1:])


# Up to this many 4x4 output blocks a call (one 19x19 board: 25, two: 50) the kernel is
# handed the 3x3 kernel itself and transforms it as it goes (as ``_winograd.cc``'s
# kSmallTiles, the calls done as one chunk): with few blocks every transformed weight is
# used a few times only, and reading the transformed kernels, 4x the 3x3 ones (16 MB for
# b6c96), from memory cost more than transforming them in the cache (b6c96, 19x19, batch
# 1, the two ways interleaved: median 381 vs 343 evaluations/s; best 435 vs 473).
SMALL_TILES = 48


def _tiles(x_shape: tuple[int, ...]) -> int:
    """4x4 output blocks of a call on ``x [..., H, W, C]``."""
    *lead, h, w, _ = x_shape
    return math.prod(lead) * -(-h // 4) * -(-w // 4)


@jax.custom_batching.custom_vmap
def _native(x: jax.Array, kernel: jax.Array, u: jax.Array) -> jax.Array:
    # The kernel reads one of the two; XLA drops the computation of the other.
    weights = kernel if _tiles(x.shape) <= SMALL_TILES else u
    out = jax.ShapeDtypeStruct((*x.shape[:-1], u.shape[-1]), jnp.float32)
    return jax.ffi.ffi_call(_TARGET, out)(x, weights)


@_native.def_vmap
def _native_vmap(axis_size, in_batched, x, kernel, u):
    x_batched, kernel_batched, u_batched = in_batched
    if not x_batched:
        x = jnp.broadcast_to(x, (axis_size, *x.shape))
    if kernel_batched or u_batched:  # a kernel per batch entry (vmap over parameters)
        kernel = kernel if kernel_batched else jnp.broadcast_to(kernel, (axis_size, *kernel.shape))
        u = u if u_batched else jnp.broadcast_to(u, (axis_size, *u.shape))
        return jax.lax.map(lambda args: _native(*args), (x, kernel, u)), True
    return _native(x, kernel, u), True  # the kernel takes any leading dims: one more


@jax.custom_vjp
def _winograd_conv3x3(x: jax.Array, kernel: jax.Array, u: jax.Array) -> jax.Array:
    return _native(x, kernel, u)


def _forward(x, kernel, u):
    return _native(x, kernel, u), (x, kernel, u)


def _backward(residuals, grad):
    x, kernel, u = residuals
    _, pullback = jax.vjp(direct_conv3x3, x, kernel)
    dx, dkernel = pullback(grad)
    return dx, dkernel, jnp.zeros_like(u)  # u is derived from kernel: its share is in dkernel


_winograd_conv3x3.defvjp(_forward, _backward)


def conv3x3(x: jax.Array, kernel: jax.Array, u: jax.Array | None = None) -> jax.Array:
    """'same' 3x3 cross-correlation ``[..., H, W, C_in] -> [..., H, W, C_out]``.

    On a CPU, for float32, channel counts the kernel takes and at least
    :data:`MIN_POINTS` board points, by the native Winograd kernel: up to
    :data:`SMALL_TILES` output blocks it transforms ``kernel`` itself as it goes,
    beyond it reads ``u = transform_kernel(kernel)`` when given (a network's
    prepared kernels, see ``gojax.nn.with_winograd_kernels``) or computed here;
    elsewhere XLA's direct convolution. The platform is chosen when XLA lowers the
    program, so one traced function serves CPUs and accelerators.
    """
    if not applicable(x.shape, x.dtype, kernel.shape):
        return direct_conv3x3(x, kernel)

    def on_cpu(x, kernel, u):
        return _winograd_conv3x3(x, kernel, transform_kernel(kernel) if u is None else u)

    def elsewhere(x, kernel, u):
        return direct_conv3x3(x, kernel)

    return jax.lax.platform_dependent(x, kernel, u, cpu=on_cpu, default=elsewhere)
