"""Tree search: known best moves, signs and finished games, masking, tree reuse, UCT.

Positions are small and end soon (a move cap of a few plies), so that a
search with no knowledge (the uniform evaluator: value 0 everywhere) can only
learn from finished games in its tree, and an exact minimax (``solve``)
checks the premise of every test: the move we expect is the only one that
wins.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from boards import fast_jit, jit_legal, jit_play, new_game, position
from reference import reference_path

import gojax
from gojax import nn as gnn
from gojax.search import (
    SearchConfig,
    agz_evaluator,
    default_dirichlet_alpha,
    katago_evaluator,
    make_recurrent_fn,
    principal_variation,
    reuse_subtree,
    root_stats,
    search,
    uniform_evaluator,
)
from gojax.uct import mixed_evaluator, random_rollout, rollout_moves, uct_search

UNIFORM = uniform_evaluator()
jit_winner = fast_jit(gojax.winner)

# Black to play; the white chain in the middle column is in atari at C5 (action 2).
# With komi 20.5 Black wins only by capturing before the game ends (cap: 2 moves).
CAPTURE = dict(
    text="""
        X X . X X
        X X O X X
        X X O X X
        X X O X X
        . X X X .
    """,
    to_play="B",
    komi=20.5,
    max_moves=2,
)
CAPTURE_MOVE = 2

# Black to play; the black chain on the lower middle column has one liberty,
# D4 (action 24): connecting there saves it and wins by 0.5, anything else
# lets White capture it.
SAVE = dict(
    text="""
        X . X X X . X
        X X X X X X X
        X X X X X X X
        O O O . O O O
        O . O X O . O
        O O O X O O O
        O O O X O O O
    """,
    to_play="B",
    komi=0.5,
)
SAVE_MOVE = 24

# White to play, three plies to the end: only D1 (action 23) wins (found by
# exhaustive search over random endings; ``solve`` checks it).
ENDING = dict(
    text="""
        X X . O O
        X . X X .
        O O O X X
        O O X O X
        O O X . X
    """,
    to_play="W",
    komi=1.5,
    max_moves=3,
)
ENDING_MOVE = 23


def batch(state: gojax.GoState, n: int) -> gojax.GoState:
    """``n`` copies of one state, stacked."""
    return jax.tree.map(lambda x: jnp.stack([x] * n), state)


def stack(states) -> gojax.GoState:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def solve(state: gojax.GoState) -> dict[int, float]:
    """Exact minimax value of every legal move for the player to move (+1 win, -1 loss)."""
    values = {}
    for action in np.flatnonzero(np.asarray(jit_legal(state))):
        child = jit_play(state, int(action))
        if bool(child.terminated):
            values[int(action)] = float(jit_winner(child)) * int(state.to_play)
        else:
            values[int(action)] = -max(solve(child).values())
    return values


@functools.cache
def searcher(evaluator, config: SearchConfig):
    return fast_jit(functools.partial(search, evaluator, config=config))


@functools.cache
def reuse_jit():
    return fast_jit(reuse_subtree)


def walk_edges(tree: mctx.Tree):
    """Every expanded edge ``(game, parent, action, child)`` of a batched tree, from NumPy."""
    parents = np.asarray(tree.parents)
    actions = np.asarray(tree.action_from_parent)
    visits = np.asarray(tree.node_visits)
    for b, child in zip(*np.nonzero((visits > 0) & (parents >= 0)), strict=True):
        yield int(b), int(parents[b, child]), int(actions[b, child]), int(child)


def legal_in_tree(tree: mctx.Tree) -> np.ndarray:
    """``[B, N, A]`` legal moves of every node's position."""
    return np.asarray(fast_jit(jax.vmap(jax.vmap(gojax.legal_moves)))(tree.embeddings))


# ----------------------------------------------------------------------------
# Premises.


@pytest.mark.parametrize(
    "setup, move, max_moves",
    [(CAPTURE, CAPTURE_MOVE, None), (SAVE, SAVE_MOVE, 2), (SAVE, SAVE_MOVE, 4), (ENDING, 23, None)],
)
def test_positions_have_one_winning_move(setup, move, max_moves):
    kwargs = dict(setup, max_moves=max_moves or setup.get("max_moves"))
    values = solve(position(**kwargs))
    assert values[move] == 1.0
    assert all(v == -1.0 for a, v in values.items() if a != move), values
    assert len(values) >= 4


def test_default_dirichlet_alpha():
    assert default_dirichlet_alpha(19) == pytest.approx(0.03)
    assert default_dirichlet_alpha(9) == pytest.approx(0.03 * 361 / 81)
    assert SearchConfig().alpha(9) == pytest.approx(0.1337, abs=1e-4)
    assert SearchConfig(dirichlet_alpha=0.5).alpha(19) == 0.5
    with pytest.raises(ValueError):
        SearchConfig(kind="alphabeta")
    with pytest.raises(ValueError):
        SearchConfig(num_simulations=0)
    for scale in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="gumbel_scale must be >= 0"):
            SearchConfig(kind="gumbel", gumbel_scale=scale)
    # Static: configs are hashable and equal by value.
    assert hash(SearchConfig(num_simulations=8)) == hash(SearchConfig(num_simulations=8))


