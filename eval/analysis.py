"""KataGo's JSON analysis protocol over batched search: ``gojax analysis``.

One query per line on stdin, one JSON reply per analysed position on stdout,
as KataGo's ``analysis`` command speaks it (see ``docs/analysis.md`` for the
subset supported and the differences). What makes it fast is batching: the
engine takes every query already waiting on stdin (up to ``batch_size``),
replays all their games on the device at once (a jitted ``lax.scan`` over
moves, vmapped over games, in segments of ``REPLAY_SEGMENT`` moves), and
analyses every requested position of the same board size, rule set and visit
budget in one batched search, or in one network evaluation at one visit.
Batches are padded to powers of two so that a handful of compiled programs
serve every batch.

Pipeline for one batch of lines::

    lines --parse_query--> Query --_replay_start/_segment (device)--> GoState [S]
          --_take, search / evaluate (device)--> numbers --_reply--> JSON lines

(``parse_query`` and the rest of the query checking live in ``eval.analysis_query``.)

Every number inside is from the view of the player to move (as in
``eval.players``); replies turn them to the perspective of
``reportAnalysisWinratesAs`` (``BLACK``, ``WHITE`` or ``SIDETOMOVE``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import io
import json
import math
import os
import select
import sys
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TextIO

import jax
import jax.numpy as jnp
import numpy as np

from eval.analysis_query import (
    DEFAULT_PV_LENGTH,
    MAX_TREE_VISITS,
    MAX_VISITS,
    REPORT_AS,
    Query,
    QueryError,
    parse_query,
    said_once,
    without_foreign_settings,
)
from eval.katago_names import ANALYSIS_WIDE_ROOT_NOISE
from eval.players import (
    Analysis,
    _policy_analysis,
    listed_actions,
    model_info,
    optimism_label,
    optimism_modules,
    raw_errors,
    root_moves,
    search_analysis,
)
from eval.replay_cache import ReplayCache, moves_key
from gojax import BLACK, WHITE, GoState, action_to_gtp, legal_moves, new_game, play
from gojax.katago_features import forget_history

# ----------------------------------------------------------------------------
# Device side: replay, search, evaluation


def _bucket(n: int, limit: int | None = None, smallest: int = 1) -> int:
    """The padded size of ``n`` items: a power of two, at least ``smallest``, at most ``limit``."""
    padded = max(smallest, 1 << max(n - 1, 0).bit_length())
    return padded if limit is None else max(n, min(padded, limit))


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


def _fresh(board, to_play, komi, captures, like: GoState) -> GoState:
    """A new game of ``like``'s size and rules from ``board``: history forgotten."""
    state = new_game(
        like.size,
        komi=komi,
        rules=like.rules,
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
    states = jax.vmap(fresh)(setup, first, komi, jnp.zeros((games, 2), jnp.int16))
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
                    states.board, colour, komi, states.captures
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


# One program: run eagerly, its selects cost a cached 19x19 query about 9%.
_forget_history = jax.jit(forget_history)


@jax.jit
def _take(states: GoState, rows: jax.Array) -> GoState:
    """``states[rows]`` for every field, as one program."""
    return jax.tree.map(lambda x: x[rows], states)


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
def _host_template(size: int, rules: str, max_moves: int) -> GoState:
    """A new game as numpy arrays: the rows of a replay that resume no kept game."""
    return jax.device_get(new_game(size, rules=rules, max_moves=max_moves))


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


class _Ends(NamedTuple):
    """What the host reads of the tree's states: which nodes end the game
    (``principal_variation``) and who is to move at each (whose view a node's scores
    take, ``subtree_score_distributions``)."""

    terminated: jax.Array  # [B, N] bool
    to_play: jax.Array  # [B, N] int8


def _device_functions(model: Any, symmetry: int | str, optimism: tuple[float, float] = (0.0, 0.0)):
    """Jitted ``search(variables, states, key, config, avoid, ...) -> (output, tree)``, the
    output's tree cut to what the host reads, and
    ``evaluate(variables, states [B], actions [B, K], key) -> outputs [B, 1 + K, ...]``
    (row 0 the position itself, row ``1 + k`` after ``actions[:, k]``). ``optimism``:
    ``(root, below)`` policy optimism; ``evaluate`` uses the root's.

    A search given ``stop_at`` (root visits, ``[B]``) stops there; with ``keep_tree`` it
    also returns its whole tree, which stays on the device: the ``tree`` to resume it
    from. A tree sized for more visits than ``stop_at`` asks is the same search as one
    sized for them (nodes are added in order), so one program serves every budget up to
    its size."""
    from gojax.evaluate import evaluate
    from gojax.search import katago_evaluator, search

    version = model.output_spec
    net, root_net = optimism_modules(model, optimism)

    @functools.partial(jax.jit, static_argnames=("config", "ownership", "keep_nodes", "keep_tree"))
    def run_search(
        variables,
        states,
        key,
        config,
        avoid,
        ownership=False,
        keep_nodes=False,
        tree=None,
        stop_at=None,
        keep_tree=False,
    ):
        def leaf_evaluator(module):
            return katago_evaluator(
                (module, variables, version), symmetry=symmetry, ownership=ownership
            )

        root_evaluator = None if root_net is None else leaf_evaluator(root_net)
        result = search(
            leaf_evaluator(net),
            states,
            key,
            config,
            avoid=avoid,
            root_evaluator=root_evaluator,
            tree=tree,
            stop_at=stop_at,
            resume=tree is not None,
        )
        # Only the root's prior and the statistics a PV needs go to the host, not the states
        # nor, unless the moves' means are wanted (``keep_nodes``), the nodes' ownership
        # (the root's mean is ``result.ownership``).
        nodes_ownership = result.tree.raw_ownership
        tree = result.tree.replace(
            embeddings=_Ends(result.tree.embeddings.terminated, result.tree.embeddings.to_play),
            children_prior_logits=result.tree.children_prior_logits[:, :1],
            raw_ownership=nodes_ownership if keep_nodes else nodes_ownership[:, :, :0],
        )
        return result.replace(tree=tree), (result.tree if keep_tree else None)

    @jax.jit
    def run_evaluate(variables, states, actions, key):
        batch, listed = actions.shape
        if listed:
            children = jax.vmap(jax.vmap(play, in_axes=(None, 0)))(states, actions)
            states = jax.tree.map(
                lambda r, c: jnp.concatenate([r[:, None], c], axis=1).reshape(
                    (batch * (1 + listed),) + r.shape[1:]
                ),
                states,
                children,
            )
        out = evaluate(
            root_net or net, variables, states, version=version, symmetry=symmetry, key=key
        )
        return {k: v.reshape((batch, 1 + listed) + v.shape[1:]) for k, v in out.items()}

    return run_search, run_evaluate


# A search run in parts (to report as it goes, or to stop at a time limit) adds at least
# 1/_MOST_PARTS of its visits a part: at most about this many parts...
_MOST_PARTS = 100
# ... but never more than this many visits a part unless its speed says so: a long search
# (KaTrain's pondering asks for 10,000,000 visits) reports at the cadence asked for, and its
# first part, which measures its speed, is short.
_LEAST_PART_CAP = 64
# Seconds between looks for a terminate while a stream's search runs: every search of a
# stream runs in parts of about this long, so that a terminate stops it within one part.
_TERMINATE_POLL = 0.5


def _search_in_parts(
    search: Callable[..., tuple[Any, Any]],
    key: jax.Array,
    goals: list[int],
    batch: int,
    schedule: list[tuple[float, float]],
    limits: list[float],
    report: Callable[[Any, np.ndarray], None],
    stopped: Callable[[], list[int]] | None = None,
    poll: float = math.inf,
    rate: float | None = None,
) -> tuple[Any, float]:
    """Run ``search(key, tree=..., stop_at=..., keep_tree=True)`` (``batch`` positions, the
    first ``len(schedule)`` real) to ``goals[i]`` root visits each in parts, as KataGo
    reports during a
    search and stops at ``maxTime``: position ``i`` is reported (``report(output, rows)``)
    ``schedule[i] = (first, every)`` seconds after the start, then every ``every``
    seconds, and stops growing once its search has run ``limits[i]`` seconds (its rows of
    ``stop_at`` stay where they are while the others go on), or when ``stopped()``
    (asked between parts, at least every ``poll`` seconds) names it (a terminate).
    Each part is sized from the last one's speed (the first from ``rate``, visits a
    second, if known; else it is a short one that measures it) to end at the next
    report, limit or poll; the parts resume one search (``gojax.search.search``'s
    ``resume``), so the last output is the one search's (a position stopped by its
    limit: with the visits it had). Returns it and the last part's speed."""
    real = len(schedule)
    due = np.array([first for first, _ in schedule], np.float64)
    every = np.array([gap for _, gap in schedule], np.float64)
    limit = np.asarray(limits, np.float64)
    goal = np.ones(batch, np.int64)  # padding rows: no simulations
    goal[:real] = goals
    visits = int(goal.max())
    done = np.ones(batch, np.int64)
    least = max(1, min(visits // _MOST_PARTS, _LEAST_PART_CAP))
    start = time.monotonic()
    tree, part = None, 0
    while True:
        live = done[:real] < goal[:real]
        wait = min(due[live].min(initial=math.inf), limit[live].min(initial=math.inf))
        wait = min(wait - (time.monotonic() - start), poll)
        if not math.isfinite(wait):
            step = visits
        elif rate is None:  # a first part measures the speed
            step = least
        else:
            step = max(least, int(rate * max(wait, 0.0)))
        target = np.minimum(goal, done + step)
        began = time.monotonic()
        output, tree = search(
            jax.random.fold_in(key, part),
            tree=tree,
            stop_at=jnp.asarray(target, jnp.int32),
            keep_tree=True,
        )
        part += 1
        jax.block_until_ready(tree)
        rate = int((target - done).max(initial=0)) / max(time.monotonic() - began, 1e-6)
        done = target
        now = time.monotonic() - start
        out_of_time = (now >= limit) & (done[:real] < goal[:real])
        goal[:real][out_of_time] = done[:real][out_of_time]
        if stopped is not None:
            rows = np.asarray(stopped(), np.int64)
            goal[rows] = done[rows]
        live = done[:real] < goal[:real]
        if not live.any():
            return output, rate
        rows = np.flatnonzero(live & (due <= now))
        if rows.size:
            report(output, rows)
            due[rows] = np.maximum(due[rows] + every[rows], time.monotonic() - start)


# The tree's fields indexed by node (axis 1), as the host receives them (``_Ends`` too).
_NODE_FIELDS = (
    "node_visits",
    "raw_values",
    "node_values",
    "node_scores",
    "node_score_utilities",
    "raw_score_utilities",
    "raw_score_means",
    "raw_score_stdevs",
    "node_utility_squares",
    "raw_ownership",
    "parents",
    "action_from_parent",
    "children_index",
    "children_visits",
    "children_rewards",
    "children_discounts",
    "children_values",
)


@functools.partial(jax.jit, static_argnames=("nodes",))
def _first_nodes(output: Any, nodes: int) -> Any:
    """A search output with its tree cut to its first ``nodes`` nodes."""
    tree = output.tree
    cut = {name: getattr(tree, name)[:, :nodes] for name in _NODE_FIELDS}
    ends = jax.tree.map(lambda x: x[:, :nodes], tree.embeddings)
    return output.replace(tree=tree.replace(**cut, embeddings=ends))


def _used_nodes(output: Any) -> Any:
    """``output`` (on the device) with its tree cut to the nodes in use (a power of two
    at least as many), so that a search stopped early, in a tree sized for many more
    visits, sends the host only what it grew: a node is added at most once a visit, so
    the root's visits bound them."""
    capacity = output.tree.node_visits.shape[1]
    used = int(jnp.max(output.tree.node_visits[:, 0]))
    nodes = _bucket(used, capacity)
    return output if nodes >= capacity else _first_nodes(output, nodes)


# ----------------------------------------------------------------------------
# Replies


def _round(values: Any, digits: int = 7) -> np.ndarray:
    """Values rounded to ``digits`` significant digits (float32 carries no more), NaN → 0."""
    x = np.nan_to_num(np.asarray(values, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    magnitude = np.floor(np.log10(np.maximum(np.abs(x), 1e-30)))
    scale = 10.0 ** (digits - 1 - magnitude)
    return np.round(x * scale) / scale


def _num(x: float) -> float:
    """One value with 7 significant digits (NaN and infinities → 0), cheaper than ``_round``."""
    x = float(x)
    return float(f"{x:.7g}") if math.isfinite(x) else 0.0


def _keeps_sign(report_as: str, mover: int) -> bool:
    """Whether numbers from the mover's view are already in the reported perspective."""
    return report_as == "SIDETOMOVE" or (report_as == "BLACK") == (mover == BLACK)


@dataclasses.dataclass(frozen=True)
class _Result:
    """One analysed position on the host."""

    analysis: Analysis  # the mover's view
    out: dict[str, np.ndarray]  # network outputs, row 0 the root, row 1 + i after move i
    mover: int
    searched: bool  # whether out has a row per listed move
    # [K, P] the mover's view: each listed move's subtree mean and its standard deviation
    # (``Analysis.moves_ownership``); None: one evaluation, the position's own from ``out``
    moves_ownership: np.ndarray | None = None
    moves_ownership_stdev: np.ndarray | None = None


def _wants_ownership(query: Query) -> bool:
    """Whether a search for ``query`` must keep its nodes' ownership for the root."""
    return query.include_ownership or query.include_ownership_stdev


def _wants_moves_ownership(query: Query) -> bool:
    """Whether it must also send them to the host, for each listed move's subtree."""
    return query.include_moves_ownership or query.include_moves_ownership_stdev


def _report_during_search(
    report: Callable[[int, dict], None],
    queries: list[Query],
    part: list[tuple[int, int, int]],
    row: int,
    result: _Result,
) -> None:
    """Hand ``report`` the reply of row ``row`` of a searched ``part`` ((query index,
    turn, position) triples) as it stands during the search."""
    i, turn, _ = part[row]
    report(i, _reply(queries[i], turn, result) | {"isDuringSearch": True})


def _reply(query: Query, turn: int, result: _Result) -> dict:
    """KataGo's analysis reply for one position."""
    size, mover, out = query.size, result.mover, result.out
    keep = _keeps_sign(query.report_as, mover)

    def rate(x):  # a probability from the mover's view
        return _num(x if keep else 1.0 - x)

    def points(x):  # a score (or a utility) from the mover's view
        return _num(x if keep else -x)

    infos = []
    for i, move in enumerate(result.analysis.moves):
        row = 1 + i if result.searched else 0
        lead = points(move.score_lead)
        infos.append(
            {
                "move": action_to_gtp(move.action, size),
                "visits": move.visits,
                "edgeVisits": move.visits,
                # Every visit weighs 1 here (KataGo's weights differ only with its
                # uncertainty-weighted playouts, which are off by default).
                "weight": float(move.visits),
                "edgeWeight": float(move.visits),
                "utility": points(move.utility),
                "winrate": rate(move.winrate),
                "scoreLead": lead,
                "scoreMean": lead,
                "scoreSelfplay": points(move.score_selfplay),
                "scoreStdev": _num(move.score_stdev),
                "prior": _num(move.prior),
                "lcb": rate(move.lcb),
                "utilityLcb": points(move.utility_lcb),
                **(
                    {}
                    if move.symmetry_of is None
                    else {"isSymmetryOf": action_to_gtp(move.symmetry_of, size)}
                ),
                "order": move.order,
                "pv": [action_to_gtp(a, size) for a in move.pv[: query.pv_length + 1]],
            }
        )
        if query.include_pv_visits:
            infos[-1]["pvVisits"] = list(move.pv_visits[: query.pv_length + 1])
            infos[-1]["pvEdgeVisits"] = infos[-1]["pvVisits"]  # no graph search: the same
        if query.include_no_result_value:
            infos[-1]["noResultValue"] = _num(move.no_result)
        if query.include_moves_ownership:
            means = result.moves_ownership  # the move's subtree, as KataGo's
            ownership = out["white_ownership"][row] * -mover if means is None else means[i]
            infos[-1]["ownership"] = _round(ownership if keep else -ownership).tolist()
        if query.include_moves_ownership_stdev:
            stdevs = result.moves_ownership_stdev
            # One evaluation (the network alone) has no spread.
            spread = np.zeros(size * size, np.float32) if stdevs is None else stdevs[i]
            infos[-1]["ownershipStdev"] = _round(spread).tolist()
    analysis = result.analysis
    raw_winrate = float(out["white_win"][0] + 0.5 * out["no_result"][0])
    raw_winrate = 1.0 - raw_winrate if mover == BLACK else raw_winrate
    # KataGo's short-term numbers, as kata-analyze's rootInfo (the engine loads KataGo
    # models only, which all have them).
    st_winloss_error, st_score_error, var_time_left = raw_errors(out)
    root = {
        "visits": analysis.visits,
        "weight": float(analysis.visits),
        "utility": points(analysis.utility),
        "winrate": rate(analysis.winrate),
        "scoreLead": points(analysis.score_lead),
        "scoreSelfplay": points(analysis.score_selfplay),
        "scoreStdev": _num(analysis.score_stdev),
        "currentPlayer": "B" if mover == BLACK else "W",
        "rawWinrate": rate(raw_winrate),
        "rawLead": points(float(out["white_lead"][0]) * -mover),
        "rawScoreSelfplay": points(float(out["white_score_selfplay"][0]) * -mover),
        "rawScoreSelfplayStdev": _num(out["score_stdev"][0]),
        "rawNoResultProb": _num(out["no_result"][0]),
        "rawStWrError": _num(st_winloss_error),
        "rawStScoreError": _num(st_score_error),
        "rawVarTimeLeft": _num(var_time_left),
    }
    reply = {
        "id": query.id,
        "isDuringSearch": False,
        "moveInfos": infos,
        "rootInfo": root,
        "turnNumber": turn,
    }
    if query.include_ownership:
        ownership = analysis.ownership if keep else -analysis.ownership
        reply["ownership"] = _round(ownership).tolist()
    if query.include_ownership_stdev:
        spread = analysis.ownership_stdev
        spread = np.zeros(size * size, np.float32) if spread is None else spread
        reply["ownershipStdev"] = _round(spread).tolist()
    if query.include_policy:
        policy = np.where(out["legal"][0], out["policy"][0], -1.0)
        reply["policy"] = _round(policy).tolist()
    return reply


# ----------------------------------------------------------------------------
# The engine


@dataclasses.dataclass
class _Stream:
    """How :meth:`AnalysisEngine.analyse` talks to a stream while a batch is analysed.

    Attributes:
      halted: per query, turns a terminate stopped meanwhile (``check`` adds to
        them): not searched yet, they are skipped; being searched, they stop growing.
      deferred: per query, turns left for a later batch after ``pause`` (filled in).
      report: ``(query index, reply)`` of a report during a search, or None: none.
      final: ``(query index, reply)`` of every final reply, as soon as it is made.
      check: reads what arrived (terminates) between parts of the work.
      pause: ``(priority of the next positions) -> bool``: True leaves them and
        everything after them to ``deferred`` (a more urgent query arrived).
      poll: seconds between calls of ``check`` during a search (it then runs in
        parts); inf: a search runs at once.
    """

    halted: list[set[int]]
    deferred: list[set[int]]
    report: Callable[[int, dict], None] | None = None
    final: Callable[[int, dict], None] = lambda i, reply: None
    check: Callable[[], None] = lambda: None
    pause: Callable[[int], bool] = lambda priority: False
    poll: float = math.inf

    @classmethod
    def quiet(cls, queries: int) -> _Stream:
        """No stream: nothing reported early, nothing arrives."""
        return cls([set() for _ in range(queries)], [set() for _ in range(queries)])


class AnalysisEngine:
    """Answers batches of KataGo analysis queries with one network.

    Args:
      model: a loaded ``KataGoModel`` (``gojax.katago_model.load_model``).
      symmetry: board symmetry of every network evaluation: 0..7, ``"random"``
        (one per evaluation, as KataGo does) or ``"average"`` (all 8).
      visits: the visit budget of queries that name no ``maxVisits``.
      batch_size: most positions searched or evaluated at once (and most
        queries replayed at once); batches are padded to powers of two.
      min_batch: the smallest padded batch (at most ``batch_size``): fewer
        compiled programs, at the cost of padding small batches.
      report_as: default perspective of win rates, scores and ownership.
      moves_listed: most candidate moves reported per position.
      c_puct: PUCT exploration constant of the search (``search="puct"``).
      search: ``"puct"`` (AlphaGo Zero's, through mctx) or ``"katago"`` (KataGo's
        PUCT on its utility, ``gojax.search.SearchConfig(kind="katago")``).
      score_utility: with ``search="katago"``, weigh the score as KataGo does;
        False: on the win-loss value alone.
      wide_root_noise: with ``search="katago"``, KataGo's ``wideRootNoise``
        (``SearchConfig.wide_root_noise``): None is its analysis engine's 0.04,
        which spreads the visits over more moves; 0 searches as for play. A
        query's ``overrideSettings`` may set its own.
      ignore_pre_root_history: KataGo's ``ignorePreRootHistory`` (its analysis
        engine's default, True): the network sees no move played before an
        analysed position, only those searched from it, so that a game's odd
        history does not sway its analysis; False shows the game's last moves
        as a game's own search sees them. A query's ``overrideSettings`` may
        set its own.
      root_symmetry_pruning: KataGo's ``rootSymmetryPruning`` (its analysis engine's
        default, True): at a symmetric position one move of each set of equivalent
        moves is searched and every move of the set is listed
        (``SearchConfig.root_symmetry_pruning``). A query's ``overrideSettings`` may
        set its own.
      seed: for random symmetries.
      replay_cache: most games kept after their replay, so that a query whose
        moves extend one replays only the new moves (``eval.replay_cache``);
        0 keeps none.
      root_policy_optimism, policy_optimism: how much of the optimistic policy of
        a net of model version >= 12 goes into the root's prior (and the reported
        policy) and below it; None: KataGo's 0.2 and 1.0 for such nets, 0 for
        others (``eval.players.policy_optimism``).
      max_time: seconds a search may take when its query names no ``maxTime``
        (KataGo's config ``maxTime``; inf: no limit).
      pv_length: moves of each principal variation after its first, when a query
        names no ``analysisPVLen`` (KataGo's 15).
      search_settings: ``SearchConfig`` fields every search starts from (KataGo's
        search settings of a config file, ``eval.katago_config``); a query's
        ``overrideSettings`` win.
      max_tree_visits: the most root visits one search's tree holds (its nodes are
        allocated when it is compiled, one a visit): a query asking for more (up to
        KataGo's 2^50, as KaTrain's pondering does) is searched until its tree is
        full, its ``maxTime`` is up or it is terminated.
    """

    def __init__(
        self,
        model: Any,
        *,
        symmetry: int | str = "random",
        visits: int = 64,
        batch_size: int = 256,
        min_batch: int = 1,
        report_as: str = "BLACK",
        moves_listed: int = 16,
        c_puct: float = 1.25,
        seed: int = 0,
        replay_cache: int = 1024,
        root_policy_optimism: float | None = None,
        policy_optimism: float | None = None,
        search: str = "puct",
        score_utility: bool = True,
        wide_root_noise: float | None = None,
        ignore_pre_root_history: bool = True,
        root_symmetry_pruning: bool = True,
        max_time: float = math.inf,
        pv_length: int = DEFAULT_PV_LENGTH,
        search_settings: dict[str, float] | None = None,
        max_tree_visits: int = MAX_TREE_VISITS,
    ) -> None:
        from eval.players import policy_optimism as resolve_optimism
        from eval.players import score_utility_settings
        from gojax.evaluate import check_symmetry

        if report_as not in REPORT_AS:
            raise ValueError(f"report_as must be one of {REPORT_AS}, not {report_as!r}")
        if not 1 <= visits <= MAX_VISITS:
            raise ValueError(f"visits must be in 1..{MAX_VISITS}, not {visits}")
        if batch_size < 1 or min_batch < 1 or moves_listed < 1:
            raise ValueError("batch_size, min_batch and moves_listed must be positive")
        if max_tree_visits < 1 or not 1 <= pv_length <= 1000 or not max_time >= 0:
            raise ValueError("max_tree_visits, pv_length (at most 1000) and max_time are positive")
        if replay_cache < 0:
            raise ValueError(f"replay_cache must be >= 0, not {replay_cache}")
        if search not in ("puct", "katago"):
            raise ValueError(f"search must be 'puct' or 'katago', not {search!r}")
        self.search = search
        if wide_root_noise is None:  # KataGo's analysis engine's default
            wide_root_noise = ANALYSIS_WIDE_ROOT_NOISE if search == "katago" else 0.0
        if wide_root_noise and search != "katago":
            raise ValueError("wide root noise needs the KataGo search (--search katago)")
        self.wide_root_noise = float(wide_root_noise)
        self.ignore_pre_root_history = bool(ignore_pre_root_history)
        # The SearchConfig fields every query's search starts from (a query's
        # overrideSettings win).
        self._search_settings = score_utility_settings(search, score_utility)
        self._search_settings["root_symmetry_pruning"] = bool(root_symmetry_pruning)
        if search == "katago":
            self._search_settings["wide_root_noise"] = self.wide_root_noise
        self._search_settings.update(search_settings or {})
        self.max_time = float(max_time)
        self.pv_length = int(pv_length)
        self.max_tree_visits = int(max_tree_visits)
        # The notices an engine gives once, to the first query that earns them
        # (``analysis_query.said_once``): the settings it does not honour, the rules
        # it replaces by the nearest preset.
        self._said: set[str] = set()
        self.model = model
        self.symmetry = check_symmetry(symmetry)
        self.visits = int(visits)
        self.batch_size = int(batch_size)
        self.min_batch = min(int(min_batch), self.batch_size)
        self.report_as = report_as
        self.moves_listed = int(moves_listed)
        self.c_puct = float(c_puct)
        self._key = jax.random.key(seed)
        self._calls = 0
        self.optimism = resolve_optimism(model, root_policy_optimism, policy_optimism)
        self._search, self._evaluate = _device_functions(model, self.symmetry, self.optimism)
        self._replays = ReplayCache(replay_cache)
        # Visits a second of the last search run in parts, by its shape (batch, visits,
        # ownership kept): the next one's first part is sized from it, not measured.
        self._speeds: dict[tuple, float] = {}
        # Queries (their turns not yet analysed) a paused batch left for the next one.
        self.carried: list[Query] = []

    def warm_up(self, boards: Iterable[tuple[int, str]], visits: int | None = None) -> None:
        """Compile ahead the programs a client's first queries need, so that they are
        answered within their time limits (``maxTime`` counts compilation): for each
        ``(size, rules)`` (rules: any KataGo name), a query of ``visits`` root visits (the
        engine's default) on the empty board with ``includeOwnership`` and
        ``includeMovesOwnership`` (KaTrain's), searched in parts as a stream's searches
        are, stopped after its second part. Queries of the same size, rules, tree size and
        ownership then compile nothing; their batch sizes (powers of two) may."""
        for size, rules in boards:
            request = {"id": "warm-up", "moves": [], "rules": rules, "boardXSize": size,
                       "boardYSize": size, "maxVisits": visits or self.visits,
                       "includeOwnership": True, "includeMovesOwnership": True}  # fmt: skip
            query, _ = parse_query(request, visits=self.visits, report_as=self.report_as)
            stream = _Stream.quiet(1)
            looks: list[int] = []

            def check(stream: _Stream = stream, looks: list[int] = looks) -> None:
                looks.append(1)  # before the search, after its first part, after its second
                if len(looks) >= 3:
                    stream.halted[0].add(0)  # the empty board's turn

            stream.check, stream.poll = check, 0.0  # parts of the least visits
            self.analyse([query], stream)

    def _next_key(self) -> jax.Array:
        self._calls += 1
        return jax.random.fold_in(self._key, self._calls)

    # -- one batch of lines ----------------------------------------------------

    def handle(
        self,
        lines: Iterable[str],
        emit: Callable[[dict], None] | None = None,
        incoming: Any = None,
    ) -> list[dict]:
        """Replies to a batch of query lines. All queries of the batch are analysed
        together, higher ``priority`` first.

        Without ``emit`` they are returned in the order of the lines: the errors and
        warnings about a line, then its query's reports during the search
        (``reportDuringSearchEvery``) and results by turn.

        With ``emit`` (a stream, as ``serve`` answers stdin) every reply goes to
        ``emit`` as soon as it is made, and nothing is returned: first the replies
        to the lines themselves (errors, warnings, actions), then each result as its
        search ends and each report when due, last the ``noResults`` of terminated
        turns -- as KataGo answers, in the order the work finishes.

        ``incoming`` (the stream's :class:`_LineReader`: ``take_ready``,
        ``give_back``, ``live``) is read between the parts of the batch's work.
        ``terminate`` actions act at once: a turn not yet searched gets KataGo's
        ``noResults`` reply, one being searched stops growing within about
        ``_TERMINATE_POLL`` seconds (its search runs in parts) and replies with what
        it has; their echoes go to ``emit`` (else after the results). Other lines
        wait for the next batch; with ``emit``, a query line among them with a higher
        priority than the work left pauses the batch: the turns not yet searched are
        carried over to the next call (:attr:`carried`), which analyses them with
        that call's lines, in priority order.
        """
        entries: list[tuple[list[dict], int | None]] = []  # replies, index into pending
        # Turns carried over from a paused batch come first: earlier, they win ties.
        pending: list[Query] = list(self.carried)
        cancelled: list[set[int]] = [set() for _ in pending]  # per query: turns terminated
        entries += [([], i) for i in range(len(pending))]
        self.carried = []
        for line in lines:
            if not line.strip():
                continue
            replies, query = self._parse_line(line, pending, cancelled)
            if query is None:
                entries.append((replies, None))
                continue
            entries.append((replies, len(pending)))
            pending.append(query)
            cancelled.append(set())
        live = [
            (i, dataclasses.replace(q, turns=tuple(t for t in q.turns if t not in cancelled[i])))
            for i, q in enumerate(pending)
        ]
        live = [(i, q) for i, q in live if q.turns]
        streaming = emit is not None
        if streaming:
            for replies, _ in entries:
                for reply in replies:
                    emit(reply)
        during: dict[int, list[dict]] = defaultdict(list)  # pending index -> reports
        sent: set[int] = set()  # id() of the results emitted as they were made
        echoes: list[dict] = []
        urgent: list[int] = []  # the priorities of query lines that arrived meanwhile

        def report(k: int, reply: dict) -> None:
            if streaming:
                emit(reply)
            else:
                during[live[k][0]].append(reply)

        def final(k: int, reply: dict) -> None:
            if streaming:
                emit(reply)
                sent.add(id(reply))

        def check() -> None:
            if incoming is None:
                return
            later = []
            for line in incoming.take_ready():
                request = _terminate_request(line)
                if request is None:
                    later.append(line)
                    urgent.append(_line_priority(line))
                    continue
                echo = self._action(request, [q for _, q in live], stream.halted)
                if streaming:
                    emit(echo)
                else:
                    echoes.append(echo)
            incoming.give_back(later)

        stream = _Stream.quiet(len(live))
        stream.report, stream.final, stream.check = report, final, check
        if streaming:  # without a stream every reply is awaited: nothing can wait
            stream.pause = lambda priority: max(urgent, default=priority) > priority
        # While lines may still arrive, searches run in parts to look for terminates.
        stream.poll = _TERMINATE_POLL if getattr(incoming, "live", False) else math.inf
        try:
            results = self.analyse([q for _, q in live], stream)
        except Exception as err:  # a failure of the device must not end the stream
            traceback.print_exc(file=sys.stderr)
            message = f"analysis failed: {type(err).__name__}: {err}".splitlines()[0]
            results = [[{"error": message, "id": q.id}] for _, q in live]
            stream.deferred = [set() for _ in live]
        for (_, query), turns in zip(live, stream.deferred, strict=True):
            if turns:
                self.carried.append(dataclasses.replace(query, turns=tuple(sorted(turns))))
        analysed = dict(zip([i for i, _ in live], results, strict=True))
        halted_by_index = dict(zip([i for i, _ in live], stream.halted, strict=True))
        deferred_by_index = dict(zip([i for i, _ in live], stream.deferred, strict=True))
        out = []
        for replies, index in entries:
            if not streaming:
                out.extend(replies)
            if index is None:
                continue
            out.extend(during.pop(index, []))
            query, results = pending[index], analysed.get(index, [])
            if any("error" in r for r in results):
                out.extend(results)
                continue
            by_turn = {r["turnNumber"]: r for r in results}
            for turn in query.turns:
                if turn in deferred_by_index.get(index, ()):
                    continue  # carried over: answered by a later call
                never = turn not in by_turn and turn in halted_by_index.get(index, ())
                if turn in cancelled[index] or never:
                    stopped = {"id": query.id, "isDuringSearch": False, "noResults": True}
                    out.append(stopped | {"turnNumber": turn})
                else:
                    out.append(by_turn[turn])
        if streaming:  # what is left: noResults, or errors of a failed batch
            for reply in out:
                if id(reply) not in sent:
                    emit(reply)
            return []
        return out + echoes

    def _parse_line(
        self, line: str, pending: list[Query], cancelled: list[set[int]]
    ) -> tuple[list[dict], Query | None]:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            text = line.rstrip("\n")
            return [{"error": f"could not parse input line as json request: {text}"}], None
        if not isinstance(request, dict):
            text = line.strip()
            return [{"error": f"Request line was valid json but was not an object: {text}"}], None
        ident = request.get("id")
        if not isinstance(ident, str):
            return [{"error": 'Request must have a string "id" field'}], None
        if "action" in request:
            return [self._action(request, pending, cancelled)], None
        try:
            query, warnings = parse_query(
                request, visits=self.visits, report_as=self.report_as, pv_length=self.pv_length
            )
        except QueryError as err:
            return [{"error": err.message, "field": err.field, "id": ident}], None
        query, dropped = without_foreign_settings(request, query, self.search)
        warnings.extend(dropped)
        replies = []
        for field, warning in warnings:
            if said_once(field, warning):
                if warning in self._said:
                    continue
                self._said.add(warning)
                print(f"gojax analysis: {field}: {warning}", file=sys.stderr, flush=True)
            replies.append({"field": field, "id": ident, "warning": warning})
        return replies, query

    def _action(self, request: dict, pending: list[Query], cancelled: list[set[int]]) -> dict:
        """The special actions: ``query_version``, ``query_models``, ``clear_cache``,
        ``terminate`` and ``terminate_all``."""
        action, ident = request["action"], request["id"]
        if action == "query_version":
            return request | {"version": _version(), "git_hash": "<omitted>"}
        if action == "query_models":
            return request | {"models": [model_info(self.model, max_batch_size=self.batch_size)]}
        if action == "clear_cache":  # evaluations are not cached; replayed games are
            self._replays.clear()
            return request
        if action in ("terminate", "terminate_all"):
            target = request.get("terminateId")
            if action == "terminate" and not isinstance(target, str):
                return {
                    "error": 'A terminate action needs a string "terminateId" field',
                    "field": "terminateId",
                    "id": ident,
                }
            turns = request.get("turnNumbers")
            if turns is not None and not (
                isinstance(turns, list)
                and all(isinstance(t, int) and not isinstance(t, bool) for t in turns)
            ):
                return {
                    "error": "Must be an array of integers indicating turns to terminate",
                    "field": "turnNumbers",
                    "id": ident,
                }
            for query, stopped in zip(pending, cancelled, strict=True):
                if action == "terminate_all" or query.id == target:
                    stopped.update(t for t in query.turns if turns is None or t in turns)
            return request
        return {
            "error": "'action' field must be 'query_version' or 'query_models' or "
            "'clear_cache' or 'terminate' or 'terminate_all'",
            "field": "action",
            "id": ident,
        }

    # -- analysis ----------------------------------------------------------------

    def analyse(self, queries: list[Query], stream: _Stream | None = None) -> list[list[dict]]:
        """Analyse every requested turn of ``queries``; per query its replies by turn,
        or one error reply (an illegal move). ``stream``:
        how the work talks to a stream as it goes (reports, results as made,
        terminates, pausing for new work; :class:`_Stream`).

        Queries of one board size, rule set and move cap are replayed together
        (``batch_size`` at a time); the positions of each replay with the same
        visit budget are searched together (``batch_size`` at a time). Higher
        priorities (``Query.priority``) go first: the queries are replayed in the
        order of their highest, and the positions of a replay searched in the order
        of theirs (ties: the earlier query, the earlier turn).
        """
        stream = stream or _Stream.quiet(len(queries))
        replies: list[list[dict]] = [[] for _ in queries]
        paused = False

        def priority(item: tuple[int, int, int]) -> int:  # (query, turn, state index)
            return queries[item[0]].priority(item[1])

        def defer(items: Iterable[tuple[int, int]]) -> None:
            for i, turn in items:
                stream.deferred[i].add(turn)

        highest = [max(map(q.priority, q.turns)) for q in queries]
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i in sorted(range(len(queries)), key=lambda i: -highest[i]):  # stable: ties kept
            query = queries[i]
            groups[(query.size, query.rules, query.max_moves)].append(i)
        for (size, rules, max_moves), members in groups.items():
            for chunk in _chunks(members, self.batch_size):
                if paused:  # not even replayed
                    defer((i, turn) for i in chunk for turn in queries[i].turns)
                    continue
                kept, failures, firsts = self._replay_chunk(
                    [queries[i] for i in chunk], size, rules, max_moves
                )
                # Positions searched alike: the same budget and search settings.
                alike: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
                for i, failure, first in zip(chunk, failures, firsts, strict=True):
                    if failure is not None:
                        replies[i] = [failure]
                        stream.final(i, failure)
                        continue
                    # Searched in a tree of a power of two nodes (fewer programs); beyond
                    # what a tree holds, the search goes on until it is full.
                    nodes = self._tree_size(queries[i].visits)
                    for k, turn in enumerate(queries[i].turns):
                        how = (nodes, queries[i].search)
                        alike[how].append((i, turn, first + k))
                ordered = sorted(alike.items(), key=lambda kv: (-max(map(priority, kv[1])), kv[0]))
                for (nodes, search), items in ordered:
                    items.sort(key=lambda item: -priority(item))
                    for part in _chunks(items, self.batch_size):
                        stream.check()
                        part = [item for item in part if item[1] not in stream.halted[item[0]]]
                        if part and not paused:
                            paused = stream.pause(priority(part[0]))
                        if paused:
                            defer((i, turn) for i, turn, _ in part)
                        if paused or not part:
                            continue
                        results = self._search_part(
                            queries, kept, part, nodes, stream, dict(search)
                        )
                        for (i, turn, _), result in zip(part, results, strict=True):
                            replies[i].append(_reply(queries[i], turn, result))
                            stream.final(i, replies[i][-1])
        for reply in replies:  # by turn, whatever order they were searched in
            reply.sort(key=lambda r: r.get("turnNumber", -1))
        return replies

    def _search_part(
        self,
        queries: list[Query],
        kept: GoState,
        part: list[tuple[int, int, int]],
        nodes: int,
        stream: _Stream,
        search: dict[str, float],
    ) -> list[_Result]:
        """The results of the positions ``part`` (query, turn, index into ``kept``),
        searched together in trees of ``nodes`` nodes (``_tree_size``), each to its
        query's visits (at most ``nodes``), with the ``SearchConfig`` fields ``search``
        (``Query.search``)."""

        def stopped() -> list[int]:
            stream.check()
            return [r for r, (i, t, _) in enumerate(part) if t in stream.halted[i]]

        return self._analyse_positions(
            kept,
            [index for _, _, index in part],
            nodes,
            [queries[i].pv_length for i, _, _ in part],
            [queries[i].avoid for i, _, _ in part],
            ownership=any(_wants_ownership(queries[i]) for i, _, _ in part),
            moves_ownership=any(_wants_moves_ownership(queries[i]) for i, _, _ in part),
            reports=[queries[i].reports for i, _, _ in part],
            limits=[self._time_limit(queries[i]) for i, _, _ in part],
            stopped=stopped,
            poll=stream.poll,
            search=search,
            forget=[self._forgets(queries[i]) for i, _, _ in part],
            goals=[min(queries[i].visits, nodes) for i, _, _ in part],
            on_report=None
            if stream.report is None
            else functools.partial(_report_during_search, stream.report, queries, part),
        )

    def _tree_size(self, visits: int) -> int:
        """The nodes of the tree a search of ``visits`` root visits runs in: the power of
        two at least ``visits`` (queries of 100 and 120 visits share one compiled search
        and one batch, each stopping at its own), at most ``max_tree_visits``; 1 is the
        network alone, no tree."""
        return 1 if visits == 1 else min(_bucket(visits), self.max_tree_visits)

    def _time_limit(self, query: Query) -> float:
        """Seconds ``query``'s positions may be searched: its ``maxTime``, else the
        engine's."""
        return query.max_time if math.isfinite(query.max_time) else self.max_time

    def _forgets(self, query: Query) -> bool:
        """Whether ``query``'s positions are searched with their past moves unknown."""
        if query.ignore_history is None:
            return self.ignore_pre_root_history
        return query.ignore_history

    def _replay_chunk(
        self, queries: list[Query], size: int, rules: str, max_moves: int
    ) -> tuple[GoState, list[dict | None], list[int]]:
        """Replay up to ``batch_size`` games on the device, each from the longest game
        of the replay cache its moves extend (before its first requested turn).

        Returns the kept positions ``[S]``, per query an error reply or None,
        and per query the index in ``kept`` of its first turn (the others follow).
        """
        games = _bucket(len(queries), smallest=self.min_batch)
        offsets = np.cumsum([0] + [len(q.turns) for q in queries])
        positions = _bucket(int(offsets[-1]), smallest=self.min_batch)
        template = _host_template(size, rules, max_moves)
        keys = [(_game_key(q), moves_key(q.colours, q.actions)) for q in queries]
        starts, resumed = [], [template] * games
        for j, (query, (game, moves)) in enumerate(zip(queries, keys, strict=True)):
            start, state = self._replays.longest(game, moves, min(query.turns))
            starts.append(start)
            if state is not None:
                resumed[j] = state
        # Step k of game j plays its move starts[j] + k; the last step only keeps.
        remaining = [len(q.actions) - start for q, start in zip(queries, starts, strict=True)]
        steps = _replay_steps(max(remaining) + 1)
        points = size * size
        setup = np.zeros((games, points), np.int8)
        first = np.full(games, BLACK, np.int8)
        komi = np.zeros(games, np.float32)
        colours = np.full((games, steps), BLACK, np.int8)
        actions = np.full((games, steps), points, np.int32)
        lengths = np.zeros(games, np.int32)
        use_resumed = np.zeros(games, bool)
        targets = np.full((games, steps), positions, np.int32)  # past the end: keep nothing
        for j, (query, start) in enumerate(zip(queries, starts, strict=True)):
            n = len(query.actions) - start
            setup[j], first[j], komi[j], lengths[j] = query.setup, query.first_player, query.komi, n
            colours[j, :n], actions[j, :n] = query.colours[start:], query.actions[start:]
            targets[j, np.asarray(query.turns) - start] = offsets[j] + np.arange(len(query.turns))
            use_resumed[j] = start > 0
        resumed = jax.tree.map(lambda *rows: np.stack(rows), *resumed)
        states, kept = _replay_start(setup, first, komi, resumed, use_resumed, positions=positions)
        illegal = jnp.full((games,), -1, jnp.int32)
        komi = jnp.asarray(komi)
        lengths = jnp.asarray(lengths)
        for part in _segments(steps):
            turns = np.arange(part.start, part.stop, dtype=np.int32)
            states, kept, illegal = _replay_segment(
                states,
                kept,
                illegal,
                komi,
                colours[:, part],
                actions[:, part],
                turns,
                lengths,
                targets[:, part],
            )
        illegal = np.asarray(illegal)
        failures: list[dict | None] = []
        for j, query in enumerate(queries):
            if illegal[j] >= 0:
                t = int(illegal[j]) + starts[j]
                vertex = action_to_gtp(int(query.actions[t]), size)
                failures.append(
                    {"error": f"Illegal move {t}: {vertex}", "field": "moves", "id": query.id}
                )
            else:
                failures.append(None)
        if self._replays.capacity:
            final = jax.device_get(states)
            for j, failure in enumerate(failures):
                if failure is None:
                    self._replays.put(*keys[j], jax.tree.map(lambda x, j=j: x[j].copy(), final))
        return kept, failures, [int(x) for x in offsets[:-1]]

    def _analyse_positions(
        self,
        states: GoState,
        index: list[int],
        visits: int,
        pv_lengths: list[int],
        avoids: list[np.ndarray | None],
        ownership: bool = False,
        moves_ownership: bool = False,
        reports: list[tuple[float, float] | None] | None = None,
        on_report: Callable[[int, _Result], None] | None = None,
        limits: list[float] | None = None,
        stopped: Callable[[], list[int]] | None = None,
        poll: float = math.inf,
        search: dict[str, float] | None = None,
        forget: list[bool] | None = None,
        goals: list[int] | None = None,
    ) -> list[_Result]:
        """Search (or, at one visit, evaluate) the positions ``states[index]`` in one batch,
        each with the moves its query keeps out (``Query.avoid``; None: none); with
        ``ownership`` the search keeps every node's ownership for the root's tree mean,
        with ``moves_ownership`` for each listed move's subtree mean too.

        ``reports`` (per position, ``Query.reports``) asks for results during the search:
        ``on_report(i, result)`` gets position ``i``'s as it stands when one is due.
        ``limits`` (per position, ``Query.max_time``): seconds after which a position's
        search stops growing (its result has the visits it reached); so does, in a search
        run in parts, every position ``stopped()`` names between parts. A finite ``poll``
        runs the search in parts of about that many seconds even without reports or
        limits, so that ``stopped()`` is asked that often. ``search``: ``SearchConfig``
        fields over the engine's (the KataGo search's settings a query set). ``forget``
        (per position): search it with its past moves unknown (KataGo's
        ``ignorePreRootHistory``; ``gojax.katago_features.forget_history``). ``goals``
        (per position): the root visits its search stops at, at most ``visits`` (the
        tree's size; default: ``visits``)."""
        n = len(index)
        goals = list(goals or [visits] * n)
        batch = _bucket(n, self.batch_size, smallest=self.min_batch)
        roots = _take(states, np.asarray(index + [index[0]] * (batch - n), np.int32))
        if forget is not None and any(forget):
            roots = _forget_history(roots, jnp.asarray(forget + [forget[0]] * (batch - n)))
        movers = [int(m) for m in np.asarray(roots.to_play)[:n]]
        key_search, key_eval = jax.random.split(self._next_key())
        if visits == 1:
            allowed = [root_moves(a, m) for a, m in zip(avoids, movers, strict=True)]
            return self._evaluated(roots, movers, key_eval, allowed)
        avoid = np.zeros((batch, 2, roots.num_actions), np.int32)
        for i, plies in enumerate(avoids):
            if plies is not None:
                avoid[i] = plies
        from gojax.search import SearchConfig

        config = SearchConfig(
            kind=self.search,
            num_simulations=visits - 1,
            pb_c_init=self.c_puct,
            dirichlet_fraction=0.0,
            temperature_moves=0,
            **(self._search_settings | (search or {})),
        )
        search = functools.partial(
            self._search,
            self.model.variables,
            roots,
            config=config,
            avoid=jnp.asarray(avoid),
            ownership=ownership or moves_ownership,
            keep_nodes=moves_ownership,
        )

        def results(searched: Any, rows: Iterable[int]) -> list[_Result]:
            return self._searched_results(
                searched, roots, movers, rows, visits, pv_lengths, moves_ownership, key_eval
            )

        # Per position: when to report, (first, every), and when to stop; inf: never.
        schedule = [r if r and on_report else (math.inf, math.inf) for r in reports or [None] * n]
        limits = list(limits or [math.inf] * n)
        parted = math.isfinite(poll) or not all(map(math.isinf, limits))
        if not parted and all(math.isinf(first) for first, _ in schedule):
            if all(goal == visits for goal in goals):
                searched, _ = search(key_search)
            else:  # padding rows: no simulations
                stop_at = np.asarray(goals + [1] * (batch - n), np.int32)
                searched, _ = search(key_search, stop_at=jnp.asarray(stop_at))
        else:

            def report(searched: Any, rows: np.ndarray) -> None:
                for i, result in zip(rows, results(searched, rows), strict=True):
                    on_report(int(i), result)

            shape = (batch, visits, ownership, moves_ownership)
            searched, self._speeds[shape] = _search_in_parts(
                search,
                key_search,
                goals,
                batch,
                schedule,
                limits,
                report,
                stopped,
                poll,
                self._speeds.get(shape),
            )
        return results(searched, range(n))

    def _searched_results(
        self,
        searched: Any,
        roots: GoState,
        movers: list[int],
        rows: Iterable[int],
        visits: int,
        pv_lengths: list[int],
        moves_ownership: bool,
        key: jax.Array,
    ) -> list[_Result]:
        """The host's results for positions ``rows`` of a search output (on the device):
        its listed moves, each with the network's outputs after it."""
        host = jax.device_get(_used_nodes(searched))
        listed_count = min(self.moves_listed, visits - 1)
        listed = {i: listed_actions(host, i, listed_count) for i in rows}
        # Positions after the listed moves, for their scores (pass pads short lists).
        children = np.full((roots.to_play.shape[0], listed_count), roots.num_actions - 1, np.int32)
        for i, moves in listed.items():
            children[i, : len(moves)] = moves
        out = self._evaluate(self.model.variables, roots, jnp.asarray(children), key)
        out = jax.device_get(out)
        results = []
        for i, moves in listed.items():
            row = {k: v[i] for k, v in out.items()}
            analysis = search_analysis(host, i, moves, row, movers[i], pv_length=pv_lengths[i] + 1)
            means = stdevs = None
            if moves_ownership:
                means, stdevs = analysis.moves_ownership()
            results.append(
                _Result(
                    analysis,
                    row,
                    movers[i],
                    searched=True,
                    moves_ownership=means,
                    moves_ownership_stdev=stdevs,
                )
            )
        return results

    def _evaluated(
        self, roots: GoState, movers: list[int], key: jax.Array, allowed: list
    ) -> list[_Result]:
        """One network evaluation of each root: the policy's moves with the root's numbers,
        among each root's ``allowed`` moves (``players.root_moves``; None: all)."""
        none = jnp.zeros((roots.to_play.shape[0], 0), jnp.int32)
        out = jax.device_get(self._evaluate(self.model.variables, roots, none, key))
        results = []
        for i, mover in enumerate(movers):
            row = {k: v[i] for k, v in out.items()}
            white = float(row["white_win"][0] + 0.5 * row["no_result"][0])
            analysis = _policy_analysis(
                row["policy"][0],
                row["legal"][0],
                white if mover == WHITE else 1.0 - white,
                float(row["white_lead"][0]) * -mover,
                float(row["score_stdev"][0]),
                (row["white_ownership"][0] * -mover).astype(np.float32),
                max_moves=self.moves_listed,
                allowed=allowed[i],
                no_result=float(row["no_result"][0]),
                score_selfplay=float(row["white_score_selfplay"][0]) * -mover,
            )
            results.append(_Result(analysis, row, mover, searched=False))
        return results

    # -- the stream ----------------------------------------------------------------

    def serve(self, stdin: TextIO, stdout: TextIO) -> None:
        """Answer queries until stdin ends: each batch is every line already waiting."""
        reader = _LineReader(stdin)

        def emit(reply: dict) -> None:  # every reply is seen as soon as it is made
            stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
            stdout.flush()

        while True:
            # With work carried over from a paused batch, take what has arrived, no wait.
            lines = reader.batch(self.batch_size, wait=not self.carried)
            if lines is None and not self.carried:
                return
            self.handle(lines or [], emit, reader)


def _terminate_request(line: str) -> dict | None:
    """``line`` as a request if it is a ``terminate`` or ``terminate_all`` action."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if (
        isinstance(request, dict)
        and isinstance(request.get("id"), str)
        and request.get("action") in ("terminate", "terminate_all")
    ):
        return request
    return None


def _line_priority(line: str) -> int:
    """The highest priority a query line asks for (``priority``, ``priorities``;
    KataGo's default 0, also for a line that is not a valid query: its error is quick)."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return 0
    if not isinstance(request, dict) or "action" in request:
        return 0
    values = request.get("priorities")
    values = values if isinstance(values, list) and values else [request.get("priority", 0)]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(numbers, default=0)


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gojax")
    except PackageNotFoundError:
        return "unknown"


class _LineReader:
    """Reads lines from a stream in batches: one line (waiting for it), then every
    further complete line that is already available, without blocking."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            self._fd = None  # an in-memory stream: everything in it is available
        self._buffer = b""
        self._eof = False
        self._unread: list[str] = []  # lines handed back, read before any other

    def _fill(self) -> None:
        data = os.read(self._fd, 1 << 16)
        if data:
            self._buffer += data
        else:
            self._eof = True

    def _ready(self) -> bool:
        return bool(select.select([self._fd], [], [], 0)[0])

    def _take(self, limit: int) -> list[str]:
        lines = []
        while len(lines) < limit and b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            lines.append(line.decode("utf-8", errors="replace"))
        return lines

    @property
    def live(self) -> bool:
        """Whether lines may still arrive while a batch is analysed (a pipe or a terminal
        not at its end; an in-memory stream has all its lines already)."""
        return self._fd is not None and not self._eof

    def take_ready(self) -> list[str]:
        """Every complete line available now, without waiting ([] for an in-memory
        stream: everything in it is the next batches')."""
        if self._fd is None:
            return []
        while not self._eof and self._ready():
            self._fill()
        return self._take(len(self._buffer) + 1)

    def give_back(self, lines: list[str]) -> None:
        """Lines taken early (``take_ready``) for the next batches, in their order."""
        self._unread = list(lines) + self._unread

    def batch(self, limit: int, wait: bool = True) -> list[str] | None:
        """Up to ``limit`` lines, or None when the stream has ended; without ``wait``
        only those already available (maybe none)."""
        lines, self._unread = self._unread[:limit], self._unread[limit:]
        if self._fd is None:
            while len(lines) < limit:
                line = self._stream.readline()
                if not line:
                    break
                lines.append(line)
            return lines or None
        lines += self._take(limit - len(lines))
        while wait and not lines and not self._eof:
            self._fill()
            lines = self._take(limit)
        while len(lines) < limit and not self._eof and self._ready():
            self._fill()
            lines += self._take(limit - len(lines))
        if not lines and self._eof:
            rest, self._buffer = self._buffer, b""
            return [rest.decode("utf-8", errors="replace")] if rest.strip() else None
        return lines


# ----------------------------------------------------------------------------
# Command line: gojax analysis


# AnalysisEngine's options that a flag sets too: a config's key sets one only where its
# flag was left at its default.
_FLAGS_OF_OPTIONS = {
    "visits": "visits_default",
    "report_as": "report_as",
    "wide_root_noise": "wide_root_noise",
    "ignore_pre_root_history": "pre_root_history",
    "root_symmetry_pruning": "no_root_symmetry_pruning",
}


def _katago_form(args: argparse.Namespace, options: dict[str, Any]) -> str | None:
    """Fold KataGo's command line (``-config``, ``-override-config``, ...) into the
    engine's ``options``: a config key sets an option whose flag was left at its default
    (a flag given wins). Returns the one stderr line naming what gojax does not use."""
    from eval import katago_config

    overrides = getattr(args, "katago_overrides", None) or []
    config = getattr(args, "config", None)
    mapped = katago_config.analysis_options(
        katago_config.read_settings(config, overrides), args.search, bool(config)
    )
    defaults = getattr(args, "flag_defaults", {})
    for name, value in mapped.options.items():
        flag = _FLAGS_OF_OPTIONS.get(name)
        if flag is None or getattr(args, flag) == defaults.get(flag, getattr(args, flag)):
            options[name] = value
    if getattr(args, "analysis_threads", None) is not None:
        mapped.no_effect.append("-analysis-threads")
    if getattr(args, "quit_without_waiting", False):
        mapped.not_supported("-quit-without-waiting", "queued queries are answered")
    if getattr(args, "human_model", None):
        mapped.not_supported("-human-model", "no human SL model")
    return katago_config.ignored_line("analysis", config, mapped)


def cmd_analysis(args: argparse.Namespace) -> int:
    from gojax.katago_model import load_model

    if args.search == "katago" and args.c_puct != 1.25:
        raise ValueError("--c-puct is the PUCT search's: add --search puct")
    options: dict[str, Any] = dict(
        symmetry=args.symmetry,
        visits=args.visits_default,
        batch_size=args.batch_size,
        min_batch=args.min_batch,
        report_as=args.report_as,
        moves_listed=args.moves_listed,
        c_puct=args.c_puct,
        seed=args.seed,
        replay_cache=args.replay_cache,
        root_policy_optimism=args.root_policy_optimism,
        policy_optimism=args.policy_optimism,
        search=args.search,
        score_utility=not args.no_score_utility,
        wide_root_noise=args.wide_root_noise,
        ignore_pre_root_history=not args.pre_root_history,
        root_symmetry_pruning=not args.no_root_symmetry_pruning,
        max_tree_visits=getattr(args, "max_tree_visits", MAX_TREE_VISITS),
    )
    katago_flags = ("config", "katago_overrides", "analysis_threads", "human_model")
    ignored = None
    if any(getattr(args, flag, None) for flag in katago_flags):
        ignored = _katago_form(args, options)
    model = load_model(args.model)
    engine = AnalysisEngine(model, **options)
    if ignored:
        print(ignored, file=sys.stderr, flush=True)
    engine.warm_up(getattr(args, "warm_up", None) or [])
    noise = f" (wide root noise {engine.wide_root_noise:g})" if args.search == "katago" else ""
    print(
        f"gojax analysis: {model.name}{optimism_label(engine.optimism)}, {args.search} search"
        f"{noise}, "
        f"{engine.visits} visits by default, batches of up to {args.batch_size}; ready",
        file=sys.stderr,
        flush=True,
    )
    engine.serve(sys.stdin, sys.stdout)
    return 0


def register(commands) -> None:
    """Add ``analysis`` to the ``gojax`` subcommands (``commands`` from ``add_subparsers``)."""
    from eval import gtp_params
    from eval.arguments import non_negative, positive, symmetry_arg
    from eval.gtp import add_policy_optimism_arguments

    def visits(text: str) -> int:
        value = positive(text)
        if value > MAX_VISITS:
            raise argparse.ArgumentTypeError(f"must be at most {MAX_VISITS}, got {text}")
        return value

    def boards(text: str) -> list[tuple[int, str]]:  # --warm-up's SIZE[:RULES],...
        from eval.analysis_query import parse_rules

        chosen = []
        for entry in filter(None, (e.strip() for e in text.split(","))):
            size, _, rules = entry.partition(":")
            try:
                parse_rules(rules or "chinese")
                number = int(size)
            except (QueryError, ValueError):
                number = 0
            if not 2 <= number <= 25:
                raise argparse.ArgumentTypeError(f"expected SIZE[:RULES],..., got {entry!r}")
            chosen.append((number, rules or "chinese"))
        return chosen

    def wide_root_noise(text: str) -> float:  # as gtp's wideRootNoise reads it
        try:
            return gtp_params.PARAMS["wideRootNoise"].parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"must be {error}") from None

    parser = commands.add_parser(
        "analysis", help="KataGo's JSON analysis engine: batched queries on stdin, JSON on stdout"
    )
    parser.add_argument("--model", "-model", required=True, help="a KataGo model file (.bin.gz)")
    from eval.katago_config import add_katago_arguments

    add_katago_arguments(parser)
    parser.add_argument(
        "-analysis-threads",
        dest="analysis_threads",
        type=int,
        default=None,
        metavar="N",
        help="KataGo's: positions searched at once by threads (no effect: every query "
        "waiting is batched, --batch-size)",
    )
    parser.add_argument(
        "-quit-without-waiting",
        dest="quit_without_waiting",
        action="store_true",
        help="KataGo's (not supported: queries read before stdin ends are answered)",
    )
    parser.add_argument(
        "--visits-default",
        type=visits,
        default=64,
        metavar="N",
        help="visits when a query gives no maxVisits (default 64)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive,
        default=256,
        help="most queries read and positions searched at once (default 256)",
    )
    parser.add_argument(
        "--min-batch",
        type=positive,
        default=1,
        help="pad every batch to at least this many positions (fewer compiled programs)",
    )
    parser.add_argument(
        "--symmetry",
        type=symmetry_arg,
        default="random",
        help="0..7, random or average (default: a random symmetry per evaluation)",
    )
    parser.add_argument(
        "--report-as",
        choices=REPORT_AS,
        type=str.upper,
        default="BLACK",
        help="perspective of win rates, scores and ownership (KataGo's "
        "reportAnalysisWinratesAs; default BLACK)",
    )
    parser.add_argument(
        "--moves-listed", type=positive, default=16, help="most moves reported per position"
    )
    parser.add_argument(
        "--c-puct", type=float, default=1.25, help="PUCT exploration constant (--search puct)"
    )
    parser.add_argument(
        "--search",
        choices=("puct", "katago"),
        default="katago",
        help="katago (default: KataGo's PUCT on its utility, the win-loss value plus a "
        "score term, with its analysis engine's wide root noise) or puct (AlphaGo Zero's)",
    )
    parser.add_argument(
        "--no-score-utility",
        action="store_true",
        help="--search katago: search on the win-loss value alone",
    )
    parser.add_argument(
        "--no-root-symmetry-pruning",
        action="store_true",
        help="search every move at a symmetric position (by default, as KataGo's "
        "rootSymmetryPruning, one of each set of equivalent moves is searched and all "
        "are listed); a query's overrideSettings may set its own",
    )
    parser.add_argument(
        "--wide-root-noise",
        type=wide_root_noise,
        default=None,
        metavar="W",
        help="--search katago: KataGo's wideRootNoise, 0 to 5 (default 0.04, as KataGo's "
        "analysis engine: the visits spread over more moves; 0 searches as for play)",
    )
    parser.add_argument(
        "--pre-root-history",
        action="store_true",
        help="let the network see the moves played before each analysed position (KataGo's "
        "ignorePreRootHistory=false; by default, as KataGo's analysis engine, it sees only "
        "the moves searched from it)",
    )
    add_policy_optimism_arguments(parser)
    parser.add_argument("--seed", type=int, default=0, help="for random symmetries")
    parser.add_argument(
        "--replay-cache",
        type=non_negative,
        default=1024,
        metavar="N",
        help="games kept after their replay: a query that extends one replays only its new "
        "moves (default 1024; 0 keeps none)",
    )
    parser.add_argument(
        "--warm-up",
        type=boards,
        default=[],
        metavar="SIZE[:RULES],...",
        help="compile ahead, before the ready line, the search of a query of the default "
        "visits with ownership (KaTrain's) on these boards, e.g. 19:japanese,9 (rules: any "
        "KataGo name; default chinese), so that the first queries are answered within their "
        "maxTime",
    )
    parser.add_argument(
        "--max-tree-visits",
        type=positive,
        default=MAX_TREE_VISITS,
        metavar="N",
        help="the most root visits one search's tree holds (its nodes are allocated, one a "
        f"visit, when it is compiled; default {MAX_TREE_VISITS}): a query asking for more "
        "is searched until the tree is full, its maxTime is up or it is terminated",
    )
    flags = tuple(_FLAGS_OF_OPTIONS.values())
    parser.set_defaults(
        run=cmd_analysis, flag_defaults={flag: parser.get_default(flag) for flag in flags}
    )
