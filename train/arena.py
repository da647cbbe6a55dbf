"""The batched arena: many games between two JAX agents as one jitted program.

An :class:`Agent` is a JAX player: a static ``policy(params, states [B], keys
[B]) -> (actions [B] int32, values [B] float32)`` and its ``params`` (network
variables, traced, so that another checkpoint of the same net reuses the
compiled arena). ``keys`` holds one PRNG key per game: every random number an
agent draws comes from its own game's key, so a game does not depend on which
other games share its batch. ``values`` is the agent's estimate for the player
to move, in [-1, 1]; agents without one (``has_value=False``) never resign.
Ready-made agents are in ``train.agents``.

:func:`play_arena` plays ``num_games`` games of two agents in chunks of
``batch_size`` games, each chunk one ``lax.scan`` over moves::

    net = search_agent(spec, variables, SearchConfig(num_simulations=32, temperature_moves=0,
                                                     dirichlet_fraction=0.0))
    result = play_arena(net, random_agent(), key, size=9, num_games=64, sgf_dir="games")
    result.summary()  # {"games": 64, "wins": ..., "win_rate": ..., "ci95": (lo, hi), ...}

Colours alternate: agent A is Black in even games (0, 2, ...). Games ``2j``
and ``2j + 1`` form a pair that starts from the same random opening
(``opening_moves`` uniformly random legal non-pass moves, played before the
agents take over), so the opening's advantage cancels within the pair.

Reproducibility: every random number comes from ``(key, game index, move
number)``: agent keys are ``fold_in(fold_in(k_games, game), move)``, opening
keys ``fold_in(fold_in(k_opening, pair), move)``. The same key gives the same
games whatever ``batch_size`` or device count plays them (tested).

Cost: all games move in lockstep, so at each step agent A is to move in
exactly the even games (Black's turn) or exactly the odd ones; each agent
searches only the half of the batch in which it moves.

The training loop evaluates and gates its networks here (``train.evaluation``,
``train.gating``); ``eval.arena.play_games`` is the evaluation's front, which
also plays GTP programs (GnuGo, KataGo) move by move.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import gojax
from gojax import sgf
from gojax.games import record_from_actions, result_string

__all__ = [
    "GAMES_AXIS",
    "Agent",
    "ArenaResult",
    "Policy",
    "play_arena",
    "wilson_interval",
    "write_sgf",
]

GAMES_AXIS = "games"


# ----------------------------------------------------------------------------
# Agents.

# policy(params, states [B], keys [B]) -> (actions [B] int32, values [B] float32)
Policy = Callable[[Any, gojax.GoState, jax.Array], tuple[jax.Array, jax.Array]]


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
    """A JAX player: a static ``policy`` and its traced ``params``.

    Attributes:
      name: how records, tables and ratings name it.
      policy: ``(params, states [B], keys [B]) -> (actions [B] int32, values [B]
        float32)``, jittable, one key per game. A static argument of the
        arena's jit: build it once (``train.agents``' constructors cache it) so that
        every agent of one kind shares the compiled program.
      params: pytree passed to ``policy`` (network variables), or None.
      has_value: whether ``values`` means anything (only then may it resign).
    """

    name: str
    policy: Policy
    params: Any = None
    has_value: bool = False

    def __call__(self, states: gojax.GoState, keys: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Moves and values for ``[B]`` states with ``[B]`` keys."""
        return self.policy(self.params, states, keys)


# ----------------------------------------------------------------------------
# Results.


