"""Benson pass-alive area and KataGo's area planes (``gojax._pass_alive``).

Scripted positions check the meaning; a pure-Python reference written from
KataGo's ``Board::calculateArea`` / ``calculateAreaForPla`` (scan-order region
seeding, per-region vital lists filtered point by point, sequential killing)
checks the vectorised version on random-play and random-stone positions.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit

import gojax
from gojax._board import neighbor_table
from gojax._pass_alive import _area_of_board, area_ownership, native_available, pass_alive

B, W = 1, -1
_SYMBOLS = {"X": B, "O": W, ".": 0}


def board_of(drawing: str) -> np.ndarray:
    """ASCII rows (top line first; ``X`` black, ``O`` white, ``.`` empty) → ``[P]`` int8."""
    rows = [line.split() for line in textwrap.dedent(drawing).strip().splitlines()]
    assert all(len(row) == len(rows) for row in rows), "the drawing must be square"
    return np.array([_SYMBOLS[s] for row in rows for s in row], np.int8)


def drawn(values: np.ndarray) -> str:
    """``[P]`` area values → the same kind of drawing (for readable failures)."""
    size = math.isqrt(values.size)
    symbols = {B: "X", W: "O", 0: "."}
    return "\n".join(
        " ".join(symbols[int(v)] for v in values[r * size : (r + 1) * size]) for r in range(size)
    )


def _all_variants(board: jax.Array) -> jax.Array:
    """``[4, P]``: area and pass-alive, without then with multi-stone suicide."""
    return jnp.stack(
        [
            fn(board, multi_stone_suicide_legal=suicide)
            for suicide in (False, True)
            for fn in (area_ownership, pass_alive)
        ]
    )


# One program per board size covers every variant: compiling dominates test time.
_jit_all_variants = fast_jit(_all_variants)


def variants_of(board: np.ndarray) -> np.ndarray:
    return np.asarray(_jit_all_variants(jnp.asarray(board, jnp.int8)))


def area_of(board: np.ndarray, suicide: bool = False) -> np.ndarray:
    return variants_of(board)[2 * suicide]


def alive_of(board: np.ndarray, suicide: bool = False) -> np.ndarray:
    return variants_of(board)[2 * suicide + 1]


# ----------------------------------------------------------------------------
# Pure-Python reference, structured as KataGo's C++.


def _ref_area_for_pla(board, size, pla, suicide_legal, safe_big, unsafe_big, result):
    p = size * size
    nbrs = [[q for q in neighbor_table(size)[i] if q < p] for i in range(p)]
    opp = -pla

    chain_of = [-1] * p  # chain index of each pla stone
    chains: list[list[int]] = []
    for start in range(p):
        if board[start] == pla and chain_of[start] < 0:
            chain_of[start] = len(chains)
            members, stack = [], [start]
            while stack:
                q = stack.pop()
                members.append(q)
                for r in nbrs[q]:
                    if board[r] == pla and chain_of[r] < 0:
                        chain_of[r] = len(chains)
                        stack.append(r)
            chains.append(members)

    region_of = [-1] * p
    regions: list[list[int]] = []
    vital: list[list[int]] = []
    internal: list[int] = []
    contains_opp: list[bool] = []
    at_least_one_pla = False
    for seed in range(p):  # y-major scan, seeded from empty points only
        if region_of[seed] >= 0:
            continue
        if board[seed] != 0:
            at_least_one_pla |= board[seed] == pla
            continue
        idx = len(regions)
        heads: list[int] = []
        for q in nbrs[seed]:
            if board[q] == pla and chain_of[q] not in heads:
                heads.append(chain_of[q])
        points, n_internal, has_opp = [], 0, False
        queue = deque([seed])
        region_of[seed] = idx
        while queue:
            q = queue.popleft()
            if heads and (suicide_legal or board[q] == 0):
                around = {chain_of[r] for r in nbrs[q] if board[r] == pla}
                heads = [h for h in heads if h in around]
            if n_internal < 2 and not any(board[r] == pla for r in nbrs[q]):
                n_internal += 1
            has_opp |= board[q] == opp
            points.append(q)
            for r in nbrs[q]:
                if board[r] != pla and region_of[r] < 0:
                    region_of[r] = idx
                    queue.append(r)
        regions.append(points)
        vital.append(heads)
        internal.append(n_internal)
        contains_opp.append(has_opp)

    count = [0] * len(chains)
    for heads in vital:
        for h in heads:
            count[h] += 1
    killed = [False] * len(chains)
    borders_dead = [False] * len(regions)
    while True:
        killed_any = False
        for c, members in enumerate(chains):
            if killed[c] or count[c] >= 2:
                continue
            killed[c] = killed_any = True
            for q in members:
                for r in nbrs[q]:
                    reg = region_of[r]
                    if reg >= 0 and board[r] != pla and not borders_dead[reg]:
                        borders_dead[reg] = True
                        for h in vital[reg]:
                            count[h] -= 1
        if not killed_any:
            break

    for c, members in enumerate(chains):
        if not killed[c]:
            for q in members:
                result[q] = pla
    for i, points in enumerate(regions):
        should = internal[i] <= 1 and not borders_dead[i] and at_least_one_pla
        should |= safe_big and not contains_opp[i] and not borders_dead[i] and at_least_one_pla
        if should:
            for q in points:
                result[q] = pla
        elif unsafe_big and not contains_opp[i] and at_least_one_pla:
            for q in points:
                if result[q] == 0:
                    result[q] = pla


def ref_calculate_area(board, *, suicide_legal=False, strict=False) -> np.ndarray:
    """KataGo's calculateArea: (True, True, True) flags, or all False if ``strict``."""
    board = [int(v) for v in board]
    size = math.isqrt(len(board))
    result = [0] * len(board)
    for pla in (B, W):
        _ref_area_for_pla(board, size, pla, suicide_legal, not strict, not strict, result)
    if not strict:
        result = [r if r != 0 else s for r, s in zip(result, board, strict=True)]
    return np.array(result, np.int8)


