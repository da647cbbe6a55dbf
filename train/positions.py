"""Positions of finished games and what predicts their outcome: the data of value training.

AlphaGo's value network and its rollout policy are trained and judged on
positions of finished games, each labelled with the game's outcome
(Silver et al. 2016, Fig. 2b). This module reads such games, draws and
replays positions from them, and evaluates the positions:

* :func:`load_games`: the usable games of a folder of SGF files (rules and
  komi from each file). A game is used when its ``RE[]`` is a score
  (``B+3.5``), or when it ended otherwise (resignation, time) and the area
  count of its final position names the same winner; the outcome ``z`` is
  the recorded winner. Draws, games without a result, and games with setup
  stones after the start, out-of-turn or illegal moves are skipped and
  counted.
* :func:`sample_positions`: ``per_game`` positions of every game in every
  move-number bucket it reaches (AlphaGo drew one position per game, so that
  the positions are independent); :func:`replay_positions` replays them, in
  batches, for games of one size and rule preset (:func:`group_games`).
* :func:`rollout_outcomes`: random games from the positions (uniform, or
  played by a rollout policy); :func:`value_estimates`: a network's values.
* :func:`mse_by_bucket`: the mean squared error of predictions against the
  outcomes, per bucket and overall.

``train.value_network``, ``train.rollout_balance`` and ``eval.value_mse``
(AlphaGo's comparison of evaluators) build on them.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gojax import BLACK, WHITE, GoState, new_game, play, replay, score, sgf
from gojax.games import rules_of_record
from gojax.rollout_policy import RolloutWeights
from gojax.uct import random_rollout

__all__ = [
    "Game",
    "group_games",
    "load_games",
    "mse_by_bucket",
    "replay_positions",
    "rollout_outcomes",
    "sample_positions",
    "value_estimates",
]

# A recorded score, as opposed to a resignation (B+R), time (B+T) or forfeit (B+F).
_SCORE_RESULT = re.compile(r"^\s*[BW]\+\s*\d+(\.\d*)?\s*$", re.IGNORECASE)
_READ_SLICE = 256  # SGF files read and replayed together while loading


# ---------------------------------------------------------------------------- games


@dataclasses.dataclass(frozen=True)
class Game:
    """One finished game, as the positions and their outcomes use it."""

    path: str
    size: int
    rules: str  # gojax rule preset
    komi: float
    setup: np.ndarray  # [P] int8 stones before the first move (handicap): +1 black, -1 white
    first: int  # +1 if Black moves first, -1 if White does
    actions: np.ndarray  # [L] int32 the moves, alternating from ``first``; pass = P
    outcome: int  # +1 Black won, -1 White won (the recorded result)
    scored: bool  # RE[] is a score, not a resignation, time or forfeit

    @property
    def length(self) -> int:
        return int(self.actions.shape[0])


def _read_game(path: Path) -> Game | str:
    """The game in ``path``, or a short reason why it cannot be used."""
    try:
        record = sgf.load(path)
    except (sgf.SGFError, OSError):
        return "unreadable SGF"
    outcome = sgf.result_winner(record.result)
    if outcome is None:
        return "no result"
    if outcome == 0:
        return "draw"
    # Who starts, as gojax.games.state_at decides it.
    first = BLACK
    if record.to_play in ("B", "W"):
        first = BLACK if record.to_play == "B" else WHITE
    elif record.setup_black and not record.setup_white and record.handicap > 1:
        first = WHITE
    if any(n.add_black or n.add_white or n.add_empty for n in record.nodes):
        return "setup stones after the start"
    moves = record.moves
    if not moves:
        return "no moves"
    colours = [BLACK if colour == "B" else WHITE for colour, _ in moves]
    if any(c != (first if i % 2 == 0 else -first) for i, c in enumerate(colours)):
        return "out-of-turn moves"
    board = np.zeros(record.size * record.size, np.int8)
    board[list(record.setup_black)] = BLACK
    board[list(record.setup_white)] = WHITE
    return Game(
        path=str(path),
        size=record.size,
        rules=rules_of_record(record),
        komi=float(record.komi),
        setup=board,
        first=first,
        actions=np.asarray([a for _, a in moves], np.int32),
        outcome=int(outcome),
        scored=bool(_SCORE_RESULT.match(record.result or "")),
    )


def group_games(games: Sequence[Game]) -> dict[tuple[int, str], list[int]]:
    """Indices of ``games`` by (board size, rule preset): each group shares compiled programs."""
    groups: dict[tuple[int, str], list[int]] = {}
    for i, g in enumerate(games):
        groups.setdefault((g.size, g.rules), []).append(i)
    return groups


def _cap(games: Sequence[Game]) -> int:
    """The move cap of a group: room for its longest game, and at least ``2 * size^2``."""
    size = games[0].size
    return max(2 * size * size, max(g.length for g in games) + 1)


@functools.cache
def _new_games(size: int, rules: str, cap: int) -> Callable[..., GoState]:
    """A jitted ``(komi [G], setup [G, P], first [G]) -> [G]`` stacked new games."""

    def one(komi: jax.Array, setup: jax.Array, first: jax.Array) -> GoState:
        return new_game(size, komi=komi, rules=rules, max_moves=cap, board=setup, to_play=first)

    return jax.jit(jax.vmap(one))


def _start_states(games: Sequence[Game], cap: int) -> GoState:
    """``[G]`` stacked positions before the first move (one size and preset)."""
    make = _new_games(games[0].size, games[0].rules, cap)
    return make(
        jnp.asarray([g.komi for g in games], jnp.float32),
        jnp.asarray(np.stack([g.setup for g in games])),
        jnp.asarray([g.first for g in games], jnp.int8),
    )


def _padded_actions(games: Sequence[Game], cap: int) -> np.ndarray:
    """``[G, cap]`` int32 moves; the padding is never played (lengths stop the replay)."""
    out = np.zeros((len(games), cap), np.int32)
    for i, g in enumerate(games):
        out[i, : g.length] = g.actions
    return out


@jax.jit
def _check_games(starts: GoState, actions: jax.Array, lengths: jax.Array):
    """``[G]`` Black's area margin of each final position, ``[G]`` whether every move was legal."""
    final, _, _, was_legal = jax.vmap(replay)(starts, actions, lengths)
    return jax.vmap(score)(final), jnp.all(was_legal, axis=-1)


