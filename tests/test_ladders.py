"""KataGo's ladder features (planes 14 and 17): scripted ladders and a pure-Python reference.

The reference below is a recursive transcription of KataGo's ladder search
(``board.cpp: searchIsLadderCaptured``, ``searchIsLadderCapturedAttackerFirst2Libs``)
and scan (``nninputs.cpp: iterLadders``) on a plain list board that
flood-fills chains: it shares nothing with gojax's vectorised version except
the fixed candidate order both use in place of KataGo's linked-list order.
"""

from __future__ import annotations

import collections
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, long_ladder

import gojax
from gojax._ladders import (
    LADDER_SEARCH_BUDGET,
    _ladder_features,
    ladder_features,
    ladder_features_of_boards,
    stack_limit,
)

BLACK, WHITE = 1, -1
_SYMBOLS = {"X": BLACK, "O": WHITE, ".": 0}


def draw(text: str) -> np.ndarray:
    """ASCII rows (top line first; ``X`` black, ``O`` white, ``.`` empty) → ``[P]`` int8."""
    rows = [line.replace(" ", "") for line in textwrap.dedent(text).strip().splitlines()]
    assert all(len(row) == len(rows) for row in rows), "drawing must be square"
    return np.array([_SYMBOLS[ch] for row in rows for ch in row], np.int8)


def points(board_text: str, symbol: str = "*") -> set[int]:
    """Indices of the ``symbol`` marks in a drawing (other symbols are ignored)."""
    rows = [line.replace(" ", "") for line in textwrap.dedent(board_text).strip().splitlines()]
    return {
        r * len(rows) + c for r, row in enumerate(rows) for c, ch in enumerate(row) if ch == symbol
    }


# ----------------------------------------------------------------------------
# Pure-Python reference.


class RefBoard:
    """A list board with flood-filled chains and KataGo's move semantics (ko, no suicide)."""

    def __init__(self, size: int, stones, ko: int = -1):
        self.size = size
        self.stones = [int(v) for v in stones]
        self.ko = int(ko)

    def copy(self) -> RefBoard:
        return RefBoard(self.size, self.stones, self.ko)

    def adj(self, point: int) -> list[int | None]:
        """The four neighbours (None off the board)."""
        row, col = divmod(point, self.size)
        n = self.size
        return [
            point - n if row > 0 else None,
            point + n if row < n - 1 else None,
            point - 1 if col > 0 else None,
            point + 1 if col < n - 1 else None,
        ]

    def colour(self, point: int | None) -> int:
        return 2 if point is None else self.stones[point]

    def chain(self, point: int) -> frozenset[int]:
        colour, seen, todo = self.stones[point], {point}, [point]
        while todo:
            for q in self.adj(todo.pop()):
                if q is not None and q not in seen and self.stones[q] == colour:
                    seen.add(q)
                    todo.append(q)
        return frozenset(seen)

    def libs_of(self, chain) -> set[int]:
        return {q for s in chain for q in self.adj(s) if q is not None and self.stones[q] == 0}

    def nlibs(self, point: int) -> int:
        return len(self.libs_of(self.chain(point)))

    def legal(self, move: int, colour: int) -> bool:
        if self.stones[move] != 0 or move == self.ko:
            return False
        for q in self.adj(move):
            c = self.colour(q)
            if (
                c == 0
                or (c == colour and self.nlibs(q) > 1)
                or (c == -colour and self.nlibs(q) == 1)
            ):
                return True
        return False

    def play(self, move: int, colour: int) -> RefBoard:
        out = self.copy()
        out.stones[move] = colour
        captured: set[int] = set()
        for q in self.adj(move):
            if out.colour(q) == -colour and not out.libs_of(out.chain(q)):
                captured |= out.chain(q)
        for s in captured:
            out.stones[s] = 0
        lone = all(self.colour(q) != colour for q in self.adj(move))
        ko = len(captured) == 1 and lone and out.nlibs(move) == 1
        out.ko = next(iter(captured)) if ko else -1
        return out


# How often each rule of the reference search decided something: lets the tests
# check that their positions exercise the rarer rules.
EVENTS: collections.Counter[str] = collections.Counter()


