"""The native ladder scan (``gojax/_ladders.cc``) against the JAX loop: the same planes
bit for bit on scripted, reference and random positions, at full and at small budgets
(aborted searches and the ko point they leave cleared), under ``vmap``, both as the CPU's
FFI call and as the host callback accelerators make; the platform choice when lowering;
the fallback without a compiler."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, long_ladder
from reference import REPO, reference_path
from test_ladders import (
    EVENTS,
    LADDER,
    draw,
    random_positions,
    ref_ladder_features,
)

from gojax import _ladders
from gojax._game import state_from_moves
from gojax._ladders import LADDER_SEARCH_BUDGET, _ladder_features, ladder_features_of_boards
from gojax.katago_features import katago_inputs
from gojax.nn import example_inputs
from gojax.search import SearchConfig
from train import model as model_lib
from train.loop import selfplay_functions
from train.selfplay import SelfPlayConfig, play_games

pytestmark = pytest.mark.skipif(
    not _ladders.native_available(), reason="no C++ compiler for the native ladder search"
)

BLACK, WHITE = 1, -1
jax_scan = fast_jit(_ladders._scan_boards_jax)
native_scan = fast_jit(_ladders._scan_boards_native)
host_scan = fast_jit(_ladders._scan_boards_host)  # an accelerator's path, run from a CPU here


def scans(boards, kos, to_play, budget=LADDER_SEARCH_BUDGET):
    """The scans of ``boards [K, P]`` (``kos``, ``to_play`` ``[K]``): the JAX loop's
    ``(laddered, working)``, after checking that the native kernel's are the same, as an
    FFI call and through the host callback."""
    k = len(boards)
    args = (
        jnp.asarray(boards, jnp.int8),
        jnp.asarray(kos, jnp.int32),
        jnp.asarray(to_play, jnp.int8),
        jnp.full(k, budget, jnp.int32),
    )
    want = [np.asarray(x) for x in jax_scan(*args)]
    for path, scan in (("ffi", native_scan), ("host", host_scan)):
        got = [np.asarray(x) for x in scan(*args)]
        for name, g, w in zip(("laddered", "working"), got, want, strict=True):
            rows = np.flatnonzero((g != w).any(axis=1))
            assert not rows.size, f"{path}: {name} differs on boards {rows.tolist()} at {budget}"
    return want


def both_colours(boards, kos, to_play):
    """The positions with each player to move."""
    to_play = np.asarray(to_play)
    return (
        np.concatenate([boards, boards]),
        np.concatenate([kos, kos]),
        np.concatenate([to_play, -to_play]),
    )


def scripted_boards() -> list[np.ndarray]:
    """The positions of test_ladders' scripted tests."""
    ladder = draw(LADDER)
    atari = ladder.copy()
    atari[3 * 9 + 4] = BLACK
    breaker = ladder.copy()
    breaker[2 * 9 + 2] = WHITE
    both_breakers = breaker.copy()
    both_breakers[6 * 9 + 6] = WHITE
    capture = draw("""
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . O X X . . .
        . . O X O . . . .
        . . . . X . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
    """)
    no_capture = capture.copy()
    no_capture[4 * 9 + 2] = 0
    edge = draw("""
        . . . . .
        . . . . .
        . . . . .
        X X X . .
        O O . . .
    """)
    lone_edge = edge.copy()
    lone_edge[16] = 0
    boards = [ladder, atari, breaker, both_breakers, capture, no_capture, edge, lone_edge]
    boards.append(
        draw("""
        X O
        . .
    """)
    )
    for size in (19, 25):
        boards += long_ladder(size)
    return boards


def test_scripted_positions():
    found = 0
    for board in scripted_boards():
        for to_play in (BLACK, WHITE):
            laddered, working = scans(board[None], [-1], [to_play])
            found += int(laddered.any()) + int(working.any())
    assert found >= 10


@pytest.fixture(scope="module")
def reference_states():
    with open(reference_path("katago", "positions.jsonl")) as handle:
        records = [json.loads(line) for line in handle]
    return [
        state_from_moves(
            r["size"], [tuple(m) for m in r["moves"]], komi=r["komi"], rules=r["rules"]
        )
        for r in records
    ]