def check_against_reference(board: np.ndarray) -> None:
    got = variants_of(board)
    for suicide in (False, True):
        want = ref_calculate_area(board, suicide_legal=suicide)
        assert np.array_equal(got[2 * suicide], want), (
            f"area, suicide={suicide}\n{drawn(board)}\ngot\n{drawn(got[2 * suicide])}"
        )
        want = ref_calculate_area(board, suicide_legal=suicide, strict=True)
        assert np.array_equal(got[2 * suicide + 1], want), (
            f"pass-alive, suicide={suicide}\n{drawn(board)}\ngot\n{drawn(got[2 * suicide + 1])}"
        )


# ----------------------------------------------------------------------------
# Scripted positions.


def test_two_eyes_pass_alive_one_eye_not():
    two_eyes = board_of("""
        . X . X .
        X X X X X
        O O O O O
        . . . . .
        . . . . .
    """)
    area = area_of(two_eyes)
    # Black: stones and both eyes. White: stones (not pass-alive) and the empty
    # rows below them (unsafeBig: bordered by White only).
    assert drawn(area) == drawn(
        board_of("""
        X X X X X
        X X X X X
        O O O O O
        O O O O O
        O O O O O
    """)
    )
    assert drawn(alive_of(two_eyes)) == drawn(
        board_of("""
        X X X X X
        X X X X X
        . . . . .
        . . . . .
        . . . . .
    """)
    )
    check_against_reference(two_eyes)

    one_eye = board_of("""
        . X X X .
        X X X X X
        O O O O O
        . . . . .
        . . . . .
    """)
    # The two corners are one region each but (0,4) is one eye, so is (0,0):
    # both are eyes of the same chain. Make it one eye by filling one corner.
    one_eye[4] = B
    assert not np.any(alive_of(one_eye))
    # Not pass-alive, but the eye is empty and bordered by Black only:
    # unsafeBigTerritories still gives it to Black.
    area = area_of(one_eye)
    assert area[0] == B
    assert np.all(area[:10] == B) and np.all(area[10:] == W)
    check_against_reference(one_eye)


def test_false_eye():
    # (0,2) looks like an eye, but the stone at (0,3) is a separate chain in
    # atari: its only vital region is (0,2), so it dies, the region bordering
    # it stops counting, and the left chain is left with one eye.
    false_eye = board_of("""
        . X . X O . .
        X X X O O . .
        O O O O . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
    """)
    assert not np.any(alive_of(false_eye))
    area = area_of(false_eye)
    expected = board_of("""
        X X X X O O O
        X X X O O O O
        O O O O O O O
        O O O O O O O
        O O O O O O O
        O O O O O O O
        O O O O O O O
    """)
    assert drawn(area) == drawn(expected)
    check_against_reference(false_eye)

    # The same shape with (0,3) connected to the left chain is pass-alive.
    real_eye = false_eye.copy()
    real_eye[7 + 3] = B  # (1,3)
    real_eye[4] = B  # (0,4): keeps the right side from touching (0,3)... and connects it
    alive = alive_of(real_eye)
    assert np.all(alive[[0, 1, 2, 3, 4]] == B)
    check_against_reference(real_eye)


