"""The analysis of a batch of queries: grouping, replay, search, in priority order.

:class:`_BatchAnalysis` holds :meth:`analyse` and the steps under it, which
``eval._analysis_engine.AnalysisEngine`` inherits: queries of one board size, rule set
and move cap are replayed together (``eval._analysis_replay``), the positions of each
replay searched alike (same tree size and search settings) in one batched search or one
network evaluation (``eval._analysis_search``), higher priorities first, and each
result made into its reply (``eval._analysis_reply``) as it comes. Apart from the
engine's protocol (reading lines, actions, terminates) because this is the scheduling
of device work: it never sees a line of input.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from eval._analysis_replay import (
    _game_key,
    _host_template,
    _replay_segment,
    _replay_start,
    _replay_steps,
    _segments,
)
from eval._analysis_reply import (
    _reply,
    _report_during_search,
    _Result,
    _wants_moves_ownership,
    _wants_ownership,
)
from eval._analysis_search import _bucket, _forget_history, _search_in_parts, _take, _used_nodes
from eval._analysis_stream import _Stream
from eval.analysis_query import Query
from eval.players import _policy_analysis, listed_actions, root_moves, search_analysis
from eval.replay_cache import moves_key
from gojax import BLACK, WHITE, GoState, action_to_gtp


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _BatchAnalysis:
    """The batch side of :class:`eval.analysis.AnalysisEngine`: what it does with the
    queries of one batch once they are read.

    A mixin: it reads the settings and state ``AnalysisEngine.__init__`` sets
    (``batch_size``, ``min_batch``, ``moves_listed``, ``c_puct``, ``search``, ``model``,
    ``max_time``, ``max_tree_visits``, ``ignore_pre_root_history``, ``_search``,
    ``_evaluate``, ``_search_settings``, ``_replays``, ``_speeds``, ``_warm_trees``,
    ``_programs``, ``_compiled_only``, ``_next_key``).
    """

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
            # A warmed engine replays one query at a time: the program warm_up compiled.
            for chunk in _chunks(members, 1 if self._compiled_only else self.batch_size):
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
                    for part in _chunks(items, self._search_chunk(size, nodes)):
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

    def _compiled_batches(self, size: int, nodes: int) -> list[int]:
        """The batch sizes of the searches compiled so far on ``size`` boards in trees of
        ``nodes`` nodes."""
        return sorted({b for s, b, n, _ in self._programs if (s, n) == (size, nodes)})

    def _search_chunk(self, size: int, nodes: int) -> int:
        """Most positions searched at once: ``batch_size``, but in a warmed engine the
        largest batch compiled for the search, if one was (a new batch size would be
        compiled inside a query's ``maxTime``)."""
        compiled = self._compiled_batches(size, nodes) if self._compiled_only else []
        return compiled[-1] if compiled else self.batch_size

    def _search_batch(self, size: int, nodes: int, n: int) -> int:
        """The padded batch of ``n`` positions: a power of two (``_bucket``), or in a
        warmed engine the smallest compiled batch that holds them."""
        compiled = self._compiled_batches(size, nodes) if self._compiled_only else []
        bucket = _bucket(n, self.batch_size, smallest=self.min_batch)
        return min((b for b in compiled if b >= n), default=bucket)

    def _search_ownership(self, size: int, batch: int, nodes: int, ownership: bool) -> bool:
        """Whether the search program to run keeps every node's ownership: if asked to,
        or if only that program of this shape was compiled (its answers hold every
        number the other gives; the host drops the ownership)."""
        return ownership or (size, batch, nodes, True) in self._programs

    def _tree_size(self, visits: int) -> int:
        """The nodes of the tree a search of ``visits`` root visits runs in: the power of
        two at least ``visits`` (queries of 100 and 120 visits share one compiled program
        and one batch, each stopping at its own), at most ``max_tree_visits``, or the
        smallest tree ``warm_up`` compiled that holds it: the same search (nodes are
        added in order), no compile, and on a CPU no slower (a 64-visit query in a tree
        of 512: 0.37-0.39 s against 0.36 on 19x19); 1 is the network alone, no tree."""
        if visits == 1:
            return 1
        nodes = min(_bucket(visits), self.max_tree_visits)
        return min((warm for warm in self._warm_trees if warm >= nodes), default=nodes)

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
        template = _host_template(size, rules, max_moves, self._compiled_only)
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
        batch = self._search_batch(states.size, visits, n)
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

        kept = self._search_ownership(roots.size, batch, visits, ownership or moves_ownership)
        config = SearchConfig(
            kind=self.search,
            num_simulations=visits - 1,
            pb_c_init=self.c_puct,
            dirichlet_fraction=0.0,
            temperature_moves=0,
            **(self._search_settings | (search or {})),
        )
        search = self._cached(
            functools.partial(
                self._search,
                self.model.variables,
                roots,
                config=config,
                avoid=jnp.asarray(avoid),
                ownership=kept,
            ),
            roots,
            kept,
        )
        self._programs.add((roots.size, batch, visits, kept))

        def results(searched: Any, rows: Iterable[int]) -> list[_Result]:
            return self._searched_results(
                searched, roots, movers, rows, visits, pv_lengths, moves_ownership, key_eval
            )

        # Per position: when to report, (first, every), and when to stop; inf: never.
        schedule = [r if r and on_report else (math.inf, math.inf) for r in reports or [None] * n]
        limits = list(limits or [math.inf] * n)
        parted = math.isfinite(poll) or not all(map(math.isinf, limits))
        if not parted and all(math.isinf(first) for first, _ in schedule):
            # Each to its own visits, padding rows to none, the whole tree kept, the same
            # keywords: the program that begins a search in parts (warm_up compiles it; jit
            # keys on the keywords given, tree=None included), not one more.
            stop_at = np.asarray(goals + [1] * (batch - n), np.int32)
            searched = search(key_search, tree=None, stop_at=jnp.asarray(stop_at))
        else:

            def report(searched: Any, rows: np.ndarray) -> None:
                for i, result in zip(rows, results(searched, rows), strict=True):
                    on_report(int(i), result)

            shape = (batch, visits, kept)
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

    def _cached(self, search: Callable, roots: GoState, ownership: bool) -> Callable:
        """``search(key, **kwargs) -> (output, tree)`` through the network cache of the
        roots' board size and ``ownership`` setting, if kept (``eval._nn_tables``: donated,
        and replaced by the one the search gives back)."""
        kind = (int(roots.size), bool(ownership))

        def make(size_log2: int) -> Any:
            return self._new_cache(
                self.model.variables, roots, ownership=bool(ownership), size_log2=size_log2
            )

        def run(key, **kwargs):
            output, tree, cache = search(key, cache=self._caches.take(kind, make), **kwargs)
            self._caches.keep(kind, cache)
            return output, tree

        return run

    def cache_stats(self) -> dict[str, int] | None:
        """The network cache's counters summed over its tables (``lookups``, ``hits``,
        ``size``, ``filled``), or None without a cache."""
        return self._caches.stats()

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
        """The host's results for positions ``rows`` of a search's ``(output, tree)`` (on
        the device): its listed moves, each with the network's outputs after it."""
        host = jax.device_get(_used_nodes(*searched, keep_nodes=moves_ownership))
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