def test_reference_positions_and_their_history(reference_states):
    """Every reference position with its ko point, and its past boards (as katago_inputs
    scans them), for both players."""
    by_size: dict[int, list] = {}
    for state in reference_states:
        size = int(np.sqrt(state.board.shape[-1]))
        rows = by_size.setdefault(size, [])
        rows.append((np.asarray(state.board), int(state.ko)))
        rows += [(np.asarray(past), -1) for past in np.asarray(state.past_boards)[:2]]
    laddered_boards = 0
    for rows in by_size.values():
        boards = np.stack([board for board, _ in rows])
        kos = np.array([ko for _, ko in rows], np.int32)
        to_play = np.full(len(rows), BLACK, np.int8)
        laddered, _ = scans(*both_colours(boards, kos, to_play))
        laddered_boards += int(laddered.any(axis=1).sum())
    assert laddered_boards >= 20


def test_reference_inputs_native_and_not(reference_states, monkeypatch):
    """KataGo's input planes through the public path: the same with and without the kernel,
    which a CPU lowering does call."""
    big = [s for s in reference_states if s.board.shape[-1] == 19 * 19]
    states = [s for s in big if s.rules == big[0].rules]  # one batch: one rule set
    assert len(states) >= 4
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    inputs = lambda s: jax.vmap(katago_inputs)(s)  # noqa: E731
    assert "gojax_ladders" in jax.jit(inputs).lower(stacked).as_text()
    native = jax.jit(inputs)(stacked)
    monkeypatch.setenv("GOJAX_NATIVE_LADDERS", "0")
    # A new function: jit would reuse the trace above.
    lowered = jax.jit(lambda s: inputs(s)).lower(stacked)
    assert "gojax_ladders" not in lowered.as_text()
    plain = lowered.compile()(stacked)
    for got, want in zip(native, plain, strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.asarray(native[0][..., 14]).any()  # laddered stones in the sample


def tight_points(boards: np.ndarray, seed: int) -> np.ndarray:
    """``[K]``: an empty point of each board with at most one empty neighbour and a stone
    next to it (often a liberty of a short chain), -1 if none: ko points for positions
    that have none, which ban such a point to the first move of a 2-liberty search."""
    rng = np.random.default_rng(seed)
    k, p = boards.shape
    size = int(np.sqrt(p))
    grid = np.pad(boards.reshape(k, size, size), ((0, 0), (1, 1), (1, 1)), constant_values=2)
    around = [grid[:, :-2, 1:-1], grid[:, 2:, 1:-1], grid[:, 1:-1, :-2], grid[:, 1:-1, 2:]]
    empties = sum((n == 0).astype(int) for n in around)
    stones = sum((np.abs(n) == 1).astype(int) for n in around)
    tight = (boards.reshape(k, size, size) == 0) & (empties <= 1) & (stones >= 1)
    tight = tight.reshape(k, p)
    return np.array([rng.choice(np.flatnonzero(t)) if t.any() else -1 for t in tight], np.int32)


@pytest.mark.parametrize("size,count", [(5, 24), (7, 24), (9, 32), (13, 24), (19, 24), (25, 8)])
def test_random_positions(size, count):
    """Random play, with and without ko points, both players to move; and the plain
    positions again with a ko point on an empty point next to stones."""
    plain = random_positions(size, count, seed=300 + size)
    at_ko = random_positions(size, count, seed=400 + size, at_ko=True)
    placed = (plain[0], tight_points(plain[0], seed=size), plain[2])
    assert (placed[1] >= 0).sum() >= count // 2
    boards, kos, to_play = (np.concatenate(x) for x in zip(plain, at_ko, placed, strict=True))
    laddered, working = scans(*both_colours(boards, kos, to_play))
    if size >= 7:
        assert laddered.any(axis=1).sum() >= 4 and working.any()


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 20])
def test_small_budgets(budget):
    """Searches aborted on their budget, on 9x9 and on the 6x6 games where at a budget
    of 3 the ko point an aborted 1-liberty search leaves cleared changes a later chain's
    answer (test_ladders' lanes test); the Python reference agrees there too."""
    nine = random_positions(9, 24, seed=11, at_ko=True)
    six = random_positions(6, 24, seed=1002, at_ko=True)
    for boards, kos, to_play in (nine, six):
        scans(*both_colours(boards, kos, to_play), budget=budget)
    EVENTS.clear()
    laddered, working = scans(*six, budget=budget)
    for i in range(len(six[0])):
        want = ref_ladder_features(six[0][i], six[1][i], six[2][i], budget=budget)
        np.testing.assert_array_equal(laddered[i], want[0], err_msg=f"position {i}")
        np.testing.assert_array_equal(working[i], want[1], err_msg=f"position {i}")
    assert EVENTS["abort"] > 0
    if budget == 3:
        assert EVENTS["ko cleared"] > 0 and EVENTS["first move on cleared ko"] > 0