def test_seki_shared_liberty_is_nobodys():
    seki = board_of("""
        . X . O .
        X X X O O
        X X O O O
        X X O O O
        X X O O O
    """)
    assert not np.any(alive_of(seki))
    area = area_of(seki)
    assert area[2] == 0  # the shared liberty
    assert area[0] == B and area[4] == W  # one-point eyes, by unsafeBig
    stones = seki != 0
    assert np.array_equal(area[stones], seki[stones])
    check_against_reference(seki)


def test_large_unsettled_region_goes_to_its_only_neighbour():
    walls = board_of("""
        . . X O .
        . . X O .
        . . X O .
        . . X O .
        . . X O .
    """)
    assert not np.any(alive_of(walls))
    assert drawn(area_of(walls)) == drawn(
        board_of("""
        X X X O O
        X X X O O
        X X X O O
        X X X O O
        X X X O O
    """)
    )
    check_against_reference(walls)


def test_dead_stones_in_pass_alive_territory_and_no_unsafe_overwrite():
    # KataGo's own example, on a square board: the top-left corner is Black's
    # pass-alive territory (one point not next to Black) holding two dead White
    # stones; for White, (0,0) is an eye bordered only by White, but unsafeBig
    # must not overwrite Black's mark. The bottom is safeBig territory.
    corner = board_of("""
        . O X . X . X
        O X X X X X X
        X X . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
    """)
    assert np.all(area_of(corner) == B)
    alive = alive_of(corner)
    # Strict: stones, the eyes and the small corner; not the big bottom region.
    assert np.all(alive[:7] == B) and np.all(alive[7:16] == B)
    assert np.all(alive[16:] == 0)
    check_against_reference(corner)


def test_pass_alive_white_territory_with_dead_black_stone():
    # White lives with eyes at (0,3) and (0,5); the top-left corner has one
    # point not next to White, so it is White's territory and the black stone
    # in it is dead. The lower-right black wall is not pass-alive.
    board = board_of("""
        . X O . O .
        . . O O O O
        O O O X X X
        X X X X . .
        . . . . . .
        . . . . . .
    """)
    alive = alive_of(board)
    assert np.all(alive[:15] == W) and not np.any(alive[15:])
    area = area_of(board)
    assert np.all(area[:15] == W) and np.all(area[15:] == B)
    check_against_reference(board)