# ----------------------------------------------------------------------------
# Known best moves.


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_capture_in_one(kind):
    states = batch(position(**CAPTURE), 4)
    config = SearchConfig(kind=kind, num_simulations=32, temperature_moves=0)
    out = searcher(UNIFORM, config)(states, jax.random.key(0))
    np.testing.assert_array_equal(out.action, CAPTURE_MOVE)
    # The capture backs up wins only; any other move backs up losses (and its leaf's value 0).
    q, visits = np.asarray(out.q_values), np.asarray(out.visit_counts)
    assert np.all(q[:, CAPTURE_MOVE] > 0.8)
    others = (visits > 0) & (np.arange(visits.shape[1]) != CAPTURE_MOVE)
    assert np.all(q[others] <= 0.0)


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_save_group_in_atari(kind):
    states = batch(position(**dict(SAVE, max_moves=2)), 4)
    config = SearchConfig(kind=kind, num_simulations=64, temperature_moves=0)
    out = searcher(UNIFORM, config)(states, jax.random.key(1))
    np.testing.assert_array_equal(out.action, SAVE_MOVE)


def test_save_group_deeper_puct():
    # Four plies to the end: the refutation of every other move is 4 plies deep.
    states = batch(position(**dict(SAVE, max_moves=4)), 4)
    config = SearchConfig(num_simulations=256, temperature_moves=0)
    out = searcher(UNIFORM, config)(states, jax.random.key(2))
    np.testing.assert_array_equal(out.action, SAVE_MOVE)
    assert np.all(np.asarray(out.q_values[:, SAVE_MOVE]) > 0.5)


def test_only_winning_move_in_tiny_ending_white_to_play():
    states = batch(position(**ENDING), 4)
    config = SearchConfig(num_simulations=256, dirichlet_fraction=0.0, temperature_moves=0)
    out = searcher(UNIFORM, config)(states, jax.random.key(3))
    np.testing.assert_array_equal(out.action, ENDING_MOVE)
    # White's view: winning is positive for the player to move, whatever the colour.
    assert np.all(np.asarray(out.root_value) > 0.3)


# ----------------------------------------------------------------------------
# Signs and finished games.


def after_pass(text: str, to_play: str, komi: float) -> gojax.GoState:
    """The position with ``to_play`` to move just after the opponent passed."""
    opponent = "W" if to_play == "B" else "B"
    state = position(text, to_play=opponent, komi=komi)
    return jit_play(state, state.num_actions - 1)


# Black's area is 15 points, White's 10.
SPLIT = """
    . . X O .
    . . X O .
    . . X O .
    . . X O .
    . . X O .
"""
# The same with colours swapped.
SPLIT_SWAPPED = SPLIT.replace("X", "x").replace("O", "X").replace("x", "O")


@pytest.mark.parametrize(
    "text, to_play, komi, outcome",
    [
        (SPLIT, "B", 4.5, 1.0),  # Black ahead by 0.5: passing wins
        (SPLIT, "B", 5.5, -1.0),  # behind by 0.5: passing loses
        (SPLIT_SWAPPED, "W", -4.5, 1.0),  # the same for White
        (SPLIT_SWAPPED, "W", -5.5, -1.0),
    ],
)
@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_pass_after_opponent_pass_is_scored(text, to_play, komi, outcome, kind):
    state = after_pass(text, to_play, komi)
    assert int(state.passes) == 1
    states = batch(state, 2)
    config = SearchConfig(kind=kind, num_simulations=64, temperature_moves=0)
    out = searcher(UNIFORM, config)(states, jax.random.key(4))
    pass_action = state.num_actions - 1
    visits = np.asarray(out.visit_counts)
    assert np.all(visits[:, pass_action] > 0)
    # Exactly the game result for the player to move, reward at the transition.
    np.testing.assert_array_equal(out.q_values[:, pass_action], outcome)
    np.testing.assert_array_equal(out.tree.children_rewards[:, 0, pass_action], outcome)
    np.testing.assert_array_equal(out.tree.children_discounts[:, 0, pass_action], 0.0)
    if outcome > 0:
        np.testing.assert_array_equal(out.action, pass_action)
    else:
        assert np.all(np.asarray(out.action) != pass_action)


def test_nothing_is_expanded_below_a_finished_game():
    # The pass that ends the game is revisited many times, never expanded below.
    states = batch(after_pass(SPLIT, "B", 4.5), 2)
    out = searcher(UNIFORM, SearchConfig(num_simulations=64))(states, jax.random.key(5))
    terminated = np.asarray(out.tree.embeddings.terminated)
    for b, parent, _, _ in walk_edges(out.tree):
        assert not terminated[b, parent]
    pass_action = states.num_actions - 1
    child = np.asarray(out.tree.children_index[:, 0, pass_action])
    rows = np.arange(2)
    assert np.all(terminated[rows, child])
    # A revisited finished game counts its visits and keeps value 0 (its result is the reward).
    np.testing.assert_array_equal(
        out.tree.node_visits[rows, child], out.visit_counts[:, pass_action]
    )
    np.testing.assert_array_equal(out.tree.node_values[rows, child], 0.0)


