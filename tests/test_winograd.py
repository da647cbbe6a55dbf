"""The native Winograd 3x3 convolution: same numbers as XLA's, same gradients, and the
fallbacks (small calls, other platforms' path, no compiler)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import REPO

from gojax import nn as gnn
from gojax import winograd

pytestmark = pytest.mark.skipif(
    not winograd.available(), reason="no C++ compiler for the Winograd kernel"
)


def _arrays(shape, c_out, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    kernel = jnp.asarray(rng.standard_normal((3, 3, shape[-1], c_out)) * 0.1, jnp.float32)
    return x, kernel


def _uses_kernel(fn, *args) -> bool:
    # A new function each time: jit's trace cache would not see winograd.disabled().
    return "gojax_winograd_conv3x3" in jax.jit(lambda *a: fn(*a)).lower(*args).as_text()


def _relative_error(got, want) -> float:
    return float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))


@pytest.mark.parametrize(
    "size,batch,c_in,c_out",
    [(2, 80, 8, 16), (3, 36, 16, 16), (5, 13, 32, 48), (7, 7, 96, 64), (9, 4, 96, 96),
     (13, 2, 64, 32), (19, 1, 96, 96), (19, 3, 128, 256), (25, 1, 24, 32)],
)  # fmt: skip
def test_matches_xla_convolution_on_every_board_size(size, batch, c_in, c_out):
    # Sizes not a multiple of 4 (partial tiles at the right and bottom edges), a single
    # tile (2x2), channel counts from 8 to 256, batches that split into several chunks.
    x, kernel = _arrays((batch, size, size, c_in), c_out)
    assert _uses_kernel(winograd.conv3x3, x, kernel)
    got = jax.jit(winograd.conv3x3)(x, kernel)
    want = winograd.direct_conv3x3(x, kernel)
    assert got.shape == want.shape == (batch, size, size, c_out)
    assert _relative_error(got, want) < 2e-5


def test_given_transformed_kernel_and_many_threads_of_work():
    x, kernel = _arrays((64, 19, 19, 96), 96, seed=1)
    u = winograd.transform_kernel(kernel)
    assert u.shape == (36, 96, 96)
    got = jax.jit(winograd.conv3x3)(x, kernel, u)
    assert _relative_error(got, winograd.direct_conv3x3(x, kernel)) < 2e-5
    # The kernel reads u, not the 3x3 kernel: a different u gives a different answer.
    other = jax.jit(winograd.conv3x3)(x, kernel, 2 * u)
    assert _relative_error(other, 2 * got) < 1e-6


@pytest.mark.parametrize(
    "shape,c_out", [((1, 19, 19, 96), 96), ((4, 9, 9, 32), 48), ((2, 19, 19, 96), 96)]
)
def test_few_tiles_transform_the_3x3_kernel_in_the_call(shape, c_out):
    # Up to SMALL_TILES output blocks the kernel transforms g itself (a given u is not
    # read); beyond, it reads u.
    x, kernel = _arrays(shape, c_out, seed=4)
    few = winograd._tiles(shape) <= winograd.SMALL_TILES
    assert few == (shape[0] != 2)  # 25, 36 and 50 blocks
    u = winograd.transform_kernel(kernel)
    got = jax.jit(winograd.conv3x3)(x, kernel, u)
    assert _relative_error(got, winograd.direct_conv3x3(x, kernel)) < 2e-5
    other = jax.jit(winograd.conv3x3)(x, kernel, 2 * u)
    assert _relative_error(other, got if few else 2 * got) < 1e-6


def test_vmap_over_inputs_and_over_kernels():
    x, kernel = _arrays((4, 9, 9, 32), 32, seed=2)
    want = winograd.direct_conv3x3(x, kernel)
    over_x = jax.jit(jax.vmap(lambda x: winograd.conv3x3(x, kernel)))(x[:, None])
    assert _relative_error(over_x[:, 0], want) < 2e-5
    kernels = jnp.stack([kernel, -0.5 * kernel])
    over_k = jax.jit(jax.vmap(winograd.conv3x3, in_axes=(None, 0)))(x, kernels)
    assert _relative_error(over_k[1], -0.5 * want) < 2e-5


def test_gradients_are_the_direct_convolutions():
    x, kernel = _arrays((4, 9, 9, 16), 16, seed=3)

    def loss(conv):
        return lambda x, kernel: jnp.sum(jnp.tanh(conv(x, kernel)) * jnp.arange(16.0))

    got = jax.jit(jax.grad(loss(winograd.conv3x3), argnums=(0, 1)))(x, kernel)
    want = jax.jit(jax.grad(loss(winograd.direct_conv3x3), argnums=(0, 1)))(x, kernel)
    for g, w in zip(got, want, strict=True):
        assert _relative_error(g, w) < 1e-4


def test_small_calls_other_dtypes_and_disabled_take_xla():
    x, kernel = _arrays((1, 9, 9, 16), 16)  # 81 points < MIN_POINTS
    assert 81 < winograd.MIN_POINTS <= 2 * 81
    assert not _uses_kernel(winograd.conv3x3, x, kernel)
    x2 = jnp.concatenate([x, x])
    assert _uses_kernel(winograd.conv3x3, x2, kernel)
    assert not _uses_kernel(winograd.conv3x3, x2.astype(jnp.bfloat16), kernel.astype(jnp.bfloat16))
    odd, odd_kernel = _arrays((4, 9, 9, 12), 16)  # C_in not a multiple of 8
    assert not _uses_kernel(winograd.conv3x3, odd, odd_kernel)
    with winograd.disabled():
        assert not _uses_kernel(winograd.conv3x3, x2, kernel)
    assert _uses_kernel(winograd.conv3x3, x2, kernel)


def test_accelerator_lowering_takes_xla_convolution():
    # The platform is chosen when XLA lowers: lowered for a GPU, no CPU custom call.
    x, kernel = _arrays((4, 19, 19, 32), 32)
    text = jax.jit(winograd.conv3x3).trace(x, kernel).lower(lowering_platforms=("cuda",)).as_text()
    assert "gojax_winograd_conv3x3" not in text
    assert "convolution" in text


@pytest.mark.parametrize(
    "preset", ["tiny", pytest.param("b6c96", marks=pytest.mark.slow), "agz_tiny"]
)
def test_network_with_prepared_kernels_matches_xla(preset):
    net = gnn.PRESETS[preset]()
    size = 9 if preset == "agz_tiny" else 19
    init_inputs = gnn.example_inputs(net, 1, size)
    variables = net.init(jax.random.key(0), *init_inputs)
    assert gnn.WINOGRAD not in variables  # init makes no derived kernels
    prepared = gnn.with_winograd_kernels(net, variables)
    kernels = jax.tree_util.tree_leaves_with_path(prepared[gnn.WINOGRAD])
    assert kernels and all(
        (u.shape[0] == 36) == (path[-1].key == "u") for path, u in kernels
    )  # transformed kernels, and the global-pooling blocks' side-by-side ones
    rng = np.random.default_rng(4)
    inputs = [jnp.asarray(rng.standard_normal((8, *a.shape[1:])), jnp.float32) for a in init_inputs]
    if preset != "agz_tiny":
        inputs[0] = inputs[0].at[..., 0].set(1.0)  # KataGo's plane 0: on the board
    apply = functools.partial(net.apply, train=False)
    got = jax.jit(apply)(prepared, *inputs)
    on_the_fly = jax.jit(apply)(variables, *inputs)
    with winograd.disabled():  # a new function: jit would reuse the traces above
        want = jax.jit(lambda *a: apply(*a))(variables, *inputs)
    # Two arithmetics (rounding differs), both close to each other.
    assert any(not jnp.array_equal(got[key], want[key]) for key in want)
    for key in want:
        scale = float(jnp.max(jnp.abs(want[key]))) + 1e-6
        assert float(jnp.max(jnp.abs(got[key] - want[key]))) / scale < 1e-4, key
        assert float(jnp.max(jnp.abs(on_the_fly[key] - got[key]))) / scale < 1e-5, key


def test_without_a_compiler_it_falls_back_with_a_warning(tmp_path):
    script = (
        "import logging, numpy as np, jax.numpy as jnp\n"
        "logging.basicConfig()\n"
        "from gojax import winograd\n"
        "x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 19, 19, 16)), jnp.float32)\n"
        "k = jnp.ones((3, 3, 16, 16), jnp.float32)\n"
        "print('available', winograd.available())\n"
        "d = winograd.direct_conv3x3(x, k)\n"
        "print('same', bool(jnp.allclose(winograd.conv3x3(x, k), d)))\n"
    )
    env = dict(os.environ, CXX=str(tmp_path / "no-such-compiler"))
    env["GOJAX_WINOGRAD_CACHE"] = str(tmp_path / "cache")
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "available False" in out.stdout and "same True" in out.stdout
    assert "could not compile the Winograd kernel" in out.stderr
    assert "no-such-compiler" in out.stderr


def test_compiled_once_into_the_cache(tmp_path):
    script = "from gojax import winograd\nprint(winograd.available())\n"
    env = dict(os.environ, GOJAX_WINOGRAD_CACHE=str(tmp_path), JAX_PLATFORMS="cpu")
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert out.stdout.strip() == "True", out.stderr
    libraries = list(tmp_path.glob("winograd-*"))
    assert len(libraries) == 1  # the second process loaded the first one's library
    assert not [p for p in tmp_path.iterdir() if p not in libraries]  # no leftovers
    off = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=dict(env, GOJAX_WINOGRAD="0"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert off.stdout.strip() == "False"
