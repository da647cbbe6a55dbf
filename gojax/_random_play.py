"""Random legal play, many games at once: a smoke test of the rules and a speed baseline."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gojax._board import GoState, legal_moves, new_game, play
from gojax._counting import score

CHUNK = 32  # moves per jitted call: long enough to amortise dispatch, short for progress


@dataclasses.dataclass
class RandomPlayResult:
    """What a batch of random games produced."""

    size: int
    rules: str
    komi: float
    games: int
    moves: int  # moves played in all games, passes included
    seconds: float
    black_wins: int
    white_wins: int
    draws: int
    capped: int  # games stopped by the move cap rather than two passes
    lengths: np.ndarray  # [games] moves per game
    margins: np.ndarray  # [games] Black's Tromp-Taylor margin with komi
    actions: np.ndarray  # [games, max_moves] int16, -1 after the end
    final_boards: np.ndarray  # [games, P] int8

    @property
    def games_per_second(self) -> float:
        return self.games / self.seconds

    @property
    def moves_per_second(self) -> float:
        return self.moves / self.seconds

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))


def random_action(key: jax.Array, legal: jax.Array) -> jax.Array:
    """``[P + 1]`` legal mask → an action drawn uniformly among the legal ones."""
    return jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))


@functools.partial(jax.jit, static_argnames=("steps",))
def _advance(states: GoState, key: jax.Array, steps: int):
    """Play ``steps`` random moves in every game of the batch; finished games stand still."""

    def step(states, key):
        keys = jax.random.split(key, states.board.shape[0])
        legal = jax.vmap(legal_moves)(states)
        actions = jax.vmap(random_action)(keys, legal)
        recorded = jnp.where(states.terminated, -1, actions).astype(jnp.int16)
        return jax.vmap(play)(states, actions), recorded

    return jax.lax.scan(step, states, jax.random.split(key, steps))


def play_random_games(
    size: int = 9,
    games: int = 1000,
    *,
    batch: int = 256,
    rules: str = "tromp-taylor",
    komi: float = 7.5,
    max_moves: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> RandomPlayResult:
    """Play ``games`` games of uniformly random legal moves, ``batch`` at a time.

    Each batch runs as one vmapped program until every game in it has ended
    (two passes or the move cap). ``progress(done_moves, total_estimate)`` is
    called after every chunk of moves.
    """
    if games < 1 or batch < 1:
        raise ValueError(f"need games >= 1 and batch >= 1, got {games} and {batch}")
    batch = min(batch, games)
    template = new_game(size, rules=rules, komi=komi, max_moves=max_moves)
    cap = template.max_moves
    fresh = jax.jit(
        lambda: jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), template)
    )
    final_score = jax.jit(jax.vmap(score))
    key = jax.random.key(seed)
    jax.block_until_ready(_advance(fresh(), key, CHUNK))  # compile outside the timing
    all_actions, all_boards, all_margins, all_lengths = [], [], [], []
    start = time.perf_counter()
    moves_done = 0
    for first in range(0, games, batch):
        states = fresh()
        chunks = []
        while True:
            key, sub = jax.random.split(key)
            states, actions = _advance(states, sub, CHUNK)
            chunks.append(np.asarray(actions).T)
            count = min(batch, games - first)
            moves_done += int(np.sum(chunks[-1][:count] >= 0))
            finished = np.asarray(states.terminated)
            if progress is not None:
                progress(first + int(np.sum(finished[:count])), moves_done)
            if finished.all():
                break
        actions = np.concatenate(chunks, axis=1)[:count, :cap]
        all_actions.append(
            np.pad(actions, ((0, 0), (0, cap - actions.shape[1])), constant_values=-1)
        )
        all_boards.append(np.asarray(states.board)[:count])
        all_margins.append(np.asarray(final_score(states))[:count])
        all_lengths.append(np.asarray(states.move_number)[:count])
    seconds = time.perf_counter() - start
    margins = np.concatenate(all_margins)
    lengths = np.concatenate(all_lengths)
    return RandomPlayResult(
        size=size,
        rules=template.rules.name,
        komi=float(komi),
        games=games,
        moves=int(np.sum(lengths)),
        seconds=seconds,
        black_wins=int(np.sum(margins > 0)),
        white_wins=int(np.sum(margins < 0)),
        draws=int(np.sum(margins == 0)),
        capped=int(np.sum(lengths >= cap)),
        lengths=lengths,
        margins=margins,
        actions=np.concatenate(all_actions),
        final_boards=np.concatenate(all_boards),
    )
