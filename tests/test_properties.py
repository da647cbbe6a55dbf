"""Property tests on random games: invariants after every move, legality, symmetry.

Games are generated inside one jitted ``lax.scan`` per (board size, rule set):
each ply picks a uniformly random legal move with ``jax.random`` (or plays a
forced action, which replays a given sequence), and the scan returns
everything the checks need. The checks themselves are pure NumPy and use the
flood-fill reference in :mod:`boards`, never gojax's chain labels or counts.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import KO_RULES, RefGame, chains, fast_jit, ref_play
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gojax

ALL_RULES = list(KO_RULES)
SIZES = st.integers(2, 9)
SEEDS = st.integers(0, 2**32 - 1)
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def plies(size: int) -> int:
    """Moves generated per game: the default move cap (2 N²), at most 120."""
    return min(2 * size * size, 120)


def batch(size: int) -> int:
    """Games generated per example: several on the smallest boards, where repetition is common."""
    return {2: 16, 3: 8, 4: 4}.get(size, 1)


@functools.cache
def runner(size: int, rules: str):
    """A jitted ``(seed, forced [B, T]) → per-game, per-ply arrays`` for one size and rule set.

    ``forced[b, t] >= 0`` plays that action at ply ``t`` of game ``b``; ``-1``
    draws a legal move uniformly (pass once the game is over).
    """
    p = size * size

    def run(key, forced):
        def step(state, inputs):
            key, force = inputs
            legal = gojax.legal_moves(state)
            drawn = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
            drawn = jnp.where(state.terminated, p, drawn)
            action = jnp.where(force >= 0, force, drawn).astype(jnp.int32)
            after = gojax.play(state, action)
            record = dict(
                board=state.board,
                to_play=state.to_play,
                legal=legal,
                terminated=state.terminated,
                action=action,
                next_board=after.board,
                next_zobrist=after.zobrist,
                next_hash=gojax.position_hash(after.board),
                next_captures=after.captures,
                next_ko=after.ko,
                next_to_play=after.to_play,
                next_terminated=after.terminated,
                next_move_number=after.move_number,
            )
            return after, record

        state = gojax.new_game(size, rules=rules)
        keys = jax.random.split(key, forced.shape[0])
        _, records = jax.lax.scan(step, state, (keys, forced))
        return records

    compiled = fast_jit(jax.vmap(run))
    shape = (batch(size), plies(size))

    def call(seed: int, forced=None) -> list[dict[str, np.ndarray]]:
        if forced is None:
            forced = np.full(shape, -1, np.int32)
        keys = jax.random.split(jax.random.key(seed), shape[0])
        out = compiled(keys, jnp.asarray(forced, jnp.int32))
        out = {name: np.asarray(value) for name, value in out.items()}
        return [{name: value[b] for name, value in out.items()} for b in range(shape[0])]

    return call


@st.composite
def games(draw, rules=None):
    """``(size, rules, seed, number of moves to check)``."""
    size = draw(SIZES)
    rules = draw(st.sampled_from(ALL_RULES) if rules is None else rules)
    return size, rules, draw(SEEDS), draw(st.integers(1, plies(size)))


def _chain_at(board: np.ndarray, point: int) -> set[int]:
    label, found = chains(board)
    return set(found[label[point]].stones)


# ----------------------------------------------------------------------------
# Invariants after every move.


@settings(max_examples=30, **SETTINGS)
@given(games())
def test_invariants_after_every_move(game):
    size, rules, seed, num_moves = game
    for rec in runner(size, rules)(seed):
        _check_invariants(rec, size, rules, num_moves)


def _check_invariants(rec, size, rules, num_moves):
    _, multi_stone_suicide = KO_RULES[rules]
    p = size * size
    previous_captures = np.zeros(2, np.int64)
    for t in range(num_moves):
        board, after = rec["board"][t], rec["next_board"][t]
        action, me = int(rec["action"][t]), int(rec["to_play"][t])
        captures = rec["next_captures"][t].astype(np.int64)
        if rec["terminated"][t]:
            assert not rec["legal"][t].any(), t
            np.testing.assert_array_equal(after, board)
            assert int(rec["next_move_number"][t]) == int(rec["next_move_number"][t - 1])
            continue
        assert rec["legal"][t][action], t
        assert rec["legal"][t][p], t  # pass is legal until the game ends
        assert not (rec["legal"][t][:p] & (board != 0)).any(), t
        assert int(rec["next_to_play"][t]) == -me
        assert int(rec["next_move_number"][t]) == t + 1

        # The incremental hash is the hash of the stones.
        np.testing.assert_array_equal(rec["next_zobrist"][t], rec["next_hash"][t], err_msg=str(t))

        # No chain on the board is left without a liberty.
        _, found = chains(after, size)
        assert all(chain.liberties for chain in found), (t, after.reshape(size, size))

        # Stones are conserved; the reference move gives the same board.
        delta = captures - previous_captures
        previous_captures = captures
        mine, theirs = (0, 1) if me == 1 else (1, 0)
        if action == p:
            np.testing.assert_array_equal(after, board)
            assert not delta.any()
            continue
        expected = ref_play(board, size, action, me)
        np.testing.assert_array_equal(after, expected.board, err_msg=f"ply {t}")
        gone_theirs = int(np.sum((board == -me) & (after == 0)))
        assert not np.any((board == 0) & (after == -me))  # no opponent stone appears
        if after[action] == me:  # an ordinary move
            assert np.count_nonzero(after) == np.count_nonzero(board) + 1 - gone_theirs
            assert np.all(after[board == me] == me)  # own stones stay
            assert delta[mine] == gone_theirs and delta[theirs] == 0
            assert gone_theirs == len(expected.captured)
        else:  # a suicide: the mover's chain disappears, nothing else changes
            assert multi_stone_suicide, (rules, t)
            placed = board.copy()
            placed[action] = me
            chain = _chain_at(placed, action)
            assert len(chain) >= 2  # never a single stone
            removed = set(np.flatnonzero((placed == me) & (after == 0)).tolist())
            assert removed == chain
            assert gone_theirs == 0
            assert delta[theirs] == len(chain) and delta[mine] == 0  # the placed stone too


# ----------------------------------------------------------------------------
# Legality against the reference rules.


def _check_against_reference(size: int, rules: str, seed: int, num_moves: int):
    for game, rec in enumerate(runner(size, rules)(seed)):
        _check_game_against_reference(rec, size, rules, f"seed {seed} game {game}", num_moves)


def _check_game_against_reference(rec, size: int, rules: str, name: str, num_moves: int):
    ref = RefGame(size, rules)
    for t in range(num_moves):
        expected = ref.legal()
        got = rec["legal"][t]
        if not np.array_equal(got, expected):
            only_ours = [gojax.action_to_gtp(int(a), size) for a in np.flatnonzero(got & ~expected)]
            only_ref = [gojax.action_to_gtp(int(a), size) for a in np.flatnonzero(~got & expected)]
            raise AssertionError(
                f"{rules} {size}x{size} {name} ply {t}: legal only for gojax {only_ours}, "
                f"only for the reference {only_ref}\n{rec['board'][t].reshape(size, size)}"
            )
        ref.play(int(rec["action"][t]))
        np.testing.assert_array_equal(rec["next_board"][t], ref.board, err_msg=f"ply {t}")
        assert int(rec["next_ko"][t]) == ref.ko, t
        assert list(rec["next_captures"][t]) == ref.captures, t
        assert bool(rec["next_terminated"][t]) == ref.terminated, t


@settings(max_examples=30, **SETTINGS)
@given(games(rules=st.just("chinese")))
def test_legal_mask_matches_reference_simple_ko(game):
    # Empty, not single- or multi-stone suicide, not the ko point of the last move.
    _check_against_reference(*game)


@settings(max_examples=25, **SETTINGS)
@given(games(rules=st.sampled_from(["tromp-taylor", "chinese-ogs", "aga", "new-zealand"])))
def test_legal_mask_matches_reference_superko(game):
    # As above plus the suicide rule of the preset and positional or situational superko.
    _check_against_reference(*game)


@pytest.mark.parametrize("rules", ALL_RULES)
def test_small_boards_match_reference_every_preset(rules):
    # Fixed seeds on the boards where captures, kos and repetition are common.
    for size in (2, 3, 4):
        for seed in range(4):
            _check_against_reference(size, rules, seed, plies(size))


# ----------------------------------------------------------------------------
# Symmetry.


def symmetry(size: int, k: int) -> np.ndarray:
    """Permutation ``perm`` with ``transformed[i] = board[perm[i]]`` for symmetry ``k`` of 8.

    Bit 0 flips the rows, bit 1 the columns, bit 2 then transposes.
    """
    index = np.arange(size * size).reshape(size, size)
    if k & 1:
        index = index[::-1, :]
    if k & 2:
        index = index[:, ::-1]
    if k & 4:
        index = index.T
    return index.reshape(-1)


def test_symmetries_form_the_dihedral_group():
    size = 4
    perms = {tuple(symmetry(size, k)) for k in range(8)}
    assert len(perms) == 8
    board = np.arange(16).reshape(4, 4)
    rotations = {tuple(np.rot90(board, r).reshape(-1)) for r in range(4)}
    reflections = {tuple(np.rot90(board.T, r).reshape(-1)) for r in range(4)}
    assert perms == rotations | reflections


@settings(max_examples=24, **SETTINGS)
@given(games(rules=st.sampled_from(["chinese", "tromp-taylor"])), st.integers(0, 7))
def test_play_commutes_with_symmetries(game, k):
    size, rules, seed, num_moves = game
    run = runner(size, rules)
    p = size * size
    perm = symmetry(size, k)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(p)
    action_map = np.append(inverse, p)  # where each action lands; pass stays pass

    originals = run(seed)
    mapped_games = run(seed, forced=np.stack([action_map[g["action"]] for g in originals]))
    for original, mapped in zip(originals, mapped_games, strict=True):
        _check_symmetric(original, mapped, perm, p, num_moves)


def _check_symmetric(original, mapped, perm, p, num_moves):
    for t in range(num_moves):
        np.testing.assert_array_equal(
            mapped["board"][t], original["board"][t][perm], err_msg=f"board before ply {t}"
        )
        legal = original["legal"][t]
        np.testing.assert_array_equal(
            mapped["legal"][t], np.append(legal[:p][perm], legal[p]), err_msg=f"legal at ply {t}"
        )
        np.testing.assert_array_equal(
            mapped["next_board"][t], original["next_board"][t][perm], err_msg=f"ply {t}"
        )
        np.testing.assert_array_equal(mapped["next_captures"][t], original["next_captures"][t])
        assert mapped["next_terminated"][t] == original["next_terminated"][t]