class Aborted(Exception):
    """The node budget ran out."""


def ref_search(board: RefBoard, loc: int, budget: int) -> bool | None:
    """``searchIsLadderCaptured(loc, defenderFirst=True)``; None if the budget ran out."""
    size = board.size
    defender = board.stones[loc]
    attacker = -defender
    limit = stack_limit(size)
    played = [0]

    def empties(b, p):
        return sum(b.colour(q) == 0 for q in b.adj(p))

    def candidates_defender(b):
        own = b.chain(loc)
        caps = set()
        for s in own:
            for q in b.adj(s):
                if b.colour(q) == attacker and b.nlibs(q) == 1:
                    caps |= b.libs_of(b.chain(q))
        moves = sorted(caps)
        (lib,) = b.libs_of(own)
        if lib not in caps:
            moves.append(lib)
        return moves

    def bounds(b, p):  # getBoundNumLibertiesAfterPlay(p, defender), neighbour by neighbour
        imm = caps = potential = conn_sum = conn_max = 0
        for q in b.adj(p):
            c = b.colour(q)
            if c == 0:
                imm += 1
            elif c == attacker and b.nlibs(q) == 1:
                caps += 1
                potential += len(b.chain(q))
            elif c == defender:
                conn_sum += b.nlibs(q) - 1
                conn_max = max(conn_max, b.nlibs(q) - 1)
        return caps + max(conn_max, imm), imm + potential + conn_sum

    def ko_mouth(b, p):  # wouldBeKoCapture(p, attacker)
        hits = [q for q in b.adj(p) if b.colour(q) == defender and b.nlibs(q) == 1]
        surrounded = all(b.colour(q) in (defender, 2) for q in b.adj(p))
        return surrounded and len(hits) == 1 and len(b.chain(hits[0])) == 1

    def libs_after(b, p):  # getNumLibertiesAfterPlay(p, defender, 3) <= 2 needs the exact count
        after = b.copy()
        after.ko = -1
        after = after.play(p, defender)
        return after.nlibs(p)

    def heuristic(b, p):
        return sum(
            2 * b.nlibs(q) - 3 for q in b.adj(p) if b.colour(q) == defender and b.nlibs(q) > 1
        )

    def node(b: RefBoard, depth: int) -> bool:
        if depth >= limit:
            EVENTS["stack limit"] += 1
            return True
        is_defender = depth % 2 == 0
        libs = b.nlibs(loc)
        if is_defender:
            if libs >= 2:
                return False
            if b.ko >= 0:
                EVENTS["defender ko"] += 1
                return False
            moves = candidates_defender(b)
            EVENTS["defender captures"] += len(moves) > 1
            lower, upper = bounds(b, moves[-1])
            if lower >= 3:
                EVENTS["lower bound"] += 1
                return False
            if len(moves) == 1 and upper <= 1:
                EVENTS["upper bound"] += 1
                return True
        else:
            if libs <= 1:
                return True
            if libs >= 3:
                return False
            a, c = sorted(b.libs_of(b.chain(loc)))
            ea, ec = empties(b, a), empties(b, c)
            if (
                ea == 0
                and ec == 0
                and ko_mouth(b, a)
                and ko_mouth(b, c)
                and libs_after(b, a) <= 2
                and libs_after(b, c) <= 2
                and not any(
                    b.colour(q) == attacker and b.nlibs(q) == 1
                    for s in b.chain(loc)
                    for q in b.adj(s)
                )
            ):
                EVENTS["double ko"] += 1
                return True
            moves = [a, c]
            adjacent = c in b.adj(a)
            if not adjacent and ea >= 3 and ec >= 3:
                EVENTS["both far"] += 1
                return False
            if not adjacent and ea >= 3:
                EVENTS["one far"] += 1
                moves = [a]
            elif not adjacent and ec >= 3:
                EVENTS["one far"] += 1
                moves = [c]
            elif 2 * ec + heuristic(b, c) > 2 * ea + heuristic(b, a):
                EVENTS["swap"] += 1
                moves = [c, a]
        mover = defender if is_defender else attacker
        for move in moves:
            if not b.legal(move, mover):
                EVENTS["illegal"] += 1
                continue
            child = b.play(move, mover)
            played[0] += 1
            if played[0] >= budget:
                raise Aborted
            if node(child, depth + 1) != is_defender:
                return not is_defender
        return is_defender

    root = board.copy()
    root.ko = -1
    try:
        return node(root, 0)
    except Aborted:
        EVENTS["abort"] += 1
        return None