def test_empty_board_and_single_stone():
    for size in (2, 5, 9, 19):
        empty = np.zeros(size * size, np.int8)
        assert not np.any(area_of(empty))
        assert not np.any(alive_of(empty))
        for colour in (B, W):
            single = empty.copy()
            single[(size * size) // 2] = colour
            assert np.all(area_of(single) == colour)
            assert not np.any(alive_of(single))


def test_size_two():
    board = board_of("""
        X .
        . X
    """)
    # Two separate chains, each with two one-point regions that are vital for
    # both: every chain has two vital regions, so all is pass-alive.
    assert np.all(alive_of(board) == B)
    check_against_reference(board)
    check_against_reference(board_of("X O\n. ."))


# ----------------------------------------------------------------------------
# Batching and random positions.


@functools.partial(fast_jit, static_argnums=(1, 2, 3))
def _random_play_boards(key, size: int, games: int, steps: int) -> jax.Array:
    """``[games, steps, P]`` boards of random games that never fill their own eyes.

    Not filling one-point eyes lets random play end with live groups, eyes,
    seki and dead stones: the positions Benson's algorithm is about.
    """
    p = size * size
    nbrs = jnp.asarray(neighbor_table(size))

    def one_game(key):
        state = gojax.new_game(size, rules="chinese", max_moves=4 * p)

        def step(state, key):
            legal = gojax.legal_moves(state)
            padded = jnp.append(state.board, state.to_play)  # off board counts as own
            own_eye = jnp.all(padded[nbrs] == state.to_play, axis=1)
            points = legal[:p] & ~own_eye
            allowed = jnp.append(points, ~jnp.any(points))
            action = jax.random.categorical(key, jnp.where(allowed, 0.0, -jnp.inf))
            state = gojax.play(state, action)
            return state, state.board

        return jax.lax.scan(step, state, jax.random.split(key, steps))[1]

    return jax.vmap(one_game)(jax.random.split(key, games))


def _spread_positions(games: np.ndarray, per_game: int) -> np.ndarray:
    """``[G, T, P]`` → up to ``per_game`` distinct positions per game, spread, final included."""
    picked = []
    for boards in games:
        changed = np.flatnonzero(np.any(boards[1:] != boards[:-1], axis=1)) + 1
        last = int(changed[-1]) if changed.size else 0  # the game stands still once it ends
        steps = np.unique(np.linspace(last // 4, last, per_game).astype(int))
        picked.extend(boards[steps])
    _, first = np.unique(np.array(picked), axis=0, return_index=True)
    return np.array(picked)[np.sort(first)]


@pytest.mark.parametrize("size", [7, 9])
def test_random_play_matches_reference(size):
    games = np.asarray(_random_play_boards(jax.random.key(size), size, 6, 3 * size * size))
    positions = _spread_positions(games, 6)
    assert len(positions) >= 24
    some_alive = 0
    for board in positions:
        check_against_reference(board)
        some_alive += bool(np.any(alive_of(board)))
    assert some_alive >= 5  # the sample does exercise pass-alive groups


def test_random_stones_match_reference():
    # Arbitrary stone patterns (chains without liberties included) stress the
    # region and chain bookkeeping beyond what legal play produces.
    rng = np.random.default_rng(7)
    for size in (2, 3, 4, 5, 6, 9, 13, 19, 21, 25):
        for density in (0.3, 0.6, 0.85):
            board = rng.choice(
                np.array([B, W, 0], np.int8),
                size=size * size,
                p=[density / 2, density / 2, 1 - density],
            )
            check_against_reference(board)


@pytest.mark.parametrize("size", [2, 5, 9, 19])
def test_jit_vmap_batch_equals_one_by_one(size):
    rng = np.random.default_rng(size)
    boards = rng.choice(np.array([B, W, 0], np.int8), size=(6, size * size), p=[0.3, 0.3, 0.4])
    boards[0] = 0
    batched = np.asarray(fast_jit(jax.vmap(_all_variants))(jnp.asarray(boards)))
    assert batched.dtype == np.int8 and batched.shape == (6, 4, size * size)
    for i, board in enumerate(boards):
        assert np.array_equal(batched[i], variants_of(board))


def test_native_area_equals_the_jax_version():
    """The CPU's native kernel (``_pass_alive.cc``) and the JAX version (what accelerators
    run) agree board for board: random stones of every density and size, boards of random
    play (pass-alive groups among them), and the suicide flag as data (runtime rules)."""
    if not native_available():
        pytest.skip("no C++ compiler: the JAX version is the only one")
    modes = ((True, True, True), (False, False, False))  # area_ownership, pass_alive

    def jax_variants(board):
        return jnp.stack([_area_of_board(board, s, *mode) for s in (False, True) for mode in modes])

    rng = np.random.default_rng(11)
    for size in (2, 3, 5, 9, 13, 19, 25):
        density = rng.choice([0.3, 0.6, 0.85], size=(24, 1))
        stones = rng.random((24, size * size)) < density
        colour = np.where(rng.random((24, size * size)) < 0.5, B, W)
        boards = [np.where(stones, colour, 0).astype(np.int8)]
        if size in (9, 13):
            games = np.asarray(_random_play_boards(jax.random.key(size), size, 4, 3 * size * size))
            boards.append(_spread_positions(games, 6).astype(np.int8))
        boards = jnp.asarray(np.concatenate(boards))
        native = np.asarray(fast_jit(jax.vmap(_all_variants))(boards))
        assert np.array_equal(native, np.asarray(fast_jit(jax.vmap(jax_variants))(boards)))
        if size == 9:
            assert np.any(native[:, 1] != 0)  # some pass-alive area: Benson's loop ran
            suicide = jnp.asarray(rng.random(len(boards)) < 0.5)
            traced = fast_jit(
                jax.vmap(lambda b, s: area_ownership(b, multi_stone_suicide_legal=s))
            )(boards, suicide)
            expected = np.where(np.asarray(suicide)[:, None], native[:, 2], native[:, 0])
            assert np.array_equal(np.asarray(traced), expected)