def test_vmap_and_nested_vmap_call_the_kernel():
    boards, kos, to_play = random_positions(9, 24, seed=7, at_ko=True)
    want = scans(boards, kos, to_play, budget=5)
    one = jax.vmap(_ladder_features, in_axes=(0, 0, 0, None))
    nested = jax.vmap(jax.vmap(_ladder_features, in_axes=(0, 0, 0, None)), in_axes=(0, 0, 0, None))
    args = (jnp.asarray(boards), jnp.asarray(kos), jnp.asarray(to_play), jnp.int32(5))
    for fn, shape in ((one, (24,)), (nested, (4, 6))):
        lowered = jax.jit(fn).lower(*(a.reshape(shape + a.shape[1:]) for a in args[:3]), args[3])
        assert "gojax_ladders" in lowered.as_text()
        got = lowered.compile()(*(a.reshape(shape + a.shape[1:]) for a in args[:3]), args[3])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)
    # Several boards a call, one player for all, batched: budget as ladder_features'.
    full = scans(boards, kos, np.full(24, BLACK), budget=LADDER_SEARCH_BUDGET)
    groups = jax.jit(jax.vmap(ladder_features_of_boards, in_axes=(0, 0, None)))(
        jnp.asarray(boards).reshape(4, 6, -1), jnp.asarray(kos).reshape(4, 6), jnp.int8(BLACK)
    )
    for g, w in zip(groups, full, strict=True):
        np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)


def test_lowering_takes_the_kernel_unless_it_is_off(monkeypatch):
    """A CPU program calls the kernel; with ``GOJAX_NATIVE_LADDERS=host`` it makes the host
    callback an accelerator's program makes (which cannot be lowered for a GPU on a machine
    without one); with ``GOJAX_NATIVE_LADDERS=0`` every platform's program runs the JAX
    loop, batched or not."""
    board = jnp.asarray(draw(LADDER))
    fn = lambda b: _ladder_features(b, jnp.int32(-1), jnp.int8(BLACK), 100)  # noqa: E731
    cpu = jax.jit(fn).trace(board).lower(lowering_platforms=("cpu",)).as_text()
    assert "gojax_ladders" in cpu and "callback" not in cpu
    monkeypatch.setenv("GOJAX_NATIVE_LADDERS", "host")  # the accelerators' way, on a CPU
    host = jax.jit(lambda b: fn(b)).trace(board).lower(lowering_platforms=("cpu",)).as_text()
    assert "gojax_ladders" not in host and "callback" in host and "while" not in host
    monkeypatch.setenv("GOJAX_NATIVE_LADDERS", "0")
    for platform in ("cpu", "cuda"):
        off = jax.jit(lambda b: fn(b)).trace(board).lower(lowering_platforms=(platform,))
        text = off.as_text()
        assert "gojax_ladders" not in text and "callback" not in text and "while" in text
    # Under vmap too (where JAX may cache a batching rule's trace).
    boards = jnp.stack([board] * 3)
    batched = jax.jit(jax.vmap(lambda b: fn(b))).trace(boards).lower(lowering_platforms=("cpu",))
    assert "gojax_ladders" not in batched.as_text() and "while" in batched.as_text()