def ref_ladder_features(board, ko, to_play, budget=LADDER_SEARCH_BUDGET):
    """``iterLadders`` with plane 14 and 17 semantics, on numpy inputs → two ``[P]`` bool arrays."""
    size = int(round(len(board) ** 0.5))
    ko = int(ko)
    shared = RefBoard(size, board, ko)
    laddered = np.zeros(size * size, bool)
    working = np.zeros(size * size, bool)
    solved: dict[frozenset[int], bool] = {}
    for loc in range(size * size):
        if shared.stones[loc] == 0:
            continue
        chain = shared.chain(loc)
        libs = sorted(shared.libs_of(chain))
        if len(libs) not in (1, 2):
            continue
        if chain not in solved:
            if len(libs) == 1:
                result = ref_search(shared, loc, budget)
                if result is None and shared.ko >= 0:  # KataGo leaves its ko point cleared
                    EVENTS["ko cleared"] += 1
                    shared.ko = -1
                solved[chain] = bool(result)
            else:
                works = []
                for move in libs:
                    EVENTS["first move on ko"] += move == shared.ko
                    EVENTS["first move on cleared ko"] += move == ko and shared.ko < 0 <= ko
                    if shared.legal(move, -shared.stones[loc]):
                        after = shared.play(move, -shared.stones[loc])
                        if ref_search(after, loc, budget):
                            works.append(move)
                solved[chain] = bool(works)
                if works and shared.stones[loc] == -to_play:
                    working[works] = True
        laddered[loc] = solved[chain]
    return laddered, working


# ----------------------------------------------------------------------------
# Scripted positions.

jit_ladders = fast_jit(ladder_features)
jit_budget = fast_jit(_ladder_features, static_argnames=("budget",))


def features(board, ko=-1, to_play=BLACK):
    laddered, working = jit_ladders(jnp.asarray(board), jnp.int32(ko), jnp.int8(to_play))
    return np.asarray(laddered), np.asarray(working)


LADDER = """
    . . . . . . . . .
    . . . . . . . . .
    . . . . . . . . .
    . . . . . X . . .
    . . . X O . . . .
    . . . . X . . . .
    . . . . . . . . .
    . . . . . . . . .
    . . . . . . . . .
"""


def test_working_ladder_in_atari():
    board = draw(LADDER)
    board[3 * 9 + 4] = BLACK  # atari from above: White can only run right, into the ladder
    laddered, working = features(board, to_play=WHITE)
    assert set(np.flatnonzero(laddered)) == {4 * 9 + 4}
    assert not working.any()  # a 1-liberty chain has no working first moves
    ref = ref_ladder_features(board, -1, WHITE)
    np.testing.assert_array_equal(laddered, ref[0])


def test_two_liberty_chain_working_moves():
    board = draw(LADDER)
    laddered, working = features(board, to_play=BLACK)
    assert set(np.flatnonzero(laddered)) == {4 * 9 + 4}
    # Both ataris work: each chases White along a staircase to the edge.
    assert set(np.flatnonzero(working)) == {3 * 9 + 4, 4 * 9 + 5}
    # Plane 17 is only for the opponent's chains: none when White is to play.
    laddered_w, working_w = features(board, to_play=WHITE)
    np.testing.assert_array_equal(laddered_w, laddered)
    assert not working_w.any()


