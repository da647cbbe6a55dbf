"""The analysis engine's replay of games on the device (:mod:`eval.analysis`).

A batch of queries is a batch of game records: ``_replay_start`` sets each game up
(or resumes one ``eval.replay_cache`` kept), and ``_replay_segment`` plays ``L`` more
moves of every game at once (a jitted ``lax.scan`` over moves, vmapped over games),
keeping each position a query asks to analyse. Segments of ``REPLAY_SEGMENT`` moves,
then of ``SHORT_SEGMENT``, so that two compiled programs serve every game length.
Apart from the search (``eval._analysis_search``) because a replay only plays moves:
it knows nothing of networks, trees or replies.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp

from eval.analysis_query import Query
from gojax import GoState, legal_moves, new_game, play


def _where(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per-game select between two stacked pytrees (``mask [Q]``)."""

    def pick(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim)), a, b)

    return jax.tree.map(pick, new, old)


def _resume(states: GoState) -> GoState:
    """Finished games (two passes) made live again, so that they can be played on and searched."""
    over = states.terminated
    return states.replace(
        terminated=jnp.zeros_like(over),
        passes=jnp.where(over, jnp.zeros_like(states.passes), states.passes),
    )


REPLAY_SEGMENT = 16  # moves per replay call: the move count never shapes a program


def _fresh(board, to_play, komi, captures, rule_code, like: GoState) -> GoState:
    """A new game of ``like``'s size and rules (``rule_code``: the preset, under runtime
    rules) from ``board``: history forgotten."""
    state = new_game(
        like.size,
        komi=komi,
        rules=like.rules,
        rule_code=rule_code,
        max_moves=like.max_moves,
        board=board,
        to_play=to_play,
    )
    return state.replace(captures=captures)


@functools.partial(jax.jit, static_argnames=("positions",))
def _replay_start(
    setup: jax.Array,
    first: jax.Array,
    komi: jax.Array,
    resumed: GoState,
    use_resumed: jax.Array,
    *,
    positions: int,
) -> tuple[GoState, GoState]:
    """The games where their replay starts: ``(states [Q], kept [positions] (empty))``.

    Args:
      setup: ``[Q, P]`` int8 stones before the first move.
      first: ``[Q]`` int8 player to move at turn 0.
      komi: ``[Q]`` float32.
      resumed: ``[Q]`` games kept from an earlier replay (``eval.replay_cache``),
        taken where ``use_resumed [Q]`` is set; the other games start at turn 0.
        Their size, rules and move cap are the replay's.

    The setups were checked when their queries were read (``gojax.place_stones``).
    """
    games = first.shape[0]
    fresh = functools.partial(_fresh, like=resumed)
    captures = jnp.zeros((games, 2), jnp.int16)
    states = jax.vmap(fresh)(setup, first, komi, captures, resumed.rule_code)
    states = _where(use_resumed, resumed, states)
    kept = jax.tree.map(lambda x: jnp.zeros((positions,) + x.shape[1:], x.dtype), states)
    return states, kept


@functools.partial(jax.jit, donate_argnames=("states", "kept"))
def _replay_segment(
    states: GoState,
    kept: GoState,
    illegal: jax.Array,
    komi: jax.Array,
    colours: jax.Array,
    actions: jax.Array,
    turns: jax.Array,
    lengths: jax.Array,
    targets: jax.Array,
) -> tuple[GoState, GoState, jax.Array]:
    """Play ``L`` more turns of ``Q`` games, keeping the positions asked for.

    Step ``l`` first keeps the position at turn ``turns[l]`` (after that many
    moves) in ``kept[targets[:, l]]`` (an index past the end keeps nothing),
    then plays move ``turns[l]`` of the games that have it.

    Args:
      states: ``[Q]`` the games at turn ``turns[0]``; kept: ``[S]`` positions so far.
      illegal: ``[Q]`` int32 the first illegal move of each game, -1 if none
        (a game stops there).
      komi: ``[Q]`` float32, for games rebuilt when a player moves out of turn.
      colours, actions: ``[Q, L]`` the moves; turns: ``[L]`` int32 their numbers.
      lengths: ``[Q]`` int32 moves of each game.
      targets: ``[Q, L]`` int32 where to keep each position.

    A move by the player not to move hands them the turn and forgets the
    history (ko, superko, past moves), as KataGo and GTP engines do; a move
    after two passes resumes the game.
    """
    games = illegal.shape[0]
    rows = jnp.arange(games)

    def step(carry, inputs):
        states, kept, illegal = carry
        colour, action, turn, target = inputs
        live = _resume(states)
        kept = jax.tree.map(lambda b, x: b.at[target].set(x, mode="drop"), kept, live)
        active = (turn < lengths) & (illegal < 0)
        switch = active & (colour != states.to_play)
        # Rebuilding a game labels its chains again: only when some game needs it.
        mover = jax.lax.cond(
            jnp.any(switch),
            lambda: _where(
                switch,
                jax.vmap(functools.partial(_fresh, like=states))(
                    states.board, colour, komi, states.captures, states.rule_code
                ),
                states,
            ),
            lambda: states,
        )
        mover = _resume(mover)
        legal = jax.vmap(legal_moves)(mover)[rows, action]
        illegal = jnp.where(active & ~legal, turn, illegal)
        played = jax.vmap(play)(mover, action)
        return (_where(active & legal, played, states), kept, illegal), None

    inputs = (colours.T, actions.T, turns, targets.T)
    (states, kept, illegal), _ = jax.lax.scan(step, (states, kept, illegal), inputs)
    return states, kept, illegal


SHORT_SEGMENT = 4  # the last steps of a replay: a game extended by a move or two


def _replay_steps(needed: int) -> int:
    """Steps of a replay of ``needed`` steps: whole segments, a short one for the rest."""
    whole, rest = divmod(needed, REPLAY_SEGMENT)
    return whole * REPLAY_SEGMENT + -(-rest // SHORT_SEGMENT) * SHORT_SEGMENT


def _segments(steps: int) -> Iterable[slice]:
    """The step ranges of one replay call each: segments of ``REPLAY_SEGMENT``, then of
    ``SHORT_SEGMENT`` (two compiled programs serve every game length)."""
    start = 0
    while start < steps:
        length = REPLAY_SEGMENT if steps - start >= REPLAY_SEGMENT else SHORT_SEGMENT
        yield slice(start, start + length)
        start += length


@functools.cache
def _host_template(size: int, rules: str, max_moves: int, runtime_rules: bool) -> GoState:
    """A new game as numpy arrays: the rows of a replay that resume no kept game. With
    ``runtime_rules`` its rules are kept as data (``gojax.new_game``'s): every rule set
    replays and searches in the same programs, so a client that switches rules compiles
    nothing."""
    game = new_game(size, rules=rules, max_moves=max_moves, runtime_rules=runtime_rules)
    return jax.device_get(game)


def _game_key(query: Query) -> tuple:
    """What a replayed state depends on besides the moves (``eval.replay_cache``)."""
    return (
        query.size,
        query.rules,
        query.max_moves,
        query.komi,
        query.first_player,
        query.setup.tobytes(),
    )