def _verified(candidates: list[Game], skipped: collections.Counter) -> list[Game]:
    """Replay ``candidates`` under their rules; keep legal games with a trustworthy result."""
    keep = np.zeros(len(candidates), bool)
    for indices in group_games(candidates).values():
        group = [candidates[i] for i in indices]
        cap = _cap(group)
        margins, legal = _check_games(
            _start_states(group, cap),
            jnp.asarray(_padded_actions(group, cap)),
            jnp.asarray([g.length for g in group], jnp.int32),
        )
        for i, margin, ok in zip(indices, np.asarray(margins), np.asarray(legal), strict=True):
            game = candidates[i]
            if not ok:
                skipped["illegal move"] += 1
            elif not game.scored and np.sign(margin) != game.outcome:
                skipped["not scored, and the final position's count disagrees"] += 1
            else:
                keep[i] = True
    return [g for g, k in zip(candidates, keep, strict=True) if k]


def load_games(
    sgf_dir: str | os.PathLike, *, max_games: int | None = None
) -> tuple[list[Game], collections.Counter]:
    """The usable games of ``sgf_dir`` (its ``*.sgf`` files, by name) and why others were not.

    Returns ``(games, skipped)``: at most ``max_games`` games in file-name
    order, and a ``Counter`` of the reasons files were left out. Raises
    ValueError if the folder is missing or holds no SGF file.
    """
    folder = Path(sgf_dir)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".sgf" and p.is_file())
    if not paths:
        raise ValueError(f"{folder}: no .sgf files")
    skipped: collections.Counter = collections.Counter()
    games: list[Game] = []
    for first in range(0, len(paths), _READ_SLICE):  # slices: --max-games stops early
        candidates = []
        for path in paths[first : first + _READ_SLICE]:
            read = _read_game(path)
            if isinstance(read, str):
                skipped[read] += 1
            else:
                candidates.append(read)
        games.extend(_verified(candidates, skipped))
        if max_games is not None and len(games) >= max_games:
            return games[:max_games], skipped
    return games, skipped