def test_ladder_breaker():
    # A white stone on the up-left staircase breaks the atari from the right;
    # the atari from above still drives White down-right into a working ladder.
    board = draw(LADDER)
    board[2 * 9 + 2] = WHITE
    laddered, working = features(board)
    assert set(np.flatnonzero(laddered)) == {4 * 9 + 4}
    assert set(np.flatnonzero(working)) == {3 * 9 + 4}
    # Breakers on both staircases: no ladder at all.
    board[6 * 9 + 6] = WHITE
    laddered, working = features(board)
    assert not laddered.any() and not working.any()
    # The same in atari: White runs right and down-right into its breaker.
    board[3 * 9 + 4] = BLACK
    laddered, _ = features(board, to_play=WHITE)
    assert not laddered.any()
    without_breaker = board.copy()
    without_breaker[6 * 9 + 6] = 0
    assert features(without_breaker, to_play=WHITE)[0][4 * 9 + 4]


def test_capture_to_escape():
    # White (4,4) is in atari (liberty (4,5)) and would be laddered running
    # right, but the black stone at (4,3) is itself in atari: capturing it at
    # (5,3) gives White two liberties.
    text = """
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . O X X . . .
        . . O X O . . . .
        . . . . X . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
    """
    board = draw(text)
    laddered, _ = features(board, to_play=WHITE)
    assert not laddered.any()
    np.testing.assert_array_equal(laddered, ref_ladder_features(board, -1, WHITE)[0])
    # Without the capture (the black stone gets a second liberty) White is laddered.
    board[4 * 9 + 2] = 0
    laddered, _ = features(board, to_play=WHITE)
    assert set(np.flatnonzero(laddered)) == {4 * 9 + 4}
    np.testing.assert_array_equal(laddered, ref_ladder_features(board, -1, WHITE)[0])


def test_three_liberties_and_empty_board():
    laddered, working = features(np.zeros(81, np.int8))
    assert not laddered.any() and not working.any()
    board = draw(LADDER)
    board[4 * 9 + 3] = 0  # White now has three liberties
    laddered, working = features(board)
    assert not laddered.any() and not working.any()


def test_edge_ladder_small_boards():
    # 2x2: a lone stone next to an enemy stone has one liberty and is captured.
    board = draw("""
        X O
        . .
    """)
    laddered, working = features(board, to_play=BLACK)
    ref = ref_ladder_features(board, -1, BLACK)
    np.testing.assert_array_equal(laddered, ref[0])
    np.testing.assert_array_equal(working, ref[1])
    # 5x5: a first-line chain with one liberty, then with two.
    board = draw("""
        . . . . .
        . . . . .
        . . . . .
        X X X . .
        O O . . .
    """)
    laddered, working = features(board, to_play=BLACK)
    assert set(np.flatnonzero(laddered)) == {20, 21}
    assert not working.any()
    board[16] = 0  # now the lone black stone at the edge can be laddered too
    laddered, working = features(board, to_play=BLACK)
    assert set(np.flatnonzero(laddered)) == {15, 20, 21}
    assert set(np.flatnonzero(working)) == {16, 22}
    for to_play in (BLACK, WHITE):
        ref = ref_ladder_features(board, -1, to_play)
        got = features(board, to_play=to_play)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])


@pytest.mark.parametrize("size", [19, 25])
def test_long_ladder_jit_and_vmap(size):
    board, broken = long_ladder(size)
    centre = size // 2
    batch = np.stack([board, broken, np.zeros_like(board)])
    kos = jnp.full(3, -1, jnp.int32)
    to_play = jnp.full(3, BLACK, jnp.int8)
    laddered, working = jax.jit(jax.vmap(ladder_features))(jnp.asarray(batch), kos, to_play)
    laddered, working = np.asarray(laddered), np.asarray(working)
    assert set(np.flatnonzero(laddered[0])) == {centre * size + centre}
    assert set(np.flatnonzero(working[0])) == {
        (centre - 1) * size + centre,
        centre * size + centre + 1,
    }
    assert not laddered[1].any() and not working[1].any()
    assert not laddered[2].any()
    for row in range(2):
        one = features(batch[row])
        np.testing.assert_array_equal(laddered[row], one[0])
        np.testing.assert_array_equal(working[row], one[1])
        ref = ref_ladder_features(batch[row], -1, BLACK)
        np.testing.assert_array_equal(laddered[row], ref[0])
        np.testing.assert_array_equal(working[row], ref[1])