def test_finished_game_at_root_passes():
    state = after_pass(SPLIT, "B", 4.5)
    over = jit_play(state, state.num_actions - 1)
    assert bool(over.terminated)
    out = searcher(UNIFORM, SearchConfig(num_simulations=4))(batch(over, 2), jax.random.key(6))
    np.testing.assert_array_equal(out.action, over.num_actions - 1)


# ----------------------------------------------------------------------------
# Masking at every depth.

# A ko (Black captures at C4 and White may not retake at once), suicide points
# for both sides, and occupied points an adversarial prior pushes the search to.
KO = """
    . X O . .
    X O . O .
    . X O . .
    . . . . .
    . . . . .
"""


def adversarial_evaluator(states, key):
    """Huge prior on occupied points (all illegal), random values to make the tree deep."""
    occupied = states.board != 0
    logits = jnp.concatenate([jnp.where(occupied, 30.0, 0.0), jnp.zeros_like(occupied[:, :1])], 1)
    value = jax.random.uniform(key, states.to_play.shape, minval=-1.0, maxval=1.0)
    return logits.astype(jnp.float32), value


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_no_illegal_move_anywhere_in_the_tree(kind):
    states = stack([position(KO, to_play="B"), position(KO, to_play="W")])
    config = SearchConfig(kind=kind, num_simulations=96, max_num_considered_actions=8)
    out = searcher(adversarial_evaluator, config)(states, jax.random.key(7))
    legal = legal_in_tree(out.tree)
    edges = list(walk_edges(out.tree))
    assert len(edges) >= 2 * 64  # a real tree, not just the root's children
    for b, parent, action, _ in edges:
        assert legal[b, parent, action], (b, parent, action)
    # The ko capture was searched, so the ko ban was in force at some node.
    visited = np.asarray(out.tree.node_visits) > 0
    assert np.any(np.asarray(out.tree.embeddings.ko)[visited] >= 0)
    assert np.all(legal[np.arange(2), 0, np.asarray(out.action)])
    # Priors of illegal moves are zero at every expanded node of an unfinished game.
    priors = np.asarray(jax.nn.softmax(out.tree.children_prior_logits, axis=-1))
    live = visited & ~np.asarray(out.tree.embeddings.terminated)
    assert np.all(priors[live][~legal[live]] == 0.0)


def test_illegal_move_below_root_is_a_loss_for_its_player():
    states = batch(position(KO, to_play="B"), 2)
    recurrent_fn = make_recurrent_fn(UNIFORM)
    occupied, ko_capture = 1, 7  # B5 is occupied; C4 takes the ko
    actions = jnp.array([occupied, ko_capture], jnp.int32)
    out, children = fast_jit(recurrent_fn)(None, jax.random.key(0), actions, states)
    np.testing.assert_array_equal(out.reward, [-1.0, 0.0])
    np.testing.assert_array_equal(out.discount, [0.0, -1.0])
    np.testing.assert_array_equal(children.terminated, [True, False])
    # The illegal move is not played: the position stays as it was.
    np.testing.assert_array_equal(children.board[0], states.board[0])
    assert int(children.board[1, ko_capture]) == 1 and int(children.board[1, 6]) == 0
    assert int(children.ko[1]) == 6


# ----------------------------------------------------------------------------
# Same trees as mctx's own policies.


def mctx_reference(policy, states, key, num_simulations, **kwargs):
    """mctx's policy run with our recurrent function, keyed as ``search`` keys it."""
    key_root, key_policy = jax.random.split(key)
    legal = jax.vmap(gojax.legal_moves)(states)
    logits, value = UNIFORM(states, key_root)
    root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=states)
    run = lambda k: policy(  # noqa: E731
        None, k, root, make_recurrent_fn(UNIFORM), num_simulations, invalid_actions=~legal, **kwargs
    )
    return fast_jit(run)(key_policy)


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_fresh_search_builds_mctx_tree(kind):
    states = batch(new_game(5, komi=0.5), 2)
    key = jax.random.key(11)
    if kind == "puct":
        config = SearchConfig(num_simulations=32, dirichlet_fraction=0.0, temperature_moves=99)
        ref = mctx_reference(mctx.muzero_policy, states, key, 32, dirichlet_fraction=0.0)
    else:
        config = SearchConfig(kind="gumbel", num_simulations=32, temperature_moves=99)
        ref = mctx_reference(mctx.gumbel_muzero_policy, states, key, 32)
    out = searcher(UNIFORM, config)(states, key)
    assert not np.any(np.asarray(ref.search_tree.embeddings.terminated))  # premise
    np.testing.assert_array_equal(out.tree.children_visits, ref.search_tree.children_visits)
    np.testing.assert_array_equal(out.tree.children_index, ref.search_tree.children_index)
    np.testing.assert_allclose(out.tree.node_values, ref.search_tree.node_values, atol=1e-6)
    np.testing.assert_allclose(out.action_weights, ref.action_weights, atol=1e-6)
    np.testing.assert_array_equal(out.action, ref.action)