@dataclasses.dataclass(frozen=True)
class ArenaResult:
    """Outcomes of ``B`` games from agent A's point of view (host numpy arrays), by game index."""

    outcome: np.ndarray  # [B] int8: +1 A won, -1 A lost, 0 draw
    a_black: np.ndarray  # [B] bool: A played Black
    # [B] float32: Black's margin, komi included, by the rules' count of the final board
    # (a referee's count for the GTP games it counted)
    score: np.ndarray
    length: np.ndarray  # [B] int32: moves played, passes (and opening moves) included
    finished: np.ndarray  # [B] bool: ended by two passes, the move cap or a resignation
    resigned: np.ndarray | None = None  # [B] int8: colour that resigned (+1 B, -1 W), 0 none
    actions: np.ndarray | None = None  # [B, T] int16: moves in order, -1 after the end

    def summary(self) -> dict[str, Any]:
        """``games, wins, losses, draws, win_rate`` (draws half) and its Wilson ``ci95``."""
        n = int(self.outcome.size)
        wins = int((self.outcome > 0).sum())
        draws = int((self.outcome == 0).sum())
        points = wins + 0.5 * draws
        resigned = self.resigned if self.resigned is not None else np.zeros(n, np.int8)
        return {
            "games": n,
            "wins": wins,
            "losses": n - wins - draws,
            "draws": draws,
            "win_rate": points / n if n else float("nan"),
            "ci95": wilson_interval(points, n),
            "win_rate_as_black": _rate(self.outcome[self.a_black]),
            "win_rate_as_white": _rate(self.outcome[~self.a_black]),
            "mean_length": float(self.length.mean()) if n else float("nan"),
            "resignations": int((resigned != 0).sum()),
        }

    def counts(self) -> tuple[int, int, int]:
        """``(wins, draws, losses)`` of agent A."""
        wins = int((self.outcome > 0).sum())
        draws = int((self.outcome == 0).sum())
        return wins, draws, int(self.outcome.size) - wins - draws

    def result_string(self, game: int) -> str:
        """SGF ``RE[]`` of one game: ``B+R``/``W+R`` for a resignation, else the margin."""
        if self.resigned is not None and self.resigned[game]:
            return "W+R" if self.resigned[game] > 0 else "B+R"
        return result_string(float(self.score[game]))


def _rate(outcome: np.ndarray) -> float:
    return float(((outcome > 0) + 0.5 * (outcome == 0)).mean()) if outcome.size else float("nan")