# ----------------------------------------------------------------------------
# Random positions against the reference.


def random_positions(size: int, count: int, seed: int, at_ko: bool = False):
    """``count`` positions after 40..120 random legal moves (no passes while a move exists).

    With ``at_ko``, each game stops instead at its last position in that range
    with a simple-ko point, where it has one.
    """

    def one(key):
        key, sub = jax.random.split(key)
        length = jax.random.randint(sub, (), 40, 121)
        state = gojax.new_game(size, rules="chinese")

        def step(i, carry):
            state, kept, key = carry
            key, sub = jax.random.split(key)
            legal = gojax.legal_moves(state)
            stones = legal.at[-1].set(~jnp.any(legal[:-1]))
            action = jax.random.categorical(sub, jnp.where(stones, 0.0, -jnp.inf))
            state = gojax.play(state, action)
            keep = (i + 1 == length) if not at_ko else (i + 1 >= 40) & (state.ko >= 0)
            keep = keep | ((i + 1 == 120) & (kept.ko < 0)) if at_ko else keep
            kept = jax.tree.map(lambda a, b: jnp.where(keep, a, b), state, kept)
            return state, kept, key

        _, kept, _ = jax.lax.fori_loop(0, 120, step, (state, state, key))
        return kept.board, kept.ko.astype(jnp.int32), kept.to_play

    keys = jax.random.split(jax.random.key(seed), count)
    return jax.tree.map(np.asarray, fast_jit(jax.vmap(one))(keys))


batched_ladders = fast_jit(jax.vmap(_ladder_features, in_axes=(0, 0, 0, None)))


@pytest.mark.parametrize("size", [7, 9])
def test_random_positions_match_reference(size):
    EVENTS.clear()
    plain = random_positions(size, 24, seed=size)
    at_ko = random_positions(size, 24, seed=100 + size, at_ko=True)
    assert (at_ko[1] >= 0).sum() >= 5
    laddered_chains = 0
    # Small budgets make searches abort, which exposes the candidate order and
    # the ko point an aborted 1-liberty search leaves cleared on KataGo's board.
    for (boards, kos, to_play), budgets in ((plain, (LADDER_SEARCH_BUDGET, 3)), (at_ko, (2, 12))):
        for budget in budgets:
            laddered, working = batched_ladders(boards, kos, to_play, jnp.int32(budget))
            for i in range(len(boards)):
                ref = ref_ladder_features(boards[i], kos[i], to_play[i], budget=budget)
                message = f"position {i}, budget {budget}"
                np.testing.assert_array_equal(laddered[i], ref[0], err_msg=message)
                np.testing.assert_array_equal(working[i], ref[1], err_msg=message)
                laddered_chains += int(ref[0].any())
    assert laddered_chains > 20
    rules = ["defender captures", "lower bound", "upper bound", "swap", "illegal", "abort"]
    rules += ["defender ko", "first move on ko", "ko cleared", "first move on cleared ko"]
    assert all(EVENTS[rule] > 0 for rule in rules), EVENTS


def test_random_25x25_positions_match_reference():
    """The largest board: full-budget scans equal the reference's (the small-board test
    above covers aborted searches and ko; random 25x25 play rarely makes a ko)."""
    boards, kos, to_play = random_positions(25, 16, seed=25)
    laddered, working = batched_ladders(boards, kos, to_play, jnp.int32(LADDER_SEARCH_BUDGET))
    chains = 0
    for i in range(len(boards)):
        ref = ref_ladder_features(boards[i], kos[i], to_play[i])
        np.testing.assert_array_equal(laddered[i], ref[0], err_msg=f"position {i}")
        np.testing.assert_array_equal(working[i], ref[1], err_msg=f"position {i}")
        chains += int(ref[0].any()) + int(ref[1].any())
    assert chains >= 10, chains  # the sample does hold ladders (20 here)