def test_batched_backward_equals_mctx_backward():
    """Same values and counts, bit for bit, from any node: the root (nothing changes), inner
    nodes, leaves; on trees with rewards (finished games) and values of both signs."""
    from mctx._src.search import backward as mctx_backward

    from gojax.search import _backward

    def noisy(states, key):
        logits = jax.random.normal(key, (states.to_play.shape[0], states.num_actions))
        return logits, jax.random.uniform(key, states.to_play.shape, minval=-1, maxval=1)

    states = batch(new_game(5, komi=0.5, max_moves=2), 8)
    config = SearchConfig(kind="gumbel", num_simulations=24, temperature_moves=99)
    tree = searcher(noisy, config)(states, jax.random.key(3)).tree
    assert np.any(np.asarray(tree.children_rewards) != 0)  # premise: finished games inside
    for seed in range(4):
        leaf = jax.random.randint(jax.random.key(seed), (8,), 0, 25).at[0].set(0)
        ours, theirs = fast_jit(_backward)(tree, leaf), fast_jit(mctx_backward)(tree, leaf)
        for field in ("node_values", "node_visits", "children_values", "children_visits"):
            np.testing.assert_array_equal(getattr(ours, field), getattr(theirs, field))
        np.testing.assert_array_equal(ours.node_visits[0], tree.node_visits[0])  # root leaf


def test_tie_break_matters_only_when_a_draw_can_change_the_choice():
    from gojax._selection import TIE_BREAK, first_argmax, tie_break_matters

    def matters(scores, invalid=None):
        scores = jnp.asarray(scores, jnp.float32)
        invalid = jnp.zeros(scores.shape, bool) if invalid is None else jnp.asarray(invalid)
        return bool(tie_break_matters(scores, invalid))

    assert matters([0.5, 0.5, 0.1])  # an exact tie
    assert matters([1.0, 1.0 - 0.5 * TIE_BREAK])  # a near one the draw can flip
    assert not matters([0.5, 0.4, 0.1])
    assert not matters([0.5, 0.5, 0.1], [False, True, False])  # the tie is with an invalid move
    assert not matters([0.5, float("nan"), 0.5], [False, False, True])
    assert not matters([0.2, 0.2], [True, True])  # nothing to choose
    # Wherever it says no, every draw (the largest included) leaves the choice alone.
    rng = np.random.default_rng(0)
    for _ in range(200):
        base = rng.choice([0.25, 1.0, 1.5])
        scores = (base + rng.integers(-3, 4, 8) * 1e-7).astype(np.float32)
        invalid = rng.random(8) < 0.2
        if matters(scores, invalid):
            continue
        plain = int(first_argmax(jnp.asarray(scores), jnp.asarray(invalid)))
        for draw in (rng.random(8), np.full(8, 1 - 2**-24), np.eye(8)[rng.integers(8)]):
            noisy = jnp.asarray(scores) + TIE_BREAK * jnp.asarray(draw, jnp.float32)
            assert int(first_argmax(noisy, jnp.asarray(invalid))) == plain


@pytest.mark.parametrize("kind", ["puct", "katago"])
def test_descent_draws_the_tie_break_lazily_with_the_same_choices(kind):
    """The batched descent (the tie-break drawn only where it can matter) picks the edges the
    per-game rule picks, on trees with ties (uniform priors) and without (noisy priors)."""
    from gojax import _selection
    from gojax._search_simulation import _Rules, _simulate

    def noisy(states, key):
        logits = jax.random.normal(key, (states.to_play.shape[0], states.num_actions))
        return logits, jax.random.uniform(key, states.to_play.shape, minval=-1, maxval=1)

    states = batch(new_game(5, komi=0.5), 6)
    config = SearchConfig(kind=kind, num_simulations=48, temperature_moves=99)
    if kind == "puct":
        rule = functools.partial(_selection.puct, pb_c_init=1.25, pb_c_base=19652.0)
        scores = functools.partial(_selection.puct_scores, pb_c_init=1.25, pb_c_base=19652.0)
    else:
        constants = config.katago_puct_constants
        rule = functools.partial(_selection.katago_puct, **constants)
        scores = functools.partial(_selection.katago_scores, **constants)
    root = functools.partial(rule, depth=0)
    for evaluator in (UNIFORM, noisy):
        tree = searcher(evaluator, config)(states, jax.random.key(5)).tree
        for seed in range(3):
            keys = jax.random.split(jax.random.key(seed), 6)
            plain = fast_jit(lambda k, t: _simulate(k, t, _Rules(root, rule), 99))(keys, tree)
            lazy = fast_jit(lambda k, t: _simulate(k, t, _Rules(root, rule, scores), 99))(
                keys, tree
            )
            np.testing.assert_array_equal(plain[0], lazy[0])
            np.testing.assert_array_equal(plain[1], lazy[1])