def test_the_host_scan_shares_boards_among_threads(monkeypatch):
    """:func:`scan_on_host` on NumPy arrays: many boards split among the host's threads
    give the FFI call's planes, one thread or several."""
    boards, kos, to_play = random_positions(19, 24, seed=21, at_ko=True)
    budgets = np.full(len(boards), LADDER_SEARCH_BUDGET, np.int32)
    want = [np.asarray(x) for x in native_scan(boards, kos, to_play.astype(np.int8), budgets)]
    assert want[0].any() and want[1].any()
    for threads in (1, 3, 7):
        monkeypatch.setattr(_ladders, "_HOST_THREADS", threads)
        monkeypatch.setattr(_ladders, "_HOST_POINTS_PER_THREAD", 361)
        got = _ladders.scan_on_host(boards, kos, to_play, budgets)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == np.bool_ and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_the_host_scan_runs_in_a_forked_child(monkeypatch):
    """A child forked after the parent's pool started has none of its threads: its scans
    start a pool of their own instead of waiting on the parent's forever."""
    boards, kos, to_play = random_positions(19, 8, seed=3)
    budgets = np.full(len(boards), LADDER_SEARCH_BUDGET, np.int32)
    monkeypatch.setattr(_ladders, "_HOST_THREADS", 2)
    monkeypatch.setattr(_ladders, "_HOST_POINTS_PER_THREAD", 361)
    want = _ladders.scan_on_host(boards, kos, to_play, budgets)
    # Both of the parent's pool threads started (a fast scan may have needed only one).
    both = threading.Barrier(2)
    pool = _ladders._host_threads()
    for started in [pool.submit(both.wait, 30) for _ in range(2)]:
        started.result()
    with warnings.catch_warnings():  # JAX's and Python's warnings about fork and threads
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: numpy and the C function only, then out without cleanup
        code = 2
        try:
            got = _ladders.scan_on_host(boards, kos, to_play, budgets)
            code = 0 if all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)) else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's scan hung")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_bad_shapes_are_refused():
    boards = jnp.zeros((2, 10), jnp.int8)  # 10 points: no square board
    with pytest.raises(Exception, match="size"):
        native_scan(boards, jnp.full(2, -1), jnp.ones(2, jnp.int8), jnp.ones(2, jnp.int32))
    with pytest.raises(ValueError, match="10 points is not a board of size 2..25"):
        _ladders.scan_on_host(np.zeros((2, 10)), np.full(2, -1), np.ones(2), np.ones(2))
    boards = jnp.zeros((1, 26 * 26), jnp.int8)
    with pytest.raises(Exception, match="size"):
        native_scan(boards, jnp.full(1, -1), jnp.ones(1, jnp.int8), jnp.ones(1, jnp.int32))


def test_without_a_compiler_it_falls_back_with_a_warning(tmp_path):
    script = (
        "import logging, numpy as np, jax, jax.numpy as jnp\n"
        "logging.basicConfig()\n"
        "from gojax import _ladders\n"
        "b = jnp.zeros(81, jnp.int8).at[jnp.array([31, 32, 39, 49])].set(1).at[40].set(-1)\n"
        "out = jax.jit(_ladders.ladder_features)(b, jnp.int32(-1), jnp.int8(1))\n"
        "print('available', _ladders.native_available())\n"
        "print('laddered', np.flatnonzero(np.asarray(out[0])).tolist())\n"
    )
    env = dict(os.environ, CXX=str(tmp_path / "no-such-compiler"), JAX_PLATFORMS="cpu")
    env["GOJAX_NATIVE_CACHE"] = str(tmp_path / "cache")
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "available False" in out.stdout and "laddered [40]" in out.stdout
    assert "could not compile the native ladder search" in out.stderr
    assert "no-such-compiler" in out.stderr


def test_selfplay_through_the_host_callback_plays_the_same_games(monkeypatch):
    """The accelerators' path inside a whole self-play program (the search's loops, the
    evaluator's vmaps): with ``GOJAX_NATIVE_LADDERS=host`` the host callback, as on a GPU,
    plays the same KataGo-feature games, inputs, policies and values as the FFI call."""
    spec = model_lib.ModelSpec("tiny")
    net = model_lib.build(spec)
    evaluator_fn, encode_fn = selfplay_functions(spec)
    variables = jax.jit(net.init)(jax.random.key(0), *example_inputs(net, 1, 7))
    config = SelfPlayConfig(
        size=7, num_games=6, num_steps=20, search=SearchConfig(kind="puct", num_simulations=3)
    )
    key = jax.random.key(5)
    calls = []
    monkeypatch.setattr(_ladders, "scan_on_host", counted(_ladders.scan_on_host, calls))
    runs = []
    for path in ("ffi", "host"):
        if path == "host":
            monkeypatch.setenv("GOJAX_NATIVE_LADDERS", "host")
        # A new static evaluator object: the jitted self-play would reuse the first trace.
        fresh = lambda variables, fn=evaluator_fn: fn(variables)  # noqa: E731
        traj, _ = play_games(fresh, encode_fn, variables, key, config)
        runs.append(jax.device_get(traj))
        assert (len(calls) > 0) == (path == "host")
    ffi, host = runs
    assert np.asarray(ffi.inputs["spatial"][..., 14:18]).any()  # ladder planes in play
    for name in ("action", "policy", "value", "inputs"):
        for got, want in zip(
            jax.tree.leaves(getattr(host, name)), jax.tree.leaves(getattr(ffi, name)), strict=True
        ):
            np.testing.assert_array_equal(got, want, err_msg=name)


def counted(fn, calls: list):
    """``fn``, recording each call in ``calls``."""

    def wrapper(*args):
        calls.append(len(args))
        return fn(*args)

    return wrapper