def _while_conditions(jaxpr):
    """The loop conditions of every ``while`` in ``jaxpr``, nested ones included."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            yield eqn.params["cond_jaxpr"]
        for value in eqn.params.values():
            # A cond's branches come as a tuple (on a CPU the JAX loop is one branch of
            # the platform choice, the native kernel the other).
            for item in value if isinstance(value, tuple) else (value,):
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns"):
                    yield from _while_conditions(inner)


def test_batched_scans_equal_one_board_at_a_time_and_step_only_one_stack_row(monkeypatch):
    boards, kos, to_play = random_positions(9, 12, seed=7)
    one = jax.jit(ladder_features)
    expected = [one(boards[i], kos[i], to_play[i]) for i in range(12)]

    # vmap of vmap: the boards of both axes run in one loop.
    nested = jax.jit(jax.vmap(jax.vmap(ladder_features)))(
        boards.reshape(3, 4, -1), kos.reshape(3, 4), to_play.reshape(3, 4)
    )
    # Several boards a call (one player for all of them), batched.
    groups = jax.jit(jax.vmap(ladder_features_of_boards))(
        boards.reshape(4, 3, -1), kos.reshape(4, 3), to_play.reshape(4, 3)[:, 0]
    )
    for i in range(12):
        np.testing.assert_array_equal(nested[0][i // 4, i % 4], expected[i][0])
        np.testing.assert_array_equal(nested[1][i // 4, i % 4], expected[i][1])
        player = to_play[(i // 3) * 3]
        want = expected[i] if player == to_play[i] else one(boards[i], kos[i], player)
        np.testing.assert_array_equal(groups[0][i // 3, i % 3], want[0])
        np.testing.assert_array_equal(groups[1][i // 3, i % 3], want[1])

    # One condition for the whole batch: vmap of a per-board while_loop has one per board,
    # and XLA then selects between the old and new state of every board, [D, P] stacks
    # included, at every iteration.
    # (The chain labelling before the search is a small loop of its own, left to vmap.)
    # The JAX loop alone: with the native kernel the program holds its calls instead.
    monkeypatch.setenv("GOJAX_NATIVE_LADDERS", "0")
    jaxpr = jax.make_jaxpr(jax.vmap(ladder_features))(boards, kos, to_play).jaxpr
    searches = [
        cond
        for cond in _while_conditions(jaxpr)
        if any(aval.ndim == 3 for aval in cond.in_avals)  # carries [B, D, P] stacks
    ]
    assert searches
    assert all(cond.out_avals[0].shape == () for cond in searches)


@pytest.mark.parametrize("num_lanes", [1, 5, pytest.param(48, marks=pytest.mark.slow)])
def test_lanes_give_each_boards_in_order_answers_budget_aborts_included(num_lanes):
    """Chains shared out among lanes from every board give each board's own in-order
    answers, also where a 1-liberty search aborts on its budget and leaves KataGo's ko
    point cleared for the board's later chains: there the lanes' first pass, which keeps
    the ko point for every search, is wrong, and their second pass mends it."""
    from gojax import _ladders

    def scans(positions, budget):
        boards, kos, to_play = (jnp.asarray(x) for x in positions)
        roots = jax.vmap(_ladders._root)(boards, kos, to_play, jnp.full(len(kos), budget))
        first = _ladders._lanes_pass(roots, num_lanes, jnp.ones(roots.board.shape, bool))
        lanes = _ladders._scan_in_lanes(roots, num_lanes)
        return (first.laddered, first.working), lanes, _ladders._scan_in_order(roots)

    scans = fast_jit(scans)
    plain = random_positions(9, 24, seed=11, at_ko=True)
    # 6x6 games where, at a budget of 3, an abort does change a later chain's answer.
    aborting = random_positions(6, 24, seed=1002, at_ko=True)
    for positions, budget, first_pass_right in (
        (plain, LADDER_SEARCH_BUDGET, True),
        (aborting, 3, False),
    ):
        first, lanes, want = scans(positions, budget)
        assert np.asarray(want[0]).any()
        same = all(np.array_equal(a, b) for a, b in zip(first, want, strict=True))
        assert same == first_pass_right, budget
        for got, expected in zip(lanes, want, strict=True):
            np.testing.assert_array_equal(got, expected, err_msg=f"budget {budget}")