# ----------------------------------------------------------------------------
# Temperature and noise.


@pytest.mark.slow
def test_temperature_schedule():
    state = new_game(5, komi=0.5)
    states = batch(state, 16)
    cfg = dict(num_simulations=40, dirichlet_fraction=0.0)
    sampled = searcher(UNIFORM, SearchConfig(**cfg, temperature_moves=1))(
        states, jax.random.key(12)
    )
    greedy = searcher(UNIFORM, SearchConfig(**cfg, temperature_moves=0))(states, jax.random.key(12))
    rows = np.arange(16)
    # Same trees (the temperature only acts after the search).
    np.testing.assert_array_equal(sampled.visit_counts, greedy.visit_counts)
    visits = np.asarray(greedy.visit_counts)
    np.testing.assert_array_equal(visits[rows, np.asarray(greedy.action)], visits.max(1))
    chosen = visits[rows, np.asarray(sampled.action)]
    assert np.all(chosen > 0)
    assert np.any(chosen < visits.max(1))  # tau = 1 picks less visited moves too
    # From move_number >= temperature_moves on, the most visited move.
    later = batch(jit_play(jit_play(state, 6), 18), 16)
    after = searcher(UNIFORM, SearchConfig(**cfg, temperature_moves=2))(later, jax.random.key(12))
    visits = np.asarray(after.visit_counts)
    np.testing.assert_array_equal(visits[rows, np.asarray(after.action)], visits.max(1))


def test_dirichlet_noise_only_on_legal_moves():
    states = batch(position(KO, to_play="B"), 4)
    legal = np.asarray(jax.vmap(gojax.legal_moves)(states))
    noisy = searcher(UNIFORM, SearchConfig(num_simulations=4, dirichlet_fraction=0.5))(
        states, jax.random.key(13)
    )
    clean = searcher(UNIFORM, SearchConfig(num_simulations=4, dirichlet_fraction=0.0))(
        states, jax.random.key(13)
    )
    prior = np.asarray(root_stats(noisy.tree).prior)
    np.testing.assert_allclose(prior.sum(1), 1.0, rtol=1e-5)
    assert np.all(prior[~legal] == 0.0)
    uniform = legal / legal.sum(1, keepdims=True)
    np.testing.assert_allclose(root_stats(clean.tree).prior, uniform, rtol=1e-5)
    assert np.abs(prior - uniform).max() > 0.05
    assert np.all(prior[legal] >= 0.5 * uniform[legal] - 1e-6)  # (1 - fraction) of the prior


# ----------------------------------------------------------------------------
# Tree reuse.


def counting(evaluator, calls: list):
    """``evaluator`` that appends to ``calls`` each time it runs (not when traced)."""

    def evaluate(states, key):
        jax.debug.callback(lambda: calls.append(1))
        return evaluator(states, key)

    return evaluate


def subtree_nodes(tree, b: int, node: int) -> set[int]:
    children = np.asarray(tree.children_index[b])
    found, todo = set(), [node]
    while todo:
        n = todo.pop()
        found.add(n)
        todo.extend(int(c) for c in children[n] if c >= 0)
    return found


def test_reuse_subtree_keeps_statistics():
    states = stack([position(KO, to_play="B"), new_game(5, komi=0.5)])
    out = searcher(UNIFORM, SearchConfig(num_simulations=48, temperature_moves=0))(
        states, jax.random.key(14)
    )
    old, action = out.tree, np.asarray(out.action)
    new = reuse_jit()(old, out.action)
    for b, state in enumerate([position(KO, to_play="B"), new_game(5, komi=0.5)]):
        child = int(old.children_index[b, 0, action[b]])
        assert child > 0
        for field in ("node_visits", "node_values", "raw_values"):
            assert getattr(new, field)[b, 0] == getattr(old, field)[b, child], field
        for field in ("children_visits", "children_values", "children_prior_logits"):
            np.testing.assert_array_equal(getattr(new, field)[b, 0], getattr(old, field)[b, child])
        for leaf_new, leaf_old in zip(
            jax.tree.leaves(new.embeddings), jax.tree.leaves(old.embeddings), strict=True
        ):
            np.testing.assert_array_equal(leaf_new[b, 0], leaf_old[b, child])
        np.testing.assert_array_equal(
            new.embeddings.board[b, 0],
            jit_play(state, action[b]).board,
        )
        # The whole subtree, and nothing else, renumbered consistently.
        size = len(subtree_nodes(old, b, child))
        assert int(np.sum(np.asarray(new.node_visits[b]) > 0)) == size
        assert int(new.parents[b, 0]) == -1
    for b, parent, act, child in walk_edges(new):
        assert int(new.children_index[b, parent, act]) == child
        assert int(new.children_visits[b, parent, act]) == int(new.node_visits[b, child])
        assert float(new.children_values[b, parent, act]) == float(new.node_values[b, child])
        assert parent < child


