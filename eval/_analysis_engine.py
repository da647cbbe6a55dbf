"""The analysis engine: KataGo's JSON analysis protocol, line by line, over batched search.

:class:`AnalysisEngine` holds the engine's settings, one network and its compiled
programs; :meth:`~AnalysisEngine.handle` answers a batch of request lines (queries,
parsed by ``eval.analysis_query``; the actions ``query_version``, ``query_models``,
``clear_cache``, ``terminate``, ``terminate_all``), and :meth:`~AnalysisEngine.serve`
answers stdin until it ends. The work on the queries of a batch (replay, search,
replies) is inherited from ``eval._analysis_batches``; this module is the protocol's
side of it: which replies a line gets, in which order, and what a terminate or a more
urgent query does to a batch under way.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import jax

from eval._analysis_batches import _BatchAnalysis
from eval._analysis_search import _bucket, _device_functions
from eval._analysis_stream import (
    _TERMINATE_POLL,
    _line_priority,
    _LineReader,
    _Stream,
    _terminate_request,
)
from eval._nn_tables import NNTables
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
from eval.players import model_info
from eval.replay_cache import ReplayCache


def _warm_up_game(size: int) -> list[list[str]]:
    """16 moves that capture nothing (Black down the first line, White down the last)
    on a board of 8 lines or more, so that a warm-up replays a segment of each length
    (``eval._analysis_replay``); none on smaller boards."""
    if size < 8:
        return []
    letters = "ABCDEFGHJKLMNOPQRSTUVWXYZ"[:size]
    return [[colour, f"{letters[0 if colour == 'B' else -1]}{row}"]
            for row in range(1, 9) for colour in "BW"]  # fmt: skip


class AnalysisEngine(_BatchAnalysis):
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
      nn_cache: keep the network's evaluations of ``2 ** nn_cache`` positions between
        searches (KataGo's ``nnCacheSizePowerOfTwo``; ``gojax.search.new_cache``), one
        table per board size and ownership setting, so that a position analysed again
        (a game stepped back and forth, a query repeated with more visits) is not
        evaluated again; 0 keeps none.
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
        nn_cache: int = 0,
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
        functions = _device_functions(model, self.symmetry, self.optimism)
        self._search, self._new_cache, self._evaluate = functions
        self.nn_cache = int(nn_cache)
        self._caches = NNTables(nn_cache)  # by (size, ownership kept)
        self._replays = ReplayCache(replay_cache)
        # Visits a second of the last search run in parts, by its shape (batch, visits,
        # ownership kept): the next one's first part is sized from it, not measured.
        self._speeds: dict[tuple, float] = {}
        # Queries (their turns not yet analysed) a paused batch left for the next one.
        self.carried: list[Query] = []
        # Tree sizes warm_up compiled: a smaller search runs in one (``_tree_size``).
        self._warm_trees: set[int] = set()
        # The search programs compiled so far: (board size, batch, tree nodes, ownership).
        # A query without ownership runs in one with it if only that one was compiled
        # (``_search_ownership``); after warm_up (``_compiled_only``), searches run only at
        # compiled batch sizes, queries are replayed one at a time and their rules are
        # kept as data (one program for every rule set; a batch engine specialises its
        # programs to each, ~10% faster at 64 visits, 9x9, batch 128).
        self._programs: set[tuple[int, int, int, bool]] = set()
        self._compiled_only = False

    def warm_up(self, boards: Iterable[tuple[int, str]], visits: int | None = None) -> None:
        """Compile ahead the programs a client's first queries need, so that they are
        answered within their time limits (``maxTime`` counts compilation): for each
        ``(size, rules)`` (the rules only name the replay's: a warmed engine keeps every
        query's rules as data, ``eval._analysis_replay._host_template``, and every rule
        set runs in the same programs), a query of ``visits``
        root visits (the engine's default) and one of the largest tree
        (``max_tree_visits``: pondering, and any query of more visits), with
        ``includeOwnership`` and ``includeMovesOwnership`` (KaTrain's: queries that ask
        for less run in the same programs, ``_search_ownership``), searched in parts as a
        stream's searches are, stopped after their second part, on a game of 16 moves
        (both replay segments; on boards of 8 lines or more). Queries of these sizes then
        compile no search: they run in the smallest of the trees compiled here that holds
        their visits (``_tree_size``), one query at a time and at the batch sizes
        compiled (``_compiled_only``)."""
        visits, boards = visits or self.visits, list(boards)
        trees = sorted({min(_bucket(visits), self.max_tree_visits), self.max_tree_visits})
        if visits == 1:  # the network alone, no tree
            trees = []
        if boards:  # before the searches: they keep their rules as data
            self._compiled_only = True
            self._warm_trees.update(trees)
        for size, rules in boards:
            for tree in trees or [1]:
                self._warm_search(size, rules, tree)

    def _warm_search(self, size: int, rules: str, visits: int) -> None:
        """Compile the search of ``visits`` visits on ``size`` boards (``warm_up``)."""
        moves = _warm_up_game(size)
        request = {"id": "warm-up", "moves": moves, "rules": rules, "boardXSize": size,
                   "boardYSize": size, "maxVisits": visits,
                   "includeOwnership": True, "includeMovesOwnership": True}  # fmt: skip
        query, _ = parse_query(request, visits=self.visits, report_as=self.report_as)
        stream = _Stream.quiet(1)
        looks: list[int] = []
        turn = len(moves)  # the turn analysed, the game's last

        def check() -> None:
            looks.append(1)  # before the search, after its first part, after its second
            if len(looks) >= 3:
                stream.halted[0].add(turn)

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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gojax")
    except PackageNotFoundError:
        return "unknown"