def sample_positions(
    lengths: Sequence[int], *, width: int, per_game: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw positions: ``per_game`` distinct ones per game in every bucket it reaches.

    A game of ``L`` moves has positions after ``0 .. L - 1`` moves (the
    final position, after the last move, is left out: nothing remains to
    predict there). A bucket the game only partly reaches gives
    ``min(per_game, positions in it)``.

    Returns ``(game [M], move_number [M])`` int arrays, by game then move.
    """
    games, moves = [], []
    for g, length in enumerate(lengths):
        for start in range(0, length, width):
            stop = min(start + width, length)
            take = min(per_game, stop - start)
            chosen = np.sort(rng.choice(np.arange(start, stop), size=take, replace=False))
            games.extend([g] * take)
            moves.extend(chosen.tolist())
    return np.asarray(games, np.int64), np.asarray(moves, np.int64)


@jax.jit
def _states_after(starts: GoState, actions: jax.Array, counts: jax.Array) -> GoState:
    """``[B]`` positions after ``counts[b]`` of ``actions[b]`` (legal, checked when loading)."""

    def one(state: GoState, moves: jax.Array, count: jax.Array) -> GoState:
        def step(i, current):
            following = play(current, moves[i])
            return jax.tree.map(lambda n, o: jnp.where(i < count, n, o), following, current)

        return jax.lax.fori_loop(0, moves.shape[0], step, state)

    return jax.vmap(one)(starts, actions, counts)


def replay_positions(
    group: Sequence[Game], games: Sequence[int], moves: np.ndarray, batch: int
) -> GoState:
    """``[M]`` stacked positions: after ``moves[m]`` moves of ``group[games[m]]``.

    One size and preset; built ``batch`` at a time to bound the memory of the replay.
    """
    cap = _cap(group)
    starts = _start_states(group, cap)
    actions = jnp.asarray(_padded_actions(group, cap))
    games, moves = jnp.asarray(games, jnp.int32), jnp.asarray(moves, jnp.int32)
    parts = []
    for indices, valid in _chunks(games.size, min(batch, games.size)):
        which = games[indices]
        states = _states_after(_take(starts, which), actions[which], moves[indices])
        parts.append(_take(states, jnp.arange(valid)))
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)


def _chunks(total: int, size: int) -> Iterator[tuple[np.ndarray, int]]:
    """``(indices [size], valid)``: ``0 .. total - 1`` in fixed-size chunks, the last padded
    with its final index so that every chunk runs the same compiled program."""
    for start in range(0, total, size):
        indices = np.minimum(np.arange(start, start + size), total - 1)
        yield indices, min(size, total - start)


def _take(states: GoState, indices: jax.Array) -> GoState:
    return jax.tree.map(lambda x: x[indices], states)


# ---------------------------------------------------------------------------- evaluators


@functools.partial(jax.jit, static_argnames=("num_rollouts",))
def _rollout_chunk(
    states: GoState, pairs: jax.Array, key: jax.Array, num_rollouts: int, weights=None
) -> jax.Array:
    """Outcomes ``[C]`` of one random game each for (position, rollout) ``pairs [C]``
    (uniform moves, or the rollout policy ``weights``')."""
    games = _take(states, pairs // num_rollouts)
    return random_rollout(games, key, 1, weights=weights).astype(jnp.int8)


def rollout_outcomes(
    states: GoState,
    key: jax.Array,
    num_rollouts: int,
    *,
    batch: int = 512,
    progress: Callable[[int], None] | None = None,
    weights: RolloutWeights | None = None,
) -> np.ndarray:
    """``[M, num_rollouts]`` int8 outcomes of random games from ``[M]`` positions.

    +1 is a win for the player to move in the position, -1 a loss, 0 a
    draw. ``batch`` games run at once (one jitted program per chunk); the
    positions should be ordered by move number, so that the games of a chunk
    last about as long. ``progress(games_done)`` is called after each chunk.
    Moves are uniform over the rollout move set, or drawn from the rollout
    policy ``weights`` (``gojax.rollout_policy``).
    """
    count = states.to_play.shape[0]
    total = count * num_rollouts
    flat = np.zeros(total, np.int8)
    done = 0
    for step, (pairs, valid) in enumerate(_chunks(total, min(batch, total))):
        chunk_key = jax.random.fold_in(key, step)
        out = _rollout_chunk(states, jnp.asarray(pairs), chunk_key, num_rollouts, weights)
        flat[pairs[:valid]] = np.asarray(out)[:valid]
        done += valid
        if progress is not None:
            progress(done)
    return flat.reshape(count, num_rollouts)


def value_estimates(
    run: Callable[..., dict[str, jax.Array]],
    variables: Any,
    states: GoState,
    key: jax.Array,
    *,
    batch: int,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``[M]`` float32 value of each position for the player to move, in [-1, 1].

    ``run`` is ``gojax.evaluate.make_evaluator``'s; ``key`` serves a random symmetry.
    """
    count = states.to_play.shape[0]
    values = np.zeros(count, np.float32)
    done = 0
    for step, (indices, valid) in enumerate(_chunks(count, min(batch, count))):
        chunk = _take(states, jnp.asarray(indices))
        out = run(variables, chunk, key=jax.random.fold_in(key, step))
        values[indices[:valid]] = np.asarray(out["value"])[:valid]
        done += valid
        if progress is not None:
            progress(done)
    return values


# ---------------------------------------------------------------------------- statistics


def mse_by_bucket(
    predictions: dict[str, np.ndarray], outcomes: np.ndarray, buckets: np.ndarray
) -> dict[str, Any]:
    """Mean squared error of each evaluator, per bucket and over all positions.

    Args:
      predictions: evaluator name -> ``[M]`` predictions in [-1, 1].
      outcomes: ``[M]`` outcomes in {-1, +1}, from the same side as the predictions.
      buckets: ``[M]`` int bucket of each position.

    Returns:
      ``{"buckets": [b, ...], "count": [n_b, ...], "overall_count": M,
      "mse": {name: [mse_b, ...]}, "stderr": {name: [se_b, ...]},
      "overall": {name: mse}, "overall_stderr": {name: se}}``, buckets in
      increasing order; ``se`` is the standard error of the mean of the
      squared errors (0 for a single position).

    >>> v, z = np.array([0.5, -1.0, 0.0]), np.array([1, 1, -1])
    >>> r = mse_by_bucket({"v": v}, z, buckets=np.array([0, 1, 1]))
    >>> r["mse"]["v"], r["overall"]["v"]
    ([0.25, 2.5], 1.75)
    """
    outcomes = np.asarray(outcomes, np.float64)
    buckets = np.asarray(buckets)
    order = sorted(set(buckets.tolist()))

    def stats(errors: np.ndarray) -> tuple[float, float]:
        spread = float(np.std(errors, ddof=1) / np.sqrt(errors.size)) if errors.size > 1 else 0.0
        return float(np.mean(errors)), spread

    result: dict[str, Any] = {
        "buckets": order,
        "count": [int(np.sum(buckets == b)) for b in order],
        "overall_count": int(outcomes.size),
        "mse": {},
        "stderr": {},
        "overall": {},
        "overall_stderr": {},
    }
    for name, predicted in predictions.items():
        errors = (np.asarray(predicted, np.float64) - outcomes) ** 2
        per_bucket = [stats(errors[buckets == b]) for b in order]
        result["mse"][name] = [m for m, _ in per_bucket]
        result["stderr"][name] = [s for _, s in per_bucket]
        result["overall"][name], result["overall_stderr"][name] = stats(errors)
    return result