def test_reuse_saves_evaluations():
    state = position(KO, to_play="B")
    config = SearchConfig(num_simulations=32, temperature_moves=0, dirichlet_fraction=0.0)
    calls: list = []
    run = searcher(counting(UNIFORM, calls), config)
    out = run(batch(state, 1), jax.random.key(15))
    jax.block_until_ready(out)
    assert len(calls) == 1 + 32  # the root, then one per simulation
    action = int(out.action[0])
    child_visits = int(out.visit_counts[0, action])
    assert child_visits >= 2
    reused = reuse_jit()(out.tree, out.action)
    nxt = batch(jit_play(state, action), 1)
    calls.clear()
    again = run(nxt, jax.random.key(16), tree=reused)
    jax.block_until_ready(again)
    needed = 32 + 1 - child_visits
    assert int(again.simulations[0]) == needed
    assert len(calls) == needed  # no root evaluation: the root came with the tree
    assert int(again.tree.node_visits[0, 0]) == 32 + 1
    assert int(np.sum(again.visit_counts)) == 32
    # Stats carried over: every reused child has at least its old visits.
    assert np.all(np.asarray(again.visit_counts[0]) >= np.asarray(reused.children_visits[0, 0]))
    # A tree whose root is another position is discarded, for that game only.
    calls.clear()
    mixed = run(
        stack([jax.tree.map(lambda x: x[0], nxt), state]),
        jax.random.key(17),
        tree=jax.tree.map(lambda x: jnp.concatenate([x, x]), reused),
    )
    jax.block_until_ready(mixed)
    np.testing.assert_array_equal(mixed.simulations, [needed, 32])
    assert len(calls) == 1 + 32


def test_reuse_of_unexpanded_move_starts_fresh():
    state = new_game(5, komi=0.5)
    config = SearchConfig(num_simulations=8, temperature_moves=0)
    out = searcher(UNIFORM, config)(batch(state, 1), jax.random.key(18))
    unvisited = int(np.flatnonzero(np.asarray(out.visit_counts[0]) == 0)[0])
    reused = reuse_jit()(out.tree, jnp.array([unvisited]))
    assert int(np.sum(np.asarray(reused.node_visits) > 0)) == 0
    again = searcher(UNIFORM, config)(
        batch(jit_play(state, unvisited), 1), jax.random.key(19), tree=reused
    )
    assert int(again.simulations[0]) == 8


def test_gumbel_refuses_reuse():
    states = batch(new_game(5), 1)
    out = searcher(UNIFORM, SearchConfig(num_simulations=4))(states, jax.random.key(0))
    with pytest.raises(ValueError, match="Gumbel"):
        search(UNIFORM, states, jax.random.key(0), SearchConfig(kind="gumbel"), out.tree)


# ----------------------------------------------------------------------------
# Moves kept out of the search (KataGo's avoidMoves / allowMoves).


def avoid_array(games: int, size: int, entries) -> jnp.ndarray:
    """``[games, 2, A]`` from ``(game, player, actions, until_depth)`` entries."""
    avoid = np.zeros((games, 2, size * size + 1), np.int32)
    for game, player, actions, until in entries:
        avoid[game, 0 if player == "B" else 1, actions] = until
    return jnp.asarray(avoid)


def first_points_evaluator(states, key):
    """Priors falling with the action index, value 0: a narrow, deep tree."""
    del key
    logits = -0.5 * jnp.arange(states.num_actions, dtype=jnp.float32)
    return jnp.broadcast_to(logits, (states.to_play.shape[0], states.num_actions)), jnp.zeros(
        states.to_play.shape, jnp.float32
    )


def test_avoided_moves_stay_out_of_the_tree_above_their_depth():
    state = new_game(5, rules="chinese", max_moves=40)
    states = batch(state, 2)
    black_root, white_reply = [0, 1, 25], [2, 3]  # pass (25) avoided at the root too
    avoid = avoid_array(2, 5, [(0, "B", black_root, 1), (0, "W", white_reply, 2)])
    config = SearchConfig(kind="puct", num_simulations=400, dirichlet_fraction=0.0)
    out = fast_jit(functools.partial(search, first_points_evaluator, config=config))(
        states, jax.random.key(3), avoid=avoid
    )
    depth = np.asarray(out.tree.embeddings.move_number)  # the root is at move 0
    black = np.asarray(out.tree.embeddings.to_play) == gojax.BLACK
    seen = {0: set(), 1: set()}
    for b, parent, action, _ in walk_edges(out.tree):
        d, mover = int(depth[b, parent]), "B" if black[b, parent] else "W"
        seen[b].add((d, mover, action))
        if b == 0:
            assert not (d < 1 and mover == "B" and action in black_root), (d, action)
            assert not (d < 2 and mover == "W" and action in white_reply), (d, action)
    visits = np.asarray(out.visit_counts)
    assert visits[0, black_root].sum() == 0 and visits[1, [0, 1]].min() > 0
    assert int(out.action[0]) not in black_root
    # Deeper down the same moves are searched again, and the other game never lost them.
    assert any(d >= 2 and m == "B" and a in black_root for d, m, a in seen[0])
    assert any(d >= 2 and m == "W" and a in white_reply for d, m, a in seen[0])
    assert any(d == 1 and m == "W" and a in white_reply for d, m, a in seen[1])