def wilson_interval(successes: float, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval for a success rate (95% for the default ``z``).

    Draws may be counted as half a success. With no trials the interval is
    ``(0, 1)``.

    >>> lo, hi = wilson_interval(5, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.2366, 0.7634)
    """
    if trials <= 0:
        return 0.0, 1.0
    p = successes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    # At p = 0 or 1 the bound is exactly 0 or 1; say so instead of 1 - 1e-16.
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= trials else min(1.0, centre + half)
    return lo, hi


# ----------------------------------------------------------------------------
# The batched arena.


def _fold(keys: jax.Array, data: jax.Array) -> jax.Array:
    """``fold_in`` elementwise over the leading ``[2, P]`` axes of keys and data."""
    return jax.vmap(jax.vmap(jax.random.fold_in))(keys, data)


def _opening_moves(states: gojax.GoState, keys: jax.Array) -> jax.Array:
    """``[2, P]`` uniformly random legal non-pass moves (pass if there is none)."""

    def one(state, key):
        legal = gojax.legal_moves(state)
        points = legal.at[-1].set(False)
        logits = jnp.where(jnp.where(jnp.any(points), points, legal), 0.0, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    return jax.vmap(jax.vmap(one))(states, keys)


def _stack_halves(first: jax.Array, second: jax.Array, half: jax.Array) -> jax.Array:
    """``[2, P]`` with ``first`` in half ``half`` and ``second`` in the other."""
    return jnp.where(half == 0, jnp.stack([first, second]), jnp.stack([second, first]))


_ARENA_STATIC = (
    "policy_a",
    "policy_b",
    "resign_a",
    "resign_b",
    "size",
    "komi",
    "rules",
    "moves",
    "opening_moves",
    "resign_threshold",
)


@functools.partial(jax.jit, static_argnames=(*_ARENA_STATIC, "mesh"))
def _arena(params_a, params_b, key, pairs, *, mesh, **static):
    """:func:`_arena_games` on one device, or on each device of ``mesh`` for its share of
    ``pairs`` (``jax.shard_map``: every device runs the one-device program on its own
    games, with no communication; a game depends only on its index, so the results are
    the same)."""
    games = functools.partial(_arena_games, **static)
    if mesh is None:
        return games(params_a, params_b, key, pairs)
    split = PartitionSpec(None, GAMES_AXIS)  # [2, P] halves
    out_specs = {
        "outcome": split,
        "score": split,
        "length": split,
        "finished": split,
        "resigned": split,
        "actions": PartitionSpec(None, None, GAMES_AXIS),  # [T, 2, P]
    }
    return jax.shard_map(
        games,
        mesh=mesh,
        in_specs=(PartitionSpec(), PartitionSpec(), PartitionSpec(), PartitionSpec(GAMES_AXIS)),
        out_specs=out_specs,
        # The check would want the search's loop carries marked as varying over the
        # games axis (lax.pcast); every value here is per device.
        check_vma=False,
    )(params_a, params_b, key, pairs)


def _arena_games(
    params_a,
    params_b,
    key,
    pairs,
    *,
    policy_a,
    policy_b,
    resign_a,
    resign_b,
    size,
    komi,
    rules,
    moves,
    opening_moves,
    resign_threshold,
):
    """Games ``2 * pairs`` (A Black) and ``2 * pairs + 1`` (B Black), laid out ``[2, P]``."""
    num_pairs = pairs.shape[0]

    key_open, key_games = jax.random.split(key)
    games = jnp.stack([2 * pairs, 2 * pairs + 1])  # [2, P] global game indices
    pair_ids = jnp.stack([pairs, pairs])
    game_keys = _fold(jnp.broadcast_to(key_games, (2, num_pairs) + key_games.shape), games)
    open_keys = _fold(jnp.broadcast_to(key_open, (2, num_pairs) + key_open.shape), pair_ids)

    def fresh(_):
        return gojax.new_game(size, komi=komi, rules=rules, max_moves=moves)

    states = jax.vmap(jax.vmap(fresh))(games)
    resigned = jnp.zeros((2, num_pairs), jnp.int8)

    def agents_move(states, t):
        half = t % 2  # A is Black in half 0, so it moves there at even t, in half 1 at odd t
        keys = _fold(game_keys, jnp.full(games.shape, t))

        def pick(tree, h):
            return jax.tree.map(lambda x: x[h], tree)

        act_a, val_a = policy_a(params_a, pick(states, half), keys[half])
        act_b, val_b = policy_b(params_b, pick(states, 1 - half), keys[1 - half])
        actions = _stack_halves(act_a, act_b, half)
        if resign_threshold is None or not (resign_a or resign_b):
            return actions, jnp.zeros(games.shape, bool)
        limit = -resign_threshold
        hopeless_a = (val_a < limit) & resign_a
        hopeless_b = (val_b < limit) & resign_b
        return actions, _stack_halves(hopeless_a, hopeless_b, half)

    def opening(states, t):
        return _opening_moves(states, _fold(open_keys, jnp.full(games.shape, t))), jnp.zeros(
            games.shape, bool
        )

    def step(carry, t):
        def move(carry):
            states, resigned = carry
            if opening_moves > 0:
                actions, resign = jax.lax.cond(t < opening_moves, opening, agents_move, states, t)
            else:
                actions, resign = agents_move(states, t)
            active = ~states.terminated
            resign = resign & active
            resigned = jnp.where(resign, states.to_play, resigned)
            played = active & ~resign
            # A resignation ends the game before its move; play() leaves a finished game as is.
            states = states.replace(terminated=states.terminated | resign)
            states = jax.vmap(jax.vmap(gojax.play))(states, actions)
            record = jnp.where(played, actions, -1).astype(jnp.int16)
            return (states, resigned), record

        def idle(carry):
            return carry, jnp.full(games.shape, -1, jnp.int16)

        # Once every game is over the remaining steps cost nothing.
        return jax.lax.cond(jnp.all(carry[0].terminated), idle, move, carry)

    (states, resigned), actions = jax.lax.scan(step, (states, resigned), jnp.arange(moves))
    score = jax.vmap(jax.vmap(gojax.score))(states)
    black_result = jnp.where(resigned != 0, -resigned, jnp.sign(score)).astype(jnp.int8)
    outcome = jnp.stack([black_result[0], -black_result[1]])
    return {
        "outcome": outcome,
        "score": score,
        "length": states.move_number,
        "finished": states.terminated,
        "resigned": resigned,
        "actions": actions,  # [T, 2, P]
    }


def _game_order(x: np.ndarray) -> np.ndarray:
    """``[2, P, ...]`` halves (even games, odd games) → ``[2P, ...]`` by game index."""
    return np.swapaxes(x, 0, 1).reshape((-1,) + x.shape[2:])


def play_arena(
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    *,
    size: int,
    num_games: int,
    komi: float = 7.0,
    rules: str = "tromp-taylor",
    max_moves: int | None = None,
    opening_moves: int = 0,
    resign_threshold: float | None = None,
    batch_size: int | None = None,
    mesh: Mesh | None = None,
    first_game: int = 0,
    sgf_dir: str | os.PathLike | None = None,
) -> ArenaResult:
    """Play ``num_games`` games of A against B, ``batch_size`` at a time; A is Black in even games.

    Args:
      agent_a, agent_b: :class:`Agent` s.
      key: PRNG key; with ``first_game`` it fixes every game (see the module doc).
      size, komi, rules: the game; ``max_moves`` caps its length (None:
        ``2 * size * size``), after which it is scored as it stands.
      opening_moves: random legal non-pass moves that open each pair of games.
      resign_threshold: an agent with a value resigns when it is below
        ``-resign_threshold`` for the player to move; None: nobody resigns.
      batch_size: games per jitted call (rounded up to an even number and to a
        multiple of twice the mesh size); None: all at once. The last call is
        padded to the same shape so that one program serves every call.
      mesh: a 1-D ``jax.sharding.Mesh`` with axis ``"games"``: games are split
        across its devices (data parallel), parameters replicated.
      first_game: index of the first game (even): a later call with
        ``first_game = n`` continues the numbering of one that played ``n``.
      sgf_dir: write every game there as ``game-0001.sgf``, ... (by game index).
    """
    if num_games < 1:
        raise ValueError(f"num_games must be positive, got {num_games}")
    if first_game % 2:
        raise ValueError(f"first_game must be even (games come in colour pairs), got {first_game}")
    if resign_threshold is not None and not 0.0 < resign_threshold <= 1.0:
        raise ValueError(f"resign_threshold must be in (0, 1], got {resign_threshold}")
    moves = int(max_moves) if max_moves is not None else 2 * size * size
    if opening_moves < 0 or opening_moves >= moves:
        raise ValueError(f"opening_moves must be in [0, {moves}), got {opening_moves}")
    num_pairs = (num_games + 1) // 2
    devices = 1 if mesh is None else mesh.devices.size
    per_call = num_pairs if batch_size is None else max(1, (int(batch_size) + 1) // 2)
    per_call = min(per_call, num_pairs)
    per_call = -(-per_call // devices) * devices  # whole pairs on every device
    replicated = pair_layout = None
    params_a, params_b = agent_a.params, agent_b.params
    if mesh is not None:
        replicated = NamedSharding(mesh, PartitionSpec())
        pair_layout = NamedSharding(mesh, PartitionSpec(GAMES_AXIS))
        params_a = jax.device_put(params_a, replicated)
        params_b = jax.device_put(params_b, replicated)
    chunks = []
    for start in range(0, num_pairs, per_call):
        pairs = np.arange(start, start + per_call, dtype=np.int32) + first_game // 2
        pairs = jnp.asarray(pairs) if mesh is None else jax.device_put(pairs, pair_layout)
        out = _arena(
            params_a,
            params_b,
            key,
            pairs,
            policy_a=agent_a.policy,
            policy_b=agent_b.policy,
            resign_a=agent_a.has_value,
            resign_b=agent_b.has_value,
            size=size,
            komi=float(komi),
            rules=rules,
            moves=moves,
            opening_moves=int(opening_moves),
            resign_threshold=None if resign_threshold is None else float(resign_threshold),
            mesh=mesh,
        )
        chunks.append(jax.device_get(out))
    host = {
        k: np.concatenate([_game_order(c[k]) for c in chunks]) for k in chunks[0] if k != "actions"
    }
    actions = np.concatenate([_game_order(np.moveaxis(c["actions"], 0, -1)) for c in chunks])
    n = num_games
    result = ArenaResult(
        outcome=host["outcome"][:n].astype(np.int8),
        a_black=np.arange(first_game, first_game + n) % 2 == 0,
        score=host["score"][:n].astype(np.float32),
        length=host["length"][:n].astype(np.int32),
        finished=host["finished"][:n],
        resigned=host["resigned"][:n].astype(np.int8),
        actions=actions[:n],
    )
    if sgf_dir is not None:
        write_sgf(
            result,
            sgf_dir,
            names=(agent_a.name, agent_b.name),
            size=size,
            komi=komi,
            rules=rules,
            first_game=first_game,
            opening_moves=opening_moves,
        )
    return result


def write_sgf(
    result: ArenaResult,
    folder: str | os.PathLike,
    *,
    names: tuple[str, str],
    size: int,
    komi: float,
    rules: str,
    first_game: int = 0,
    opening_moves: int = 0,
) -> list[Path]:
    """Every game of ``result`` as ``folder/game-NNNN.sgf`` (1-based game number), atomically."""
    if result.actions is None:
        raise ValueError("this result has no moves to write")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    paths = []
    for i in range(result.outcome.size):
        moves = result.actions[i]
        black, white = names if result.a_black[i] else names[::-1]
        comment = f"Black: {black}; White: {white}."
        if opening_moves:
            comment += f" Moves 1-{opening_moves} are a random opening."
        record = record_from_actions(
            moves[moves >= 0].tolist(),
            size=size,
            komi=komi,
            rules=rules,
            result=result.result_string(i) if result.finished[i] else None,
            player_black=black,
            player_white=white,
            date=today,
            comment=comment,
            extra={"GN": [f"game {first_game + i + 1}"], "AP": ["gojax arena"]},
        )
        path = folder / f"game-{first_game + i + 1:04d}.sgf"
        sgf.save(record, path)
        paths.append(path)
    return paths
