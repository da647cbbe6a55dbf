"""Self-play: G games on S slots as one jitted loop, with training targets.

Every step searches the positions of all ``S`` slots as one batch
(``gojax.search.search``), plays the chosen moves and records what the learner
needs, in the row of each game at its move number. A game that ends frees its
slot for the next game not yet begun (``SelfPlayConfig.num_slots``), so the
batch stays full of running games while they end at different lengths; with
``S = G`` (the default) each game has its slot from start to end and a slot
whose game ended idles, searched but not recorded. At the end every
recorded move of a finished game gets its targets from the final position:
the outcome ``z``, the score margin and the Tromp-Taylor ownership, each from
the point of view of the player who was to move.

Move choice: ``search`` already samples the move in proportion to the root
visits (PUCT; Gumbel: the sequential-halving winner with its noise) for the
first ``SearchConfig.temperature_moves`` moves of a game and plays the best
move afterwards (or, with KataGo's ``SearchConfig.move_temperature``, draws
every move from the visits to the power ``1 / T``), so self-play does no
sampling of its own.

Resignation (AlphaGo Zero): the player to move resigns when both the root
value and the best visited child's value, for that player, are below
``-resign_threshold``. A random ``no_resign_fraction`` of the games never
resign; they play on and record who *would* have resigned, so that the
false-positive rate (the would-be resigner won or drew after all) measures
whether the threshold is safe (AlphaGo Zero kept it below 5%).

Temporal-difference targets (KataGo, for its short-term heads): each move
also gets ``td_value`` and ``td_score`` at three horizons (:func:`td_targets`),
averages of the searched values (and scores) of the moves from it on,
weighted down geometrically, the final result taking what is left. The score
per move is the search's mean score at the root (``SearchOutput.root_score``),
as KataGo's; 0 with an evaluator that gives no score.

Playout-cap randomisation (KataGo, Wu 2019): with ``fast_simulations`` set,
each step is a full search (``search.num_simulations``, root noise on) with
probability ``full_search_prob`` and a fast one (``fast_simulations``, no root
noise) otherwise. Only full-search moves are policy targets
(``policy_mask``); every move is a value target. One coin is drawn per step
for the whole batch, so that a ``lax.cond`` runs exactly one of the two
searches (the expected cost is what the randomisation saves).

Devices: the games are split over this process's devices
(``SelfPlayConfig.num_devices``), each playing its share with its own key in
one ``shard_map``; nothing is exchanged between them until the trajectories
are read. (Several hosts each play their own games.)
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np

import gojax
from gojax import sgf
from gojax.games import record_from_actions, result_string
from gojax.search import Evaluator, SearchConfig, search

__all__ = [
    "PER_GAME_FIELDS",
    "SelfPlayConfig",
    "Trajectories",
    "agz_encode",
    "alphago_encode",
    "ownership",
    "play_games",
    "selfplay_devices",
    "selfplay_stats",
    "td_targets",
    "trajectories_to_sgf",
]

EvaluatorFn = Callable[[Any], Evaluator]
EncodeFn = Callable[[gojax.GoState], Any]

# KataGo's temporal-difference horizons (long, mid, short): a move's own value gets
# weight 1 / (1 + c * board area) and the rest goes to the moves after it, so the
# horizon is about c * area moves (19x19: 64, 20 and 7; 9x9: 15, 5 and 2).
TD_HORIZON_COEFFICIENTS = (0.176, 0.056, 0.016)


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Static self-play settings (hashable: a static argument of ``jax.jit``).

    Attributes:
      size: board side.
      komi: points given to White.
      rules: a ``gojax`` rule preset name.
      num_games: ``G``, games played per call.
      num_slots: ``S``, games in play at once: the batch every step searches. A game
        that ends frees its slot for the next game not yet begun, so that the batch
        stays full while games of different lengths end (a slot of a finished game
        would otherwise be searched, for nothing, until the longest game ends). None:
        ``num_games`` (each game its own slot, from the first step to the last).
        ``S < G`` plays whole games (``num_steps`` None).
      max_moves: the game's move cap (passes count); the game ends there and
        is scored. None: ``2 * size * size`` (gojax's default).
      num_steps: ``T``, steps; games still running after ``T`` moves are
        unfinished and get no targets. None: ``max_moves`` (every game ends).
      search: the search for every move (the full search under playout-cap
        randomisation).
      resign_threshold: resign when the root value and the best child's value
        for the player to move are both below ``-resign_threshold`` (in
        (0, 1]; AlphaGo Zero's is tuned for 5% false positives, e.g. 0.9).
        None disables resignation.
      no_resign_fraction: games in which resignation is disabled, to measure
        false positives (AlphaGo Zero's 10%).
      fast_simulations: playout-cap randomisation's fast search size; None
        disables it (every move is a full search and a policy target).
      full_search_prob: fraction of steps given the full search (KataGo's 0.25).
      num_devices: local devices the games are split over (data parallel, each
        device plays ``num_games / n`` games with its own key). 0: as many of
        this process's devices as divide ``num_games`` evenly (the largest such
        count); 1: the first device only. A count that does not divide
        ``num_games`` is an error.
    """

    size: int = 9
    komi: float = 7.0
    rules: str = "tromp-taylor"
    num_games: int = 64
    num_slots: int | None = None
    max_moves: int | None = None
    num_steps: int | None = None
    search: SearchConfig = SearchConfig(kind="puct", num_simulations=64)
    resign_threshold: float | None = None
    no_resign_fraction: float = 0.1
    fast_simulations: int | None = None
    full_search_prob: float = 0.25
    num_devices: int = 0

    def __post_init__(self) -> None:
        if self.num_games < 1:
            raise ValueError(f"num_games must be >= 1, not {self.num_games}")
        if self.num_slots is not None and not 1 <= self.num_slots <= self.num_games:
            raise ValueError(
                f"num_slots must be in 1..num_games={self.num_games}, not {self.num_slots}"
            )
        if self.slots < self.num_games and self.num_steps is not None:
            raise ValueError(
                f"num_slots={self.num_slots} < num_games plays whole games: num_steps must "
                f"be None, not {self.num_steps}"
            )
        if self.num_steps is not None and self.num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, not {self.num_steps}")
        if self.resign_threshold is not None and not 0.0 < self.resign_threshold <= 1.0:
            raise ValueError(f"resign_threshold must be in (0, 1], not {self.resign_threshold}")
        if not 0.0 <= self.no_resign_fraction <= 1.0:
            raise ValueError(f"no_resign_fraction must be in [0, 1], not {self.no_resign_fraction}")
        if self.fast_simulations is not None and self.fast_simulations < 1:
            raise ValueError(f"fast_simulations must be >= 1, not {self.fast_simulations}")
        if not 0.0 <= self.full_search_prob <= 1.0:
            raise ValueError(f"full_search_prob must be in [0, 1], not {self.full_search_prob}")
        if self.num_devices < 0:
            raise ValueError(f"num_devices must be >= 0, not {self.num_devices}")
        for name, count in (("num_games", self.num_games), ("num_slots", self.slots)):
            if self.num_devices > 1 and count % self.num_devices:
                raise ValueError(
                    f"{name}={count} must be a multiple of num_devices={self.num_devices}"
                )

    @property
    def game_max_moves(self) -> int:
        """The move cap actually used."""
        return self.max_moves if self.max_moves is not None else 2 * self.size * self.size

    @property
    def slots(self) -> int:
        """``S``, the games in play at once."""
        return self.num_slots if self.num_slots is not None else self.num_games

    @property
    def steps(self) -> int:
        """``T``, the moves a game's records hold."""
        return self.num_steps if self.num_steps is not None else self.game_max_moves

    @property
    def loop_steps(self) -> int:
        """The most steps a call takes: ``num_steps`` when set; otherwise a bound the
        last game always ends before (while games wait for a slot every slot plays, and
        all the games' steps number at most ``G * max_moves``; the last games then end
        within ``max_moves`` steps)."""
        if self.slots == self.num_games:
            return self.steps
        return -(-self.num_games * self.game_max_moves // self.slots) + self.game_max_moves

    def new_game(self) -> gojax.GoState:
        """One empty board with these rules."""
        return gojax.new_game(
            self.size, komi=self.komi, rules=self.rules, max_moves=self.game_max_moves
        )


@flax.struct.dataclass
class Trajectories:
    """``B`` self-play games of up to ``T`` moves, time-major (``A = P + 1``, ``P = size**2``).

    Per move number and game (``[T, B, ...]``; ``B`` is ``SelfPlayConfig.num_games``,
    whatever slots played them); "mover" is the player to move there:
    """

    inputs: Any  # pytree, leaves [T, B, ...]: encode_fn of the position before the move
    policy: jax.Array  # [T, B, A] float32: the search's action_weights (policy target)
    policy_mask: jax.Array  # [T, B] bool: valid and a full search (a policy target)
    to_play: jax.Array  # [T, B] int8: +1 Black, -1 White
    action: jax.Array  # [T, B] int32: the move played; -1 if none (game over, resignation)
    valid: jax.Array  # [T, B] bool: the game was running; a position was searched
    root_value: jax.Array  # [T, B] float32: search value for the mover, in [-1, 1]
    root_score: jax.Array  # [T, B] float32: the search's mean score at the root, mover (points;
    #   0 if the evaluator gives no score)
    value: jax.Array  # [T, B] float32: outcome z for the mover, +1 / -1 / 0 (draw)
    value_mask: jax.Array  # [T, B] bool: valid and the game finished (z is known)
    score: jax.Array  # [T, B] float32: final Tromp-Taylor margin for the mover, komi included
    ownership: jax.Array  # [T, B, P] int8: final owner of each point, +1 mover, -1 opponent
    score_mask: jax.Array  # [T, B] bool: value_mask and not resigned (score, ownership)
    td_value: jax.Array  # [T, B, 3] float32: td_targets of root_value and z (value_mask)
    td_score: jax.Array  # [T, B, 3] float32: td_targets of root_score and score (score_mask)
    # Per game ([B, ...]):
    finished: jax.Array  # [B] bool: ended by two passes, the move cap or resignation
    winner: jax.Array  # [B] int8: +1 Black, -1 White, 0 draw or unfinished
    final_score: jax.Array  # [B] float32: Black's margin on the final board
    final_board: jax.Array  # [B, P] int8: the last position, +1 black, -1 white
    resigned: jax.Array  # [B] int8: colour that resigned, 0 if none
    no_resign: jax.Array  # [B] bool: resignation disabled in this game
    would_resign: jax.Array  # [B] int8: in no_resign games, first colour that would have resigned
    length: jax.Array  # [B] int32: moves played (passes included)


# The per-game fields of Trajectories ([B, ...]); the others are time-major ([T, B, ...]).
PER_GAME_FIELDS = frozenset(
    ("finished", "winner", "final_score", "final_board", "resigned", "no_resign")
    + ("would_resign", "length")
)


def agz_encode(states: gojax.GoState, dtype=jnp.uint8) -> jax.Array:
    """``[B, N, N, 17]`` AlphaGo Zero planes (0/1, stored compactly as uint8 by default)."""
    return jax.vmap(functools.partial(gojax.agz_planes, dtype=dtype))(states)


def alphago_encode(states: gojax.GoState, dtype=jnp.uint8) -> jax.Array:
    """``[B, N, N, 49]`` AlphaGo feature planes (0/1, stored compactly as uint8 by default)."""
    return jax.vmap(functools.partial(gojax.alphago_planes, dtype=dtype))(states)


def ownership(board: jax.Array, size: int) -> jax.Array:
    """``[P]`` int8 Tromp-Taylor owner of each point of a ``[P]`` board: +1 Black, -1 White, 0.

    A stone is its colour's; an empty point belongs to the colour its empty
    region reaches alone (``gojax.area`` counts these points).
    """
    grid = board.reshape(size, size)
    empty = grid == 0

    def reaches(color):
        def grow(reached):
            pad = jnp.pad(reached, 1)
            near = pad[:-2, 1:-1] | pad[2:, 1:-1] | pad[1:-1, :-2] | pad[1:-1, 2:]
            return reached | (empty & near)

        start = grid == color
        return jax.lax.while_loop(
            lambda c: jnp.any(c[0] != c[1]), lambda c: (grow(c[0]), c[0]), (grow(start), start)
        )[0]

    black, white = reaches(1), reaches(-1)
    owner = (black & ~white).astype(jnp.int8) - (white & ~black).astype(jnp.int8)
    return owner.reshape(size * size)


def _select(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per-game choice between two ``[B, ...]`` pytrees."""

    def pick(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(pick, new, old)


def fast_search(full: SearchConfig, simulations: int) -> SearchConfig:
    """The cheap search of KataGo's playout cap randomisation: it plays for strength
    (no root noise, forced playouts or root policy temperature) and its moves train no
    policy."""
    return dataclasses.replace(full.without_root_exploration(), num_simulations=simulations)


def td_targets(
    per_move: jax.Array, final: jax.Array, valid: jax.Array, to_play: jax.Array, area: int
) -> jax.Array:
    """KataGo's temporal-difference targets of one quantity at its three horizons.

    Args:
      per_move: ``[T, B]`` the estimate at each move, for the player to move.
      final: ``[B]`` the game's result, Black's view (``+1/-1/0``, or Black's margin).
      valid: ``[T, B]`` the game was running at that move.
      to_play: ``[T, B]`` ``+1`` Black, ``-1`` White.
      area: points on the board.

    Returns:
      ``[T, B, 3]`` for the player to move, horizons long, mid, short: at move ``t``,
      ``sum_k f (1 - f)^(k - t) x_k`` over the game's moves ``k >= t`` plus the
      remaining weight on ``final``, ``f = 1 / (1 + c * area)`` per horizon.
    """
    now = jnp.asarray([1.0 / (1.0 + c * area) for c in TD_HORIZON_COEFFICIENTS], jnp.float32)
    sign = to_play.astype(jnp.float32)

    def back(later, xs):  # later [B, 3]: the target one move on, Black's view
        x, ok = xs
        target = now * x[:, None] + (1.0 - now) * later
        target = jnp.where(ok[:, None], target, later)
        return target, target

    start = jnp.broadcast_to(final.astype(jnp.float32)[:, None], final.shape + (3,))
    _, black = jax.lax.scan(back, start, (per_move * sign, valid), reverse=True)
    return black * sign[..., None]


def _search_summary(evaluator: Evaluator, states, key, config: SearchConfig):
    """The parts of a search self-play keeps (fixed shapes, so two searches fit one cond)."""
    out = search(evaluator, states, key, config)
    visited = out.visit_counts > 0
    best_q = jnp.max(jnp.where(visited, out.q_values, -jnp.inf), axis=-1)
    best_q = jnp.where(jnp.any(visited, axis=-1), best_q, out.root_value)
    weights = out.action_weights.astype(jnp.float32)
    return out.action, weights, out.root_value, best_q, out.root_score


def _write(buffers: Any, index: Any, values: Any) -> Any:
    """``buffers[index] = values`` for each leaf of the pytrees, ``index`` an ``[S]`` array
    or a tuple of them (one entry per slot ``s``, ``values`` ``[S, ...]``); an entry out
    of range is dropped, which is how an idle slot writes nothing."""
    return jax.tree.map(lambda b, v: b.at[index].set(v, mode="drop"), buffers, values)


def _play(
    evaluator_fn: EvaluatorFn,
    encode_fn: EncodeFn,
    variables: Any,
    key: jax.Array,
    config,
) -> Trajectories:
    """``config.num_games`` games on ``config.slots`` slots (see ``SelfPlayConfig.num_slots``).

    Each step searches every slot's position as one batch and plays the moves. A game
    that ends frees its slot, which starts the next game not yet begun (none once all
    have begun: the slot idles, still searched, as the batch's shape is fixed). The
    step's records go straight to the game's own row, at its move number, so the
    trajectories are per game whatever slot played them. The loop stops when every
    game has ended (or, with ``num_steps``, after that many steps).
    """
    games, slots, size = config.num_games, config.slots, config.size
    key_resign, key_steps = jax.random.split(key)
    evaluator = evaluator_fn(variables)
    fresh = config.new_game()
    no_resign = jax.random.uniform(key_resign, (games,)) < config.no_resign_fraction
    full_config = config.search
    fast_config = None
    if config.fast_simulations is not None:
        fast_config = fast_search(full_config, config.fast_simulations)

    def new_games(n: int) -> gojax.GoState:
        return jax.vmap(lambda _: fresh)(jnp.arange(n))

    def search_step(states, t):
        """The step's searches of all ``S`` slots and what the records need of them."""
        key_t = jax.random.fold_in(key_steps, t)
        key_search, key_cap = jax.random.split(key_t)
        if fast_config is None:
            return jnp.asarray(True), _search_summary(evaluator, states, key_search, full_config)
        full = jax.random.uniform(key_cap) < config.full_search_prob
        summary = jax.lax.cond(
            full,
            lambda: _search_summary(evaluator, states, key_search, full_config),
            lambda: _search_summary(evaluator, states, key_search, fast_config),
        )
        return full, summary

    def body(carry):
        t, states, game, next_game, resigned, would_resign, rec, ends = carry
        active = game < games  # the slot holds a running game
        slot_no_resign = no_resign[jnp.minimum(game, games - 1)]
        inputs = encode_fn(states)
        full, (action, weights, root_value, best_q, root_score) = search_step(states, t)
        to_play = states.to_play
        if config.resign_threshold is None:
            hopeless = jnp.zeros((slots,), bool)
        else:
            limit = -config.resign_threshold
            hopeless = active & (root_value < limit) & (best_q < limit)
        resign_now = hopeless & ~slot_no_resign
        resigned = jnp.where(resign_now, to_play, resigned)
        would_resign = jnp.where(
            hopeless & slot_no_resign & (would_resign == 0), to_play, would_resign
        )
        moves = active & ~resign_now
        row = jnp.where(active, states.move_number, config.steps)  # idle: dropped
        rec = _write(
            rec,
            (row, game),
            dict(
                inputs=inputs,
                policy=weights,
                policy_mask=active & full,
                to_play=to_play,
                action=jnp.where(moves, action, -1).astype(jnp.int32),
                valid=active,
                root_value=root_value,
                root_score=root_score,
            ),
        )
        states = _select(moves, jax.vmap(gojax.play)(states, action), states)
        # Games that ended: their last position and resignations go to their own row,
        # and the slot starts the next game not yet begun (if any).
        ended = active & (states.terminated | (resigned != 0))
        ends = _write(ends, jnp.where(ended, game, games), (states, resigned, would_resign))
        number = next_game + jnp.cumsum(ended) - ended  # the ended slots' next games
        refill = ended & (number < games)
        game = jnp.where(refill, number, jnp.where(ended, games, game))
        next_game = jnp.minimum(next_game + jnp.sum(ended), games)
        states = _select(refill, new_games(slots), states)
        resigned = jnp.where(refill, 0, resigned).astype(jnp.int8)
        would_resign = jnp.where(refill, 0, would_resign).astype(jnp.int8)
        return t + 1, states, game, next_game, resigned, would_resign, rec, ends

    def cond(carry):
        t, game = carry[0], carry[2]
        return (t < config.loop_steps) & jnp.any(game < games)

    # Records of every game at each of its moves ([T, G, ...]; -1 = no move there).
    spec = jax.eval_shape(lambda s: encode_fn(s), new_games(slots))
    rows = (config.steps, games)
    rec = dict(
        inputs=jax.tree.map(lambda x: jnp.zeros(rows + x.shape[1:], x.dtype), spec),
        policy=jnp.zeros(rows + (size * size + 1,), jnp.float32),
        policy_mask=jnp.zeros(rows, bool),
        to_play=jnp.zeros(rows, jnp.int8),
        action=jnp.full(rows, -1, jnp.int32),
        valid=jnp.zeros(rows, bool),
        root_value=jnp.zeros(rows, jnp.float32),
        root_score=jnp.zeros(rows, jnp.float32),
    )
    zeros = jnp.zeros((slots,), jnp.int8)
    ends = (new_games(games), jnp.zeros((games,), jnp.int8), jnp.zeros((games,), jnp.int8))
    first = jnp.arange(slots, dtype=jnp.int32)  # slot s starts game s (slots <= games)
    carry = (jnp.int32(0), new_games(slots), first, jnp.int32(slots), zeros, zeros, rec, ends)
    _, states, game, _, resigned, would_resign, rec, ends = jax.lax.while_loop(cond, body, carry)
    # Games cut off by num_steps: where they stood.
    states, resigned, would_resign = _write(ends, game, (states, resigned, would_resign))

    final_score = jax.vmap(gojax.score)(states)  # [G]
    by_score = jnp.sign(final_score).astype(jnp.int8)
    finished = states.terminated | (resigned != 0)
    winner = jnp.where(resigned != 0, -resigned, by_score)
    winner = jnp.where(finished, winner, 0).astype(jnp.int8)
    owner = jax.vmap(ownership, in_axes=(0, None))(states.board, size)  # [G, P] Black's view
    mover = rec["to_play"]  # [T, G]
    value_mask = rec["valid"] & finished[None]
    td = functools.partial(td_targets, valid=rec["valid"], to_play=mover, area=size * size)
    return Trajectories(
        **rec,
        value=jnp.where(value_mask, winner[None] * mover, 0).astype(jnp.float32),
        value_mask=value_mask,
        score=jnp.where(value_mask, final_score[None] * mover, 0.0),
        ownership=jnp.where(value_mask[..., None], owner[None] * mover[..., None], 0).astype(
            jnp.int8
        ),
        score_mask=value_mask & (resigned == 0)[None],
        td_value=td(rec["root_value"], winner.astype(jnp.float32)),
        td_score=td(rec["root_score"], final_score),
        finished=finished,
        winner=winner,
        final_score=final_score,
        final_board=states.board,
        resigned=resigned,
        no_resign=no_resign,
        would_resign=would_resign,
        length=states.move_number,
    )


_play_jit = jax.jit(_play, static_argnames=("evaluator_fn", "encode_fn", "config"))

GAMES_AXIS = "games"


def selfplay_devices(config: SelfPlayConfig) -> list[jax.Device]:
    """The local devices ``config``'s games are split over (see ``num_devices``)."""
    local = jax.local_devices()
    if config.num_devices > len(local):
        raise ValueError(
            f"num_devices={config.num_devices}, but this process has {len(local)} device(s)"
        )
    if config.num_devices:
        return local[: config.num_devices]
    count = max(
        n for n in range(1, len(local) + 1) if config.num_games % n == 0 and config.slots % n == 0
    )
    return local[:count]


@functools.cache
def _sharded_play(evaluator_fn, encode_fn, config: SelfPlayConfig, devices: tuple) -> Callable:
    """``_play`` over ``len(devices)`` shards of the games, one per device, as one jitted
    ``shard_map``: no communication, each device runs the single-device program on its
    games. Outputs are global arrays split along the games axis."""
    mesh = jax.sharding.Mesh(np.asarray(devices), (GAMES_AXIS,))
    n = len(devices)
    shard = dataclasses.replace(
        config,
        num_games=config.num_games // n,
        num_slots=None if config.num_slots is None else config.num_slots // n,
    )
    per_step = jax.sharding.PartitionSpec(None, GAMES_AXIS)
    per_game = jax.sharding.PartitionSpec(GAMES_AXIS)
    out_specs = Trajectories(
        **{
            f.name: per_game if f.name in PER_GAME_FIELDS else per_step
            for f in dataclasses.fields(Trajectories)
        }
    )

    def play_shard(variables, keys):  # keys [1]: this shard's key
        return _play(evaluator_fn, encode_fn, variables, keys[0], shard)

    # check_vma=False: with the check, shard_map would want the search's loop carries
    # marked as varying over the games axis (lax.pcast); every value here is per device.
    return jax.jit(
        jax.shard_map(
            play_shard,
            mesh=mesh,
            in_specs=(jax.sharding.PartitionSpec(), per_game),
            out_specs=out_specs,
            check_vma=False,
        )
    )


def play_games(
    evaluator_fn: EvaluatorFn,
    encode_fn: EncodeFn,
    variables: Any,
    key: jax.Array,
    config: SelfPlayConfig,
) -> tuple[Trajectories, dict[str, float]]:
    """Play ``config.num_games`` games of self-play in one jitted loop.

    Args:
      evaluator_fn: ``variables -> Evaluator`` (e.g.
        ``lambda v: agz_evaluator(net, v)``); called inside the jit so that the
        variables are traced. Static: pass the same function object every call
        (a new lambda each call recompiles).
      encode_fn: ``states [B] -> inputs`` (a pytree of ``[B, ...]`` arrays),
        the learner's encoding of a position, e.g. :func:`agz_encode`. Static.
      variables: the network variables (any pytree; None for a net-free evaluator).
      key: PRNG key, consumed.
      config: a :class:`SelfPlayConfig`.

    Returns:
      ``(trajectories, stats)``: :class:`Trajectories` on the device(s) (split along the
      games axis over several) and
      :func:`selfplay_stats` (the wall time includes compilation on a first call).
    """
    start = time.perf_counter()
    devices = selfplay_devices(config)
    if len(devices) == 1:
        traj = _play_jit(evaluator_fn, encode_fn, variables, key, config)
    else:
        # One key per shard; with one device the key is used as given (same games as ever).
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(len(devices)))
        play = _sharded_play(evaluator_fn, encode_fn, config, tuple(devices))
        traj = play(variables, keys)
    traj = jax.block_until_ready(traj)
    return traj, selfplay_stats(traj, time.perf_counter() - start)


@jax.jit
def _policy_target_summary(policy: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean entropy and mean support size of the ``[T, B, A]`` targets where ``mask [T, B]``
    (on the device: the targets can be large)."""
    p = policy.astype(jnp.float32)
    entropy = jnp.sum(jax.scipy.special.entr(p), axis=-1)  # -p log p, 0 at p = 0
    moves = jnp.sum(p > 0, axis=-1).astype(jnp.float32)
    count = jnp.sum(mask)

    def mean(x):
        return jnp.where(count > 0, jnp.sum(jnp.where(mask, x, 0.0)) / count, jnp.nan)

    return mean(entropy), mean(moves)


def selfplay_stats(traj: Trajectories, seconds: float | None = None) -> dict[str, float]:
    """Summary numbers of a batch of games (host-side).

    Keys: ``games``, ``games_finished``, ``positions`` (searched moves),
    ``policy_targets``, ``policy_target_entropy`` (mean entropy in nats of
    the policy targets, NaN without any: how sharp the search's targets
    are), ``policy_target_moves`` (their mean number of moves with any
    weight), ``mean_game_length`` (finished games),
    ``black_win_rate`` (finished games, draws count half), ``draws``,
    ``resignations``, ``no_resign_games``, ``would_resign`` (no-resign games
    where someone would have resigned), ``resign_false_positives`` (of those,
    finished games the would-be resigner won or drew), ``resign_false_positive_rate``
    (NaN without any), and with ``seconds``: ``seconds``, ``moves_per_second``
    (searched positions per second).
    """
    finished = np.asarray(traj.finished)
    winner = np.asarray(traj.winner)
    length = np.asarray(traj.length)
    would = np.asarray(traj.would_resign)
    no_resign = np.asarray(traj.no_resign)
    num_finished = int(finished.sum())
    candidates = no_resign & (would != 0) & finished
    false_pos = candidates & (winner * would >= 0)
    positions = int(np.asarray(traj.valid).sum())
    entropy, moves = (float(x) for x in _policy_target_summary(traj.policy, traj.policy_mask))
    stats = {
        "games": float(finished.shape[0]),
        "games_finished": float(num_finished),
        "positions": float(positions),
        "policy_targets": float(np.asarray(traj.policy_mask).sum()),
        "policy_target_entropy": entropy,
        "policy_target_moves": moves,
        "mean_game_length": float(length[finished].mean()) if num_finished else float("nan"),
        "black_win_rate": (
            float(((winner[finished] == 1) + 0.5 * (winner[finished] == 0)).mean())
            if num_finished
            else float("nan")
        ),
        "draws": float((finished & (winner == 0)).sum()),
        "resignations": float((np.asarray(traj.resigned) != 0).sum()),
        "no_resign_games": float(no_resign.sum()),
        "would_resign": float(candidates.sum()),
        "resign_false_positives": float(false_pos.sum()),
        "resign_false_positive_rate": (
            float(false_pos.sum() / candidates.sum()) if candidates.any() else float("nan")
        ),
    }
    if seconds is not None:
        stats["seconds"] = float(seconds)
        stats["moves_per_second"] = positions / max(seconds, 1e-9)
    return stats


def game_result(traj: Trajectories, game: int) -> str | None:
    """SGF ``RE[]`` of one game: ``B+R``/``W+R`` for resignations, the margin, or None."""
    if not bool(traj.finished[game]):
        return None
    resigned = int(traj.resigned[game])
    if resigned:
        return "W+R" if resigned == 1 else "B+R"
    return result_string(float(traj.final_score[game]))


def trajectories_to_sgf(
    traj: Trajectories, config: SelfPlayConfig, folder: str | os.PathLike[str], *, prefix="game"
) -> list[str]:
    """Write every game as ``folder/{prefix}_{b:05d}.sgf``; returns the paths.

    The record has the played moves (Black first), komi, rules and ``RE``
    (none for unfinished games).
    """
    traj = jax.device_get(traj)
    os.makedirs(folder, exist_ok=True)
    actions = np.asarray(traj.action)  # [T, B]
    paths = []
    for b in range(actions.shape[1]):
        moves = actions[:, b]
        record = record_from_actions(
            moves[moves >= 0].tolist(),
            size=config.size,
            komi=config.komi,
            rules=config.rules,
            result=game_result(traj, b),
        )
        path = os.path.join(os.fspath(folder), f"{prefix}_{b:05d}.sgf")
        sgf.save(record, path)
        paths.append(path)
    return paths