def test_allowed_moves_alone_are_searched_and_no_restriction_is_no_change():
    state = new_game(5, rules="chinese", max_moves=40)
    states = batch(state, 3)
    allowed = [6, 8, 16]
    others = [a for a in range(26) if a not in allowed]
    avoid = avoid_array(3, 5, [(0, "B", others, 1), (1, "B", list(range(26)), 1)])
    config = SearchConfig(kind="puct", num_simulations=64, dirichlet_fraction=0.0)
    run = fast_jit(functools.partial(search, UNIFORM, config=config))
    key = jax.random.key(5)
    out = run(states, key, avoid=avoid)
    visits = np.asarray(out.visit_counts)
    assert set(np.flatnonzero(visits[0])) == set(allowed) and visits[0].sum() == 64
    # Every move kept out: the restriction is dropped at that node.
    assert (visits[1] > 0).sum() > 20
    # No restriction (zeros) searches exactly as no avoid argument.
    plain = run(states, key)
    for x, y in zip(jax.tree.leaves(out), jax.tree.leaves(plain), strict=True):
        np.testing.assert_array_equal(np.asarray(x)[2], np.asarray(y)[2])
    # A kept tree is continued where nothing is kept out, dropped where something is.
    again = run(states, key, tree=plain.tree, avoid=avoid)
    assert np.asarray(again.simulations).tolist() == [64, 64, 0]
    assert set(np.flatnonzero(np.asarray(again.visit_counts)[0])) == set(allowed)


def test_principal_variation():
    states = batch(position(**dict(SAVE, max_moves=4)), 1)
    out = searcher(UNIFORM, SearchConfig(num_simulations=256, temperature_moves=0))(
        states, jax.random.key(2)
    )
    pv = principal_variation(out.tree, 0, max_length=10)
    assert pv[0] == SAVE_MOVE == int(out.action[0])
    assert 2 <= len(pv) <= 4  # the game ends after four moves
    state = jax.tree.map(lambda x: x[0], states)
    node = 0
    children, visits = (
        np.asarray(out.tree.children_index[0]),
        np.asarray(out.tree.children_visits[0]),
    )
    for action in pv:
        assert bool(jit_legal(state)[action])
        assert visits[node, action] == visits[node].max()
        state, node = jit_play(state, action), children[node, action]
    # Starting from another root move.
    other = principal_variation(out.tree, 0, first_action=1, max_length=3)
    assert other[0] == 1 and 1 <= len(other) <= 3
    assert principal_variation(out.tree, 0, max_length=1) == [SAVE_MOVE]


def test_root_stats_match_output():
    states = batch(position(**CAPTURE), 2)
    out = searcher(UNIFORM, SearchConfig(num_simulations=16))(states, jax.random.key(20))
    stats = root_stats(out.tree)
    np.testing.assert_array_equal(stats.visits, out.visit_counts)
    np.testing.assert_array_equal(stats.q, out.q_values)
    assert np.all(np.abs(np.asarray(stats.q)) <= 1.0)
    np.testing.assert_allclose(np.asarray(stats.prior).sum(1), 1.0, rtol=1e-5)


# ----------------------------------------------------------------------------
# Classical MCTS.


@functools.cache
def uct_jit(num_simulations: int, **kwargs):
    return fast_jit(functools.partial(uct_search, num_simulations=num_simulations, **kwargs))


@pytest.mark.parametrize(
    "setup, move",
    [
        (CAPTURE, CAPTURE_MOVE),
        (dict(SAVE, max_moves=4), SAVE_MOVE),
        (ENDING, ENDING_MOVE),
    ],
)
def test_uct_finds_the_winning_move(setup, move):
    states = batch(position(**setup), 4)
    out = uct_jit(64)(states, jax.random.key(21))
    np.testing.assert_array_equal(out.action, move)
    assert np.all(np.asarray(out.q_values[:, move]) > 0.5)


def test_uct_tries_every_root_move_first():
    # UCB1 visits every legal root move before repeating one.
    states = batch(new_game(5, komi=0.5, max_moves=12), 2)
    out = uct_jit(30)(states, jax.random.key(22))
    visits = np.asarray(out.visit_counts)
    assert np.all(visits >= 1) and np.all(visits.sum(1) == 30)


def test_rollouts():
    capture = position(**dict(CAPTURE, max_moves=1))  # one move, then the count
    states = batch(capture, 2)
    # Without eye filling the only allowed move is the capture: a sure win.
    allowed = np.asarray(rollout_moves(capture))
    assert np.flatnonzero(allowed).tolist() == [CAPTURE_MOVE]
    rollout = fast_jit(functools.partial(random_rollout, num_rollouts=64))
    np.testing.assert_array_equal(rollout(states, jax.random.key(0)), 1.0)
    # Uniform over the 3 legal points (pass only when none is left): 1 win, 2 losses.
    plain = fast_jit(functools.partial(random_rollout, num_rollouts=2000, avoid_eyes=False))
    mean = np.asarray(plain(states, jax.random.key(1)))
    np.testing.assert_allclose(mean, -1 / 3, atol=0.08)
    # A finished game is only scored: Black passed a lost game, White (to move) has won.
    over = after_pass(SPLIT, "B", 5.5)
    over = jit_play(over, over.num_actions - 1)
    assert bool(over.terminated) and int(over.to_play) == -1
    np.testing.assert_array_equal(rollout(batch(over, 2), jax.random.key(2)), 1.0)


def test_mixed_evaluator():
    def constant(states, key):
        del key
        logits, _ = UNIFORM(states, None)
        return logits, jnp.full(states.to_play.shape, 0.5)

    states = batch(position(**dict(CAPTURE, max_moves=1)), 2)
    for lam, want in ((0.0, 0.5), (0.5, 0.75), (1.0, 1.0)):
        logits, value = fast_jit(mixed_evaluator(constant, lam, rollouts=4))(
            states, jax.random.key(0)
        )
        np.testing.assert_allclose(value, want)
    with pytest.raises(ValueError):
        mixed_evaluator(constant, 1.5)


# ----------------------------------------------------------------------------
# Networks.


def test_agz_evaluator_search():
    net = gnn.PRESETS["agz_tiny"]()
    variables = net.init(jax.random.key(0), *gnn.example_inputs(net, 1, 5))
    states = stack([position(KO, to_play="B"), position(KO, to_play="W")])

    @functools.partial(fast_jit, static_argnames="config")
    def run(variables, states, key, config):
        return search(agz_evaluator(net, variables), states, key, config)

    out = run(variables, states, jax.random.key(0), SearchConfig(num_simulations=16))
    legal = np.asarray(jax.vmap(gojax.legal_moves)(states))
    assert np.all(legal[np.arange(2), np.asarray(out.action)])
    assert np.all(np.asarray(out.simulations) == 16)
    # The evaluator passes the net's outputs through.
    planes = jax.vmap(gojax.agz_planes)(states)
    direct = net.apply(variables, planes)
    logits, value = agz_evaluator(net, variables)(states, jax.random.key(1))
    np.testing.assert_allclose(value, direct["value"], rtol=1e-6)
    np.testing.assert_allclose(logits, direct["policy_logits"], rtol=1e-6)


@pytest.mark.slow
def test_katago_net_search_on_9x9():
    from gojax.katago_model import load_model

    model = load_model(reference_path("katago", "g170-b6c96-s175395328-d26788732.bin.gz"))
    start = new_game(9, komi=7.0, rules="chinese")
    states = stack([start, jit_play(jit_play(start, 40), 30)])
    evaluator = katago_evaluator(model, symmetry="random")
    config = SearchConfig(num_simulations=8, temperature_moves=0)
    out = jax.jit(functools.partial(search, evaluator, config=config))(states, jax.random.key(0))
    legal = np.asarray(jax.vmap(gojax.legal_moves)(states))
    action = np.asarray(out.action)
    assert np.all(legal[np.arange(2), action])
    assert np.all(np.asarray(out.simulations) == 8)
    assert np.all(np.abs(np.asarray(out.root_value)) <= 1.0)
    # The net prefers the centre area of an empty 9x9 board to its edge.
    prior = np.asarray(root_stats(out.tree).prior[0, :81]).reshape(9, 9)
    assert prior[2:7, 2:7].sum() > prior.sum() - prior[2:7, 2:7].sum()


def test_first_argmax_matches_argmax_ties_masks_and_nan():
    from gojax._selection import first_argmax

    scores = jax.random.normal(jax.random.key(0), (64, 82))
    np.testing.assert_array_equal(first_argmax(scores), jnp.argmax(scores, -1))
    tie = jnp.array([0.5, 2.0, 2.0, -1.0])
    assert int(first_argmax(tie)) == 1  # lowest index on a tie, as jnp.argmax
    assert int(first_argmax(tie, jnp.array([0.0, 1.0, 0.0, 0.0]))) == 2  # mctx-style float mask
    assert int(first_argmax(tie, jnp.ones(4, bool))) == 0  # all invalid: 0, as masked_argmax
    assert int(first_argmax(jnp.array([jnp.nan, 1.0, 3.0]))) == 2
    assert first_argmax(tie).dtype == jnp.int32
