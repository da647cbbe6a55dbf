"""The KataGo-compatible JSON analysis engine: parsing, batching, KataGo's numbers, CLI.

Parsing and the line reader need no network. The engine tests share one
engine on the reference KataGo net (symmetry 0, every batch padded to 8
positions, so that a few compiled programs serve all of them).
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import REPO, reference_path

from eval.analysis import AnalysisEngine, _LineReader
from eval.analysis_query import (
    QueryError,
    handicap_stones,
    parse_query,
    parse_rules,
    without_foreign_settings,
)
from gojax._board import BLACK, WHITE
from gojax._coords import action_to_gtp, gtp_to_action
from gojax._game import state_from_moves
from gojax.evaluate import evaluate
from gojax.katago_model import load_model

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"


def query(**fields) -> dict:
    """A valid 9x9 query with ``fields`` changed (``None`` drops a field)."""
    base = {
        "id": "q",
        "moves": [["B", "E5"], ["W", "C3"]],
        "rules": "chinese",
        "komi": 7,
        "boardXSize": 9,
        "boardYSize": 9,
    }
    merged = base | fields
    return {k: v for k, v in merged.items() if v is not None}


def parse(**fields):
    return parse_query(query(**fields), visits=1, report_as="BLACK")


AVOID = {"player": "B", "moves": ["C3"], "untilDepth": 1}  # one avoidMoves entry


# ----------------------------------------------------------------------------
# Parsing (no network)


def test_max_time_is_read_from_the_override_settings():
    assert parse()[0].max_time == float("inf")
    q, warnings = parse(overrideSettings={"maxTime": 8, "maxVisits": 500})
    assert q.max_time == 8.0 and q.visits == 500 and warnings == []
    assert parse(overrideSettings={"maxTime": "2.5"})[0].max_time == 2.5  # as KataGo's config
    for bad in (-1, "soon", True, 1e30, float("inf")):
        with pytest.raises(QueryError, match="maxTime must be a number") as err:
            parse(overrideSettings={"maxTime": bad})
        assert err.value.field == "overrideSettings"


def test_reports_during_the_search_are_read_as_katago_reads_them():
    assert parse()[0].reports is None
    assert parse(reportDuringSearchEvery=0.5)[0].reports == (0.5, 0.5)
    q, warnings = parse(reportDuringSearchEvery=1, firstReportDuringSearchAfter=0.05)
    assert q.reports == (0.05, 1.0) and warnings == []
    assert parse(firstReportDuringSearchAfter=0.2)[0].reports == (0.2, float("inf"))
    for field in ("reportDuringSearchEvery", "firstReportDuringSearchAfter"):
        for bad in (0, 0.0005, -1, 2e6, "0.5", True, float("nan")):
            with pytest.raises(QueryError, match="seconds from 0.001 to 1000000.0") as err:
                parse(**{field: bad})
            assert err.value.field == field


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("tromp-taylor", ("tromp-taylor", "0", 7.5)),
        ("Chinese", ("chinese", "N", 7.5)),
        ("chinese_ogs", ("chinese-ogs", "N", 7.5)),
        ("chinese-kgs", ("chinese-ogs", "N", 7.5)),
        ("aga", ("aga", "N-1", 7.5)),
        ("bga", ("aga", "N-1", 7.5)),
        ("nz", ("new-zealand", "0", 7.0)),
        ("new zealand", ("new-zealand", "0", 7.0)),
        ({"ko": "SIMPLE", "scoring": "AREA", "suicide": False}, ("chinese", "N", 7.5)),
        ({"ko": "SITUATIONAL", "suicide": False, "whiteHandicapBonus": "0"}, ("aga", "0", 7.5)),
        ({}, ("tromp-taylor", "0", 7.5)),
    ],
)
def test_rules_names_and_json_objects(rules, expected):
    preset, bonus, komi, warning = parse_rules(rules)
    assert (preset, bonus, komi) == expected and warning is None


def test_territory_rules_are_japanese_and_what_they_lack_is_warned():
    assert parse_rules("japanese") == ("japanese", "0", 6.5, None)
    assert parse_rules("korean") == ("japanese", "0", 6.5, None)
    # KataGo's JSON: territory scoring with its default tax (SEKI).
    assert parse_rules({"ko": "SIMPLE", "scoring": "TERRITORY", "suicide": 0}) == (
        "japanese", "0", 6.5, None,
    )  # fmt: skip
    preset, _, komi, warning = parse_rules({"scoring": "TERRITORY", "tax": "ALL", "komi": 5})
    assert (preset, komi) == ("japanese", 5.0)
    for lacking in ('superko "POSITIONAL"', "suicide true", 'tax "ALL"'):
        assert lacking in warning
    preset, _, _, warning = parse_rules("ancient-territory")
    assert preset == "japanese" and "group tax" in warning


@pytest.mark.parametrize(
    "rules", ["ing-go", "", 7, None, {"ko": "SPIGHT"}, {"ko": "SIMPLE", "suicide": True}]
)
def test_unknown_rules_are_an_error(rules):
    with pytest.raises(QueryError) as err:
        parse_rules(rules)
    assert err.value.field == "rules"


def test_handicap_stones_are_counted_as_katago_counts_them():
    empty = np.zeros(81, np.int8)
    b, w, pass_ = BLACK, WHITE, 81
    assert handicap_stones(empty, [(b, 0), (w, 1)], 9) == 0  # one stone is no handicap
    assert handicap_stones(empty, [(b, 0), (b, 2), (w, 1)], 9) == 2
    assert handicap_stones(empty, [(b, 0), (w, pass_), (b, 2), (w, 1)], 9) == 2
    assert handicap_stones(empty, [(b, 0), (b, 2), (w, 1), (w, 3)], 9) == 0  # a problem setup
    setup = empty.copy()
    setup[[20, 24]] = BLACK
    assert handicap_stones(setup, [(w, 1)], 9) == 2
    assert handicap_stones(setup, [(b, 40), (w, 1)], 9) == 3
    setup[60] = WHITE
    assert handicap_stones(setup, [], 9) == 0


def test_query_defaults_and_handicap_komi():
    q, warnings = parse()
    assert warnings == []
    assert q.turns == (2,) and q.komi == 7.0 and q.rules == "chinese"
    assert q.first_player == BLACK and q.visits == 1 and q.report_as == "BLACK"
    assert q.pv_length == 15 and not q.include_ownership and not q.include_policy
    # Two Black stones then White: a 2-stone handicap, compensated under chinese rules.
    q, _ = parse(initialStones=[["B", "C3"], ["B", "G7"]], moves=[], komi=0.5)
    assert q.first_player == WHITE and q.komi == 2.5
    q, _ = parse(initialStones=[["B", "C3"], ["B", "G7"]], moves=[], rules="aga", komi=0.5)
    assert q.komi == 1.5
    q, _ = parse(moves=[["B", "C3"], ["B", "G7"], ["W", "E5"]], whiteHandicapBonus="0")
    assert q.komi == 7.0
    q, _ = parse(komi=None, rules="nz", initialPlayer="w", moves=[])
    assert q.komi == 7.0 and q.first_player == WHITE
    q, _ = parse(analyzeTurns=[2, 0, 0], maxVisits=3, analysisPVLen=4, includePolicy=True)
    assert q.turns == (0, 2) and q.visits == 3 and q.pv_length == 4 and q.include_policy
    assert (q.priority(0), q.priority(2)) == (0, 0)
    q, _ = parse(analyzeTurns=[2, 0, 0], priority=3)
    assert (q.priority(0), q.priority(2)) == (3, 3)
    q, _ = parse(analyzeTurns=[2, 0, 0], priority=3, priorities=[-1, 4, 7])  # wins; the top
    assert (q.priority(0), q.priority(2)) == (7, -1)
    q, _ = parse(moves=[["B", "(4,4)"], ["W", "pass"]])
    assert list(q.actions) == [gtp_to_action("E5", 9), 81]


def test_katago_search_settings_are_read_by_katagos_names():
    q, warnings = parse(
        overrideSettings={"fpuReductionMax": 0, "cpuctExploration": "2", "maxVisits": 9},
        rootFpuReductionMax=0.5,
    )
    assert warnings == [] and q.visits == 9
    assert q.search == (
        ("cpuct_exploration", 2.0),
        ("fpu_reduction", 0.0),
        ("root_fpu_reduction", 0.5),
    )
    # The top-level field wins over the same setting in overrideSettings.
    q, _ = parse(overrideSettings={"rootFpuReductionMax": 1}, rootFpuReductionMax=0.0)
    assert q.search == (("root_fpu_reduction", 0.0),)
    q, _ = parse(overrideSettings={"wideRootNoise": "0.25"})
    assert q.search == (("wide_root_noise", 0.25),)
    assert parse()[0].search == ()
    with pytest.raises(
        QueryError,
        match="Could not set settings: cpuctUtilityStdevScale must be a number from 0 to 1",
    ) as err:
        parse(overrideSettings={"cpuctUtilityStdevScale": 2})
    assert err.value.field == "overrideSettings"
    for bad in ("wide", True, 3):
        with pytest.raises(
            QueryError, match="rootFpuReductionMax must be a number from 0 to 2"
        ) as err:
            parse(rootFpuReductionMax=bad)
        assert err.value.field == "rootFpuReductionMax"


def test_root_policy_temperature_is_read_as_katago_reads_it():
    # The top-level field sets the early temperature too, and wins over overrideSettings.
    q, warnings = parse(
        rootPolicyTemperature=1.5, overrideSettings={"rootPolicyTemperatureEarly": 3}
    )
    assert warnings == []
    assert q.search == (("root_policy_temperature", 1.5), ("root_policy_temperature_early", 1.5))
    q, _ = parse(
        overrideSettings={"rootPolicyTemperature": "1.1", "rootPolicyTemperatureEarly": 1.25}
    )
    assert q.search == (("root_policy_temperature", 1.1), ("root_policy_temperature_early", 1.25))
    with pytest.raises(
        QueryError, match="^rootPolicyTemperature must be a number from 0.01 to 100$"
    ) as err:
        parse(rootPolicyTemperature=0)
    assert err.value.field == "rootPolicyTemperature"
    with pytest.raises(QueryError, match="Could not set settings: rootPolicyTemperatureEarly"):
        parse(overrideSettings={"rootPolicyTemperatureEarly": 200})
    q, _ = parse(overrideSettings={"chosenMoveTemperatureHalflife": 38})  # the early one's pace
    assert q.search == (("temperature_halflife", 38.0),)


def test_settings_a_search_lacks_are_dropped_with_a_warning():
    request = query(
        rootPolicyTemperature=2,
        rootFpuReductionMax=0,
        overrideSettings={"cpuctExploration": 2, "rootPolicyTemperatureEarly": 3},
    )
    q, _ = parse_query(request, visits=1, report_as="BLACK")
    assert without_foreign_settings(request, q, "katago") == (q, [])
    # AlphaGo Zero's PUCT has a root temperature but not KataGo's constants.
    kept, warnings = without_foreign_settings(request, q, "puct")
    assert kept.search == (("root_policy_temperature", 2.0), ("root_policy_temperature_early", 2.0))
    needs = "Needs the KataGo search (--search katago), ignored"
    assert warnings == [("overrideSettings", needs), ("rootFpuReductionMax", needs)]
    only_temperature = query(rootPolicyTemperature=2)
    q, _ = parse_query(only_temperature, visits=1, report_as="BLACK")
    assert without_foreign_settings(only_temperature, q, "puct") == (q, [])


def test_query_warnings_for_unknown_fields():
    _, warnings = parse(
        includePVVisits=False,
        colour="B",
        overrideSettings={"reportAnalysisWinratesAs": "w", "playoutDoublingAdvantage": 0.5},
    )
    fields = [f for f, _ in warnings]
    assert fields == ["overrideSettings", "colour"]
    q, _ = parse(overrideSettings={"reportAnalysisWinratesAs": "SIDETOMOVE", "maxVisits": 5})
    assert q.report_as == "SIDETOMOVE" and q.visits == 5


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"boardXSize": None}, "boardXSize", "integer from 2 to 25"),
        ({"boardXSize": 26, "boardYSize": 26}, "boardXSize", "integer from 2 to 25"),
        ({"boardYSize": 13}, "boardYSize", "square"),
        ({"boardXSize": "9"}, "boardXSize", "integer"),
        ({"moves": None}, "moves", "Must specify"),
        ({"moves": [["B", "Z9"]]}, "moves", "Could not parse board location"),
        ({"moves": [["X", "E5"]]}, "moves", "Could not parse player"),
        ({"moves": [["B"]]}, "moves", "pairs"),
        ({"moves": "E5"}, "moves", "pairs"),
        ({"initialStones": [["B", "pass"]]}, "initialStones", "location"),
        # Overlapping stones: KataGo answers with an error, not the last one placed.
        (
            {"initialStones": [["B", "E5"], ["W", "E5"]]},
            "initialStones",
            "Illegal initial stones: point E5 is set up twice",
        ),
        (
            {"initialStones": [["B", "A1"], ["W", "A2"], ["W", "B1"]]},
            "initialStones",
            "Illegal initial stones: the black chain at A1 has no liberty",
        ),
        ({"initialPlayer": "red"}, "initialPlayer", '"b" or "w"'),
        ({"analyzeTurns": [3]}, "analyzeTurns", "Invalid turn number: 3"),
        ({"analyzeTurns": 1}, "analyzeTurns", "array of integers"),
        ({"rules": None}, "rules", "Must specify rules"),
        ({"rules": "ing-go"}, "rules", "Could not parse rules"),
        ({"komi": 7.3}, "komi", "half-integer"),
        ({"komi": 1e9}, "komi", "half-integer"),
        ({"komi": True}, "komi", "half-integer"),
        ({"maxVisits": 0}, "maxVisits", "integer from 1"),
        ({"maxVisits": 10**400}, "maxVisits", "integer from 1"),
        ({"includeOwnership": "yes"}, "includeOwnership", "boolean"),
        ({"whiteHandicapBonus": "2"}, "whiteHandicapBonus", "N-1"),
        ({"overrideSettings": []}, "overrideSettings", "object"),
        ({"moves": [["B", "pass"]] * 400}, "moves", "Too many moves"),
        ({"priorities": [1]}, "priorities", "analyzeTurns"),
        ({"analyzeTurns": [0, 1], "priorities": [1]}, "priorities", "analyzeTurns"),
        ({"analyzeTurns": [0], "priorities": [0.5]}, "priorities", "analyzeTurns"),
        ({"priority": "high"}, "priority", "integer"),
        ({"avoidMoves": [], "allowMoves": []}, "allowMoves", "Cannot specify both"),
        ({"avoidMoves": {"player": "B"}}, "avoidMoves", "list of dicts"),
        ({"avoidMoves": [{"player": "B", "moves": ["C3"]}]}, "avoidMoves", "list of dicts"),
        ({"avoidMoves": [AVOID | {"player": "X"}]}, "avoidMoves", '"b" or "w"'),
        ({"avoidMoves": [AVOID | {"moves": ["Z99"]}]}, "avoidMoves", "board location: Z99"),
        ({"avoidMoves": [AVOID | {"moves": "C3"}]}, "avoidMoves", "GTP board vertices"),
        ({"avoidMoves": [AVOID | {"untilDepth": 0}]}, "avoidMoves", "positive integer"),
        ({"allowMoves": [AVOID, AVOID]}, "allowMoves", "more than once for the same player"),
        ({"allowMoves": [AVOID] * 3}, "allowMoves", "at most one entry per player"),
    ],
)
def test_bad_queries_name_the_field(fields, field, message):
    with pytest.raises(QueryError) as err:
        parse(**fields)
    assert err.value.field == field and message in err.value.message


def test_avoid_and_allow_moves_become_plies_per_player():
    c3, e5, e1 = gtp_to_action("C3", 9), gtp_to_action("E5", 9), gtp_to_action("E1", 9)
    avoid = [
        {"player": "b", "moves": ["C3", "pass", "(4,4)"], "untilDepth": 3},
        {"player": "W", "moves": ["E1"], "untilDepth": 2},
        {"player": "B", "moves": ["C3"], "untilDepth": 1},  # a later entry wins, as in KataGo
    ]
    query, warnings = parse(avoidMoves=avoid)
    assert warnings == [] and query.avoid.shape == (2, 82)
    assert {int(a): int(query.avoid[0, a]) for a in np.flatnonzero(query.avoid[0])} == {
        c3: 1,
        81: 3,
        e5: 3,
    }
    assert {int(a): int(query.avoid[1, a]) for a in np.flatnonzero(query.avoid[1])} == {e1: 2}
    query, _ = parse(allowMoves=[{"player": "W", "moves": ["E1", "pass"], "untilDepth": 4}])
    assert not query.avoid[0].any()
    assert set(np.flatnonzero(query.avoid[1] == 0)) == {e1, 81} and query.avoid[1].max() == 4
    assert parse()[0].avoid is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    field=st.sampled_from(
        sorted(query())
        + ["analyzeTurns", "initialStones", "initialPlayer", "avoidMoves", "allowMoves"]
    ),
    value=JSON,
)
def test_fuzzed_fields_give_a_query_or_a_query_error(field, value):
    """Whatever one field holds, parsing answers with a query or a QueryError, never a crash."""
    try:
        parse(**{field: value})
    except QueryError as err:
        assert err.field and err.message


def test_line_reader_takes_every_waiting_line_without_blocking():
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "r") as stream:
        reader = _LineReader(stream)
        os.write(write_end, b'{"a":1}\n{"b":2}\n{"c"')
        assert reader.batch(10) == ['{"a":1}', '{"b":2}']  # the partial line waits
        os.write(write_end, b":3}\nx\ny\n")
        assert reader.batch(2) == ['{"c":3}', "x"]
        os.write(write_end, b"last line without newline")
        os.close(write_end)
        assert reader.batch(10) == ["y"]
        assert reader.batch(10) == ["last line without newline"]
        assert reader.batch(10) is None
    memory = _LineReader(io.StringIO("1\n2\n3\n"))
    assert memory.batch(2) == ["1\n", "2\n"] and memory.batch(2) == ["3\n"]
    assert memory.batch(2) is None


def test_line_reader_hands_out_lines_early_and_takes_them_back():
    """What the engine reads during a batch (``take_ready``: looking for terminates) and
    gives back comes first in the next batch, in its order."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "r") as stream:
        reader = _LineReader(stream)
        assert reader.take_ready() == []  # nothing waiting: no block
        os.write(write_end, b"a\nb\nc\npart")
        assert reader.take_ready() == ["a", "b", "c"]
        reader.give_back(["b", "c"])
        reader.give_back(["a"])
        os.write(write_end, b"ial\n")
        assert reader.batch(2) == ["a", "b"]
        assert reader.batch(10) == ["c", "partial"]
        os.close(write_end)
        assert reader.batch(10) is None
    assert _LineReader(io.StringIO("1\n")).take_ready() == []  # in memory: next batch's


# ----------------------------------------------------------------------------
# The engine on the reference net


@functools.cache
def model():
    return load_model(reference_path("katago", MODEL))


@functools.cache
def engine() -> AnalysisEngine:
    return AnalysisEngine(model(), symmetry=0, visits=1, batch_size=8, min_batch=8)


@functools.cache
def reference_games() -> dict[str, list[dict]]:
    """The reference positions of a few games, by game (positions cut from one record)."""
    games: dict[str, list[dict]] = {}
    with open(reference_path("katago", "positions.jsonl")) as handle:
        for record in map(json.loads, handle):
            game = record["id"].rsplit("-", 1)[0]
            if game in ("g101-8", "g101-15"):  # 9x9, chinese rules
                games.setdefault(game, []).append(record)
    return games


def session(lines: list[str], eng: AnalysisEngine | None = None) -> list[dict]:
    """Serve ``lines`` through the engine's stream loop; every reply must be one JSON line."""
    stdout = io.StringIO()
    (eng or engine()).serve(io.StringIO("".join(line + "\n" for line in lines)), stdout)
    text = stdout.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_scripted_session_answers_every_line_and_keeps_going():
    lines = [
        json.dumps(
            query(
                id="a",
                analyzeTurns=[0, 1, 2],
                includeOwnership=True,
                includePolicy=True,
            )
        ),
        "this is not json",
        json.dumps(query(id="illegal", moves=[["B", "E5"], ["W", "E5"]])),
        json.dumps(query(id="rules", rules="chess")),
        json.dumps(query(id=None)),
        "[1, 2]",
        json.dumps(query(id="oblong", boardYSize=13)),
        json.dumps({"id": "v", "action": "query_version"}),
        json.dumps(query(id="seven", boardXSize=7, boardYSize=7, moves=[["B", "D4"]])),
        json.dumps(query(id="gone", analyzeTurns=[0, 1])),
        json.dumps({"id": "t", "action": "terminate", "terminateId": "gone", "turnNumbers": [1]}),
        json.dumps(
            query(
                id="white",
                moves=[["W", "E5"]],
                komi=6.5,
                typo=1,
                overrideSettings={"reportAnalysisWinratesAs": "SIDETOMOVE"},
            )
        ),
        json.dumps({"id": "m", "action": "query_models"}),
    ]
    replies = session(lines)
    by_id: dict = {}
    for reply in replies:
        by_id.setdefault(reply.get("id"), []).append(reply)
    # Results, by turn, with KataGo's fields.
    a = by_id["a"]
    assert [r["turnNumber"] for r in a] == [0, 1, 2]
    for reply in a:
        assert reply["isDuringSearch"] is False
        root = reply["rootInfo"]
        assert root["visits"] == 1 and 0 <= root["winrate"] <= 1
        assert len(reply["ownership"]) == 81 and len(reply["policy"]) == 82
        assert reply["moveInfos"][0]["order"] == 0 and reply["moveInfos"][0]["visits"] == 1
        assert abs(sum(p for p in reply["policy"] if p >= 0) - 1) < 1e-4
    assert [r["rootInfo"]["currentPlayer"] for r in a] == ["B", "W", "B"]
    policy = a[2]["policy"]
    assert policy[gtp_to_action("E5", 9)] == -1 and policy[gtp_to_action("C3", 9)] == -1
    assert policy[gtp_to_action("D4", 9)] > 0 and policy[81] >= 0
    # Errors name the query and the field; the ones without an id say why.
    assert by_id["illegal"] == [{"error": "Illegal move 1: E5", "field": "moves", "id": "illegal"}]
    assert by_id["rules"][0]["field"] == "rules" and "chess" in by_id["rules"][0]["error"]
    assert by_id["oblong"][0]["field"] == "boardYSize" and "error" in by_id["oblong"][0]
    anonymous = [r["error"] for r in by_id[None]]
    assert len(anonymous) == 3 and "not json" in anonymous[0] and '"id"' in anonymous[1]
    assert by_id["v"][0]["action"] == "query_version" and by_id["v"][0]["version"]
    # Another size in the same batch, a terminated turn, warnings before results.
    assert by_id["seven"][0]["turnNumber"] == 1 and by_id["seven"][0]["rootInfo"]["visits"] == 1
    assert [r["turnNumber"] for r in by_id["gone"]] == [0, 1]
    assert "moveInfos" in by_id["gone"][0] and by_id["gone"][1]["noResults"] is True
    assert by_id["t"] == [json.loads(lines[10])]
    white = by_id["white"]
    assert white[0]["warning"] and white[0]["field"] == "typo"
    assert white[1]["turnNumber"] == 1 and white[1]["rootInfo"]["currentPlayer"] == "B"
    (models,) = by_id["m"]
    internal = MODEL.removesuffix(".bin.gz")  # the file's name, and the name inside it
    assert models["models"] == [{"name": MODEL, "internalName": internal, "maxBatchSize": 8,
        "usesHumanSLProfile": False, "version": 8, "usingFP16": "false"}]  # fmt: skip
    assert len(replies) == 17


def test_reported_perspective_follows_report_as():
    """BLACK, WHITE and SIDETOMOVE agree on one position with White to move."""
    replies = {}
    for view in ("BLACK", "WHITE", "SIDETOMOVE"):
        line = json.dumps(
            query(
                id=view, includeOwnership=True, overrideSettings={"reportAnalysisWinratesAs": view}
            )
            | {"moves": [["B", "E5"]]}
        )
        (replies[view],) = session([line])
    black, white, mover = replies["BLACK"], replies["WHITE"], replies["SIDETOMOVE"]
    assert black["rootInfo"]["currentPlayer"] == "W"
    np.testing.assert_allclose(black["rootInfo"]["winrate"], 1 - white["rootInfo"]["winrate"], 1e-6)
    assert black["rootInfo"]["scoreLead"] == pytest.approx(-white["rootInfo"]["scoreLead"])
    assert mover["rootInfo"] == white["rootInfo"]
    np.testing.assert_allclose(black["ownership"], -np.asarray(white["ownership"]))
    assert black["ownership"][gtp_to_action("E5", 9)] > 0.5  # Black's stone, Black's view


def test_a_failing_analysis_is_reported_and_the_stream_goes_on(monkeypatch):
    eng = AnalysisEngine(model(), visits=1, batch_size=1)  # one line per batch

    def broken(*_args):
        raise RuntimeError("device lost\nwith details")

    monkeypatch.setattr(eng, "analyse", broken)
    lines = [json.dumps(query(id="x")), json.dumps({"id": "v", "action": "query_version"})]
    replies = session(lines, eng)
    assert replies[0] == {"error": "analysis failed: RuntimeError: device lost", "id": "x"}
    assert replies[1]["id"] == "v" and len(replies) == 2


def _reference_replies(**settings) -> dict[tuple[str, int], dict]:
    """Each reference game as one query analysing the cut positions, at one visit, with
    the network seeing the game's moves as kata-raw-nn does (``settings``: more of
    ``overrideSettings``)."""
    lines = []
    for game, records in reference_games().items():
        longest = max(records, key=lambda r: len(r["moves"]))
        lines.append(
            json.dumps(
                {
                    "id": game,
                    "moves": longest["moves"],
                    "rules": longest["rules"],
                    "komi": longest["komi"],
                    "boardXSize": 9,
                    "boardYSize": 9,
                    "analyzeTurns": [len(r["moves"]) for r in records],
                    "maxVisits": 1,
                    "includeOwnership": True,
                    "includePolicy": True,
                    "overrideSettings": {
                        "reportAnalysisWinratesAs": "WHITE",
                        "ignorePreRootHistory": False,
                    }
                    | settings,
                }
            )
        )
    return {(r["id"], r["turnNumber"]): r for r in session(lines)}


def test_one_visit_equals_evaluate_and_katago():
    """At maxVisits 1 the replies are ``gojax.evaluate.evaluate`` of the same positions (to
    1e-5) and KataGo's own raw outputs for them (to 1e-4)."""
    replies = _reference_replies()
    records = [r for game in reference_games().values() for r in game]
    assert len(replies) == len(records) == 6
    states = [state_from_moves(9, r["moves"], komi=r["komi"], rules=r["rules"]) for r in records]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    m = model()
    out = jax.jit(functools.partial(evaluate, m.module(), version=m.version, symmetry=0))(
        m.variables, batch
    )
    out = {k: np.asarray(v) for k, v in out.items()}
    for i, record in enumerate(records):
        game = record["id"].rsplit("-", 1)[0]
        reply = replies[(game, len(record["moves"]))]
        root = reply["rootInfo"]
        assert root["currentPlayer"] == record["to_move"]
        white_win = out["white_win"][i] + 0.5 * out["no_result"][i]
        assert root["winrate"] == pytest.approx(white_win, abs=1e-5)
        assert root["rawWinrate"] == pytest.approx(white_win, abs=1e-5)
        assert root["scoreLead"] == pytest.approx(out["white_lead"][i], abs=1e-5)
        policy = np.where(out["legal"][i], out["policy"][i], -1)
        np.testing.assert_allclose(reply["policy"], policy, atol=1e-5)
        np.testing.assert_allclose(reply["ownership"], out["white_ownership"][i], atol=1e-5)
        best = reply["moveInfos"][0]
        assert best["prior"] == pytest.approx(policy.max(), abs=1e-5)
        # KataGo's numbers, as its kata-raw-nn printed them.
        katago = record["katago"]
        assert root["rawWinrate"] == pytest.approx(
            katago["whiteWin"] + 0.5 * katago["noResult"], abs=1e-4
        )
        assert root["rawLead"] == pytest.approx(katago["whiteLead"], abs=1e-3)
        theirs = [-1 if p is None else p for p in katago["policy"]] + [katago["policyPass"]]
        np.testing.assert_allclose(reply["policy"], theirs, atol=1e-4)
        np.testing.assert_allclose(reply["ownership"], katago["whiteOwnership"], atol=1e-4)


def test_the_moves_before_an_analysed_position_are_hidden_as_katago_hides_them():
    """KataGo's analysis engine evaluates a position as if nothing had been played before
    it (ignorePreRootHistory, by default): a position after moves is analysed as the same
    stones set up by initialStones, and unlike the same moves shown to the network."""
    records = [r for game in reference_games().values() for r in game]
    replies = _reference_replies(ignorePreRootHistory=True)
    shown = _reference_replies()
    checked = 0
    for record in records:
        game = record["id"].rsplit("-", 1)[0]
        turn = len(record["moves"])
        if turn == 0 or (record["moves"][-1][1] == "pass"):
            continue  # nothing hidden; a pass also counts for the rules
        state = state_from_moves(9, record["moves"], komi=record["komi"], rules=record["rules"])
        board = np.asarray(state.board)
        stones = [
            ["B" if board[p] > 0 else "W", action_to_gtp(p, 9)] for p in np.flatnonzero(board)
        ]
        setup = {
            "id": "setup",
            "moves": [],
            "initialStones": stones,
            "initialPlayer": record["to_move"],
            "rules": record["rules"],
            "komi": record["komi"],
            "boardXSize": 9,
            "boardYSize": 9,
            "maxVisits": 1,
            "includePolicy": True,
            "includeOwnership": True,
            "overrideSettings": {"reportAnalysisWinratesAs": "WHITE"},
        }
        (alone,) = session([json.dumps(setup)])
        reply = replies[(game, turn)]
        np.testing.assert_allclose(reply["policy"], alone["policy"], atol=1e-5)
        assert reply["rootInfo"]["rawWinrate"] == pytest.approx(
            alone["rootInfo"]["rawWinrate"], abs=1e-5
        )
        gap = np.abs(np.asarray(reply["policy"]) - np.asarray(shown[(game, turn)]["policy"]))
        assert gap.max() > 1e-3  # premise: the moves shown change what the net says
        checked += 1
    assert checked >= 3
    # The engine's default is KataGo's; --pre-root-history shows the moves.
    assert engine().ignore_pre_root_history
    reply = session([json.dumps(query(id="x", overrideSettings={"ignorePreRootHistory": 2}))])
    assert reply == [
        {
            "error": "Could not set settings: ignorePreRootHistory must be true or false",
            "field": "overrideSettings",
            "id": "x",
        }
    ]


def test_japanese_queries_are_evaluated_under_territory_rules():
    """A ``japanese`` query is analysed under japanese (no warning), with KataGo's
    inputs for territory rules: its numbers are ``evaluate`` of the japanese
    position and differ from the same moves under chinese."""
    moves = [["B", "E5"], ["W", "C3"], ["B", "G7"], ["W", "pass"]]
    fields = {"moves": moves, "maxVisits": 1, "includePolicy": True}
    history = {"ignorePreRootHistory": "false"}  # the pass is in the inputs
    fields |= {"overrideSettings": {"reportAnalysisWinratesAs": "WHITE"} | history}
    japanese, chinese = session(
        [json.dumps(query(id=r, rules=r, komi=6.5, **fields)) for r in ("japanese", "chinese")]
    )
    assert "warning" not in japanese and "warning" not in chinese
    m = model()
    run = jax.jit(functools.partial(evaluate, m.module(), version=m.version, symmetry=0))
    for reply, rules in ((japanese, "japanese"), (chinese, "chinese")):
        state = state_from_moves(9, moves, komi=6.5, rules=rules)
        out = {
            k: np.asarray(v)[0]
            for k, v in run(m.variables, jax.tree.map(lambda x: x[None], state)).items()
        }
        root = reply["rootInfo"]
        white_win = out["white_win"] + 0.5 * out["no_result"]
        assert root["rawWinrate"] == pytest.approx(white_win, abs=1e-5)
        assert root["rawLead"] == pytest.approx(out["white_lead"], abs=1e-4)
        np.testing.assert_allclose(
            reply["policy"], np.where(out["legal"], out["policy"], -1), atol=1e-5
        )
    # One stone more for Black counts as komi under territory rules, and the pass is not hidden.
    assert abs(japanese["rootInfo"]["rawLead"] - chinese["rootInfo"]["rawLead"]) > 0.1


def listed_moves(reply: dict) -> list[str]:
    return [m["move"] for m in reply["moveInfos"]]


def searched_infos(reply: dict) -> list[dict]:
    """The ``moveInfos`` of the moves searched: not those listed for one of them at a
    symmetric position (``isSymmetryOf``; the default query's E5, C3 is symmetric about
    the diagonal through C3)."""
    return [m for m in reply["moveInfos"] if "isSymmetryOf" not in m]


def test_avoided_moves_leave_the_list_and_allowed_moves_alone_stay_at_one_visit():
    base = {"moves": [["B", "E5"]], "includePolicy": True}
    (plain,) = session([json.dumps(query(id="plain", **base))])
    first, second = listed_moves(plain)[:2]
    assert first != "pass" and second != "pass"
    lines = [
        json.dumps(
            query(id="avoid", avoidMoves=[AVOID | {"player": "W", "moves": [first]}], **base)
        ),
        # Avoiding Black's moves changes nothing with White to move.
        json.dumps(query(id="black", avoidMoves=[AVOID | {"moves": [first]}], **base)),
        json.dumps(
            query(
                id="allow",
                allowMoves=[{"player": "W", "moves": [second, "C3"], "untilDepth": 1}],
                **base,
            )
        ),
    ]
    avoid, black, allow = session(lines)
    assert first not in listed_moves(avoid) and listed_moves(avoid)[0] == second
    assert listed_moves(black) == listed_moves(plain)
    assert set(listed_moves(allow)) <= {second, "C3"} and listed_moves(allow)[0] == second
    # The raw policy is reported as it is; the root's numbers do not change at one visit.
    assert avoid["policy"] == plain["policy"] == allow["policy"]
    assert avoid["rootInfo"]["winrate"] == plain["rootInfo"]["winrate"]
    assert not any("warning" in r for r in (avoid, black, allow))


EXTRAS = {"includePVVisits": True, "includeMovesOwnership": True, "includeNoResultValue": True}


def assert_extras(reply: dict, searched: bool) -> None:
    """The per-move fields asked for by ``EXTRAS``, consistent with the rest of the reply."""
    for info in reply["moveInfos"]:
        assert len(info["pvVisits"]) == len(info["pv"]) and info["pvVisits"][0] == info["visits"]
        assert info["pvEdgeVisits"] == info["pvVisits"]
        assert sorted(info["pvVisits"], reverse=True) == info["pvVisits"]
        assert 0 <= info["noResultValue"] <= 1 and len(info["ownership"]) == 81
        assert all(-1 <= x <= 1 for x in info["ownership"])
    owned = [info["ownership"] for info in reply["moveInfos"]]
    if searched:  # each after its own move: the moved-on point is owned by the mover
        for info, ownership in zip(reply["moveInfos"], owned, strict=True):
            if info["move"] != "pass":
                assert ownership[gtp_to_action(info["move"], 9)] > 0.5
    else:  # one evaluation: the root's numbers for every move
        assert all(o == reply["ownership"] for o in owned)


def test_pv_visits_moves_ownership_and_no_result_at_one_visit():
    line = json.dumps(query(id="x", includeOwnership=True, **EXTRAS))
    (reply,) = session([line])
    assert_extras(reply, searched=False)
    assert [i["pvVisits"] for i in reply["moveInfos"]][:2] == [[1], [0]]
    (plain,) = session([json.dumps(query(id="x", includeOwnership=True))])
    assert all("pvVisits" not in i and "ownership" not in i for i in plain["moveInfos"])


@pytest.mark.slow
def test_search_keeps_avoided_moves_out():
    """At 8 visits the root's visits go to the allowed moves only, and an avoided move
    gets none; a restriction on the other player leaves the root alone."""
    eng = engine()
    base = {"moves": [["B", "E5"], ["W", "C3"]], "maxVisits": 8}
    allowed = ["D4", "F6", "G3"]
    lines = [
        json.dumps(query(id="plain", **base)),
        json.dumps(
            query(
                id="allow", allowMoves=[{"player": "B", "moves": allowed, "untilDepth": 1}], **base
            )
        ),
    ]
    plain, allow = session(lines, eng)
    (extras,) = session([json.dumps(query(id="extras", **base, **EXTRAS))], eng)
    assert_extras(extras, searched=True)
    assert listed_moves(extras) == listed_moves(plain)
    assert max(len(i["pv"]) for i in extras["moveInfos"]) > 1
    assert set(listed_moves(allow)) <= set(allowed)
    assert sum(m["visits"] for m in searched_infos(allow)) == 7
    best = listed_moves(plain)[0]
    avoid_line = json.dumps(query(id="avoid", avoidMoves=[AVOID | {"moves": [best]}], **base))
    (avoid,) = session([avoid_line], eng)
    assert best not in listed_moves(avoid) and sum(m["visits"] for m in searched_infos(avoid)) == 7


@pytest.mark.parametrize("search", ["puct", pytest.param("katago", marks=pytest.mark.slow)])
def test_search_scores_and_win_rates_are_means_over_the_tree(search):
    """KataGo's ``scoreLead`` of a searched position is the mean over its visits, not one
    evaluation: the root's visits times its lead are its own evaluation (rawLead, the
    same symmetry) plus every move's visits times the move's lead; win rates alike --
    whichever search (KataGo's weighs scores, but reports the same means)."""
    moves = [["B", "E5"], ["W", "C3"], ["B", "G7"]]
    settings = {"reportAnalysisWinratesAs": "SIDETOMOVE"}  # lcb below winrate
    line = query(id="mean", moves=moves, maxVisits=8, overrideSettings=settings)
    eng = AnalysisEngine(model(), symmetry=0, visits=1, batch_size=8, min_batch=8, search=search)
    (reply,) = session([json.dumps(line)], eng)
    infos, root = searched_infos(reply), reply["rootInfo"]
    assert sum(m["visits"] for m in infos) == root["visits"] - 1 == 7  # every visited move
    lead_sum = root["rawLead"] + sum(m["visits"] * m["scoreLead"] for m in infos)
    assert root["visits"] * root["scoreLead"] == pytest.approx(lead_sum, abs=1e-3)
    rate_sum = root["rawWinrate"] + sum(m["visits"] * m["winrate"] for m in infos)
    assert root["visits"] * root["winrate"] == pytest.approx(rate_sum, abs=1e-4)
    assert root["scoreLead"] != pytest.approx(root["rawLead"], abs=1e-3)  # premise
    # scoreSelfplay and scoreStdev: the mean and spread of the score distributions of the
    # same evaluations, so that first and second moments add up the same way.
    mean_sum = root["rawScoreSelfplay"] + sum(m["visits"] * m["scoreSelfplay"] for m in infos)
    assert root["visits"] * root["scoreSelfplay"] == pytest.approx(mean_sum, abs=1e-3)

    def second(x):  # E[score ** 2] of a mean and a spread
        return x[0] ** 2 + x[1] ** 2

    square_sum = second((root["rawScoreSelfplay"], root["rawScoreSelfplayStdev"])) + sum(
        m["visits"] * second((m["scoreSelfplay"], m["scoreStdev"])) for m in infos
    )
    root_square = second((root["scoreSelfplay"], root["scoreStdev"]))
    assert root["visits"] * root_square == pytest.approx(square_sum, rel=1e-4)
    assert root["scoreStdev"] != pytest.approx(root["rawScoreSelfplayStdev"], abs=1e-3)
    for m in infos:
        # KataGo's LCB radius: at least a fifth of the widest deviation at one visit.
        assert 0.0 <= m["lcb"] <= m["winrate"]
        assert m["utilityLcb"] <= m["utility"] and m["weight"] == m["visits"]
        if m["visits"] == 1:
            assert m["lcb"] == pytest.approx(max(0.0, m["winrate"] - 5 * 0.5 / 2), abs=1e-6)
        if search == "puct":  # the utility is the value alone
            assert m["utility"] == pytest.approx(2 * m["winrate"] - 1, abs=1e-6)
    if search == "puct":
        assert root["utility"] == pytest.approx(2 * root["winrate"] - 1, abs=1e-6)
    if search == "katago":  # the value plus a score utility of at most 0.4
        gaps = [m["utility"] - (2 * m["winrate"] - 1) for m in infos]
        assert all(abs(g) < 0.4 for g in gaps) and any(abs(g) > 1e-3 for g in gaps)


def test_a_symmetric_position_lists_every_equivalent_move_as_katago():
    """KataGo's ``rootSymmetryPruning`` (on by default): after the centre point the
    board is symmetric, one move of each set is searched and each other is listed with
    ``isSymmetryOf``, its numbers and its ownership carried over; the setting turned off
    searches them all, and a setting that is not true or false is an error."""
    from gojax._root_symmetry import transform_point_values

    line = query(id="sym", moves=[["B", "E5"]], maxVisits=16, includeMovesOwnership=True)
    (reply,) = session([json.dumps(line)])
    infos = reply["moveInfos"]
    copies = [m for m in infos if "isSymmetryOf" in m]
    by_move = {m["move"]: m for m in infos}
    assert copies and sum(m["visits"] for m in infos if "isSymmetryOf" not in m) == 15
    assert [m["order"] for m in infos] == list(range(len(infos)))
    for copy in copies:
        source = by_move[copy["isSymmetryOf"]]
        for field in ("visits", "winrate", "scoreLead", "scoreStdev", "utility", "prior"):
            assert copy[field] == source[field]
        assert any(
            np.allclose(transform_point_values(np.array(source["ownership"]), 9, s),
                        copy["ownership"], atol=1e-6)
            for s in range(8)
        )  # fmt: skip
    off = line | {"overrideSettings": {"rootSymmetryPruning": "false"}}
    (plain,) = session([json.dumps(off)])
    assert not any("isSymmetryOf" in m for m in plain["moveInfos"])
    assert sum(m["visits"] for m in plain["moveInfos"]) == 15
    bad = line | {"overrideSettings": {"rootSymmetryPruning": 1}}
    (error,) = session([json.dumps(bad)])
    assert error["error"] == "Could not set settings: rootSymmetryPruning must be true or false"
    # The engine's own default, which a query's setting overrides.
    eng = AnalysisEngine(
        model(), symmetry=0, visits=1, batch_size=8, min_batch=8, root_symmetry_pruning=False
    )
    (unpruned,) = session([json.dumps(line)], eng)
    assert unpruned["moveInfos"] == plain["moveInfos"]
    on = line | {"overrideSettings": {"rootSymmetryPruning": True}}
    (pruned,) = session([json.dumps(on)], eng)
    assert pruned["moveInfos"] == reply["moveInfos"]
    # gojax analysis --no-root-symmetry-pruning makes such an engine.
    import argparse

    from eval.analysis import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    flags = ["analysis", "--model", "net.bin.gz"]
    assert not parser.parse_args(flags).no_root_symmetry_pruning
    assert parser.parse_args([*flags, "--no-root-symmetry-pruning"]).no_root_symmetry_pruning


def test_searched_ownership_is_the_trees_mean_as_katagos():
    """With ``includeOwnership`` a searched root reports the mean ownership of the tree's
    evaluations (KataGo's ``getAverageTreeOwnership``), not its own evaluation's."""
    from gojax.search import SearchConfig, katago_evaluator, search

    moves = [["B", "E5"], ["W", "C3"], ["B", "G7"]]
    line = query(id="own", moves=moves, maxVisits=8, includeOwnership=True)
    line["overrideSettings"] = {"ignorePreRootHistory": False}  # as the search below
    (reply,) = session([json.dumps(line)])  # Black's view (--report-as BLACK)
    (raw,) = session([json.dumps(line | {"maxVisits": 1})])
    state = jax.tree.map(lambda x: x[None], state_from_moves(9, moves, komi=7, rules="chinese"))
    evaluator = katago_evaluator(model(), symmetry=0, ownership=True)
    config = SearchConfig(
        num_simulations=7,
        dirichlet_fraction=0.0,
        temperature_moves=0,
        root_symmetry_pruning=True,  # the analysis engine's default, as KataGo's
    )
    out = search(evaluator, state, jax.random.key(0), config)
    np.testing.assert_allclose(reply["ownership"], out.ownership[0], atol=1e-5)
    (spread,) = session([json.dumps(line | {"includeOwnershipStdev": True})])
    np.testing.assert_allclose(spread["ownershipStdev"], out.ownership_stdev[0], atol=1e-5)
    assert max(spread["ownershipStdev"]) > 0.05 and "warning" not in spread
    (one,) = session([json.dumps(line | {"maxVisits": 1, "includeOwnershipStdev": True})])
    assert one["ownershipStdev"] == [0.0] * 81  # one evaluation has no spread
    assert not np.allclose(reply["ownership"], raw["ownership"], atol=1e-3)  # premise
    assert reply["moveInfos"][0]["move"] == action_to_gtp(int(out.action[0]), 9)
    # includeMovesOwnership: each move's subtree mean, so that the root's mean is its own
    # evaluation's share plus each move's visits times its mean.
    extra = {"includeMovesOwnership": True, "includeMovesOwnershipStdev": True}
    (moves_reply,) = session([json.dumps(line | extra)])
    infos = searched_infos(moves_reply)
    for m in infos:  # a move searched once has one evaluation: no spread
        assert len(m["ownershipStdev"]) == 81 and min(m["ownershipStdev"]) >= 0
        assert (max(m["ownershipStdev"]) > 0) == (m["visits"] > 1)
    total = np.asarray(raw["ownership"]) + sum(
        m["visits"] * np.asarray(m["ownership"]) for m in infos
    )
    np.testing.assert_allclose(
        total / moves_reply["rootInfo"]["visits"], reply["ownership"], atol=1e-4
    )
    searched = [m for m in infos if m["visits"] > 1]
    assert searched and all(
        not np.allclose(m["ownership"], infos[0]["ownership"], atol=1e-3) for m in searched[1:]
    )


def test_reports_during_a_search_lead_to_the_same_final_result():
    """``reportDuringSearchEvery``: replies with ``isDuringSearch`` true and growing visits,
    then the final reply, equal to the same query's without reports (symmetry 0: the parts
    resume one deterministic search)."""
    eng = engine()
    line = query(id="r", maxVisits=48, includeOwnership=True, analysisPVLen=4)
    (plain,) = session([json.dumps(line)], eng)
    asks = {"reportDuringSearchEvery": 0.001, "includeOwnership": True}
    replies = session([json.dumps(line | asks), json.dumps(query(id="quiet", maxVisits=48))], eng)
    during = [r for r in replies if r["id"] == "r" and r["isDuringSearch"]]
    finals = [r for r in replies if not r["isDuringSearch"]]
    assert [r["id"] for r in finals] == ["r", "quiet"]  # no reports for a query without
    assert replies.index(finals[0]) == len(during)  # the reports come first
    visits = [r["rootInfo"]["visits"] for r in during]
    assert len(visits) >= 2 and visits == sorted(set(visits)) and visits[-1] < 48
    for r in during:
        assert len(r["ownership"]) == 81 and r["turnNumber"] == 2
        assert sum(m["visits"] for m in searched_infos(r)) == r["rootInfo"]["visits"] - 1
    final = finals[0]
    assert final["moveInfos"] == plain["moveInfos"]
    np.testing.assert_allclose(final["ownership"], plain["ownership"], atol=1e-6)
    assert final["rootInfo"]["winrate"] == pytest.approx(plain["rootInfo"]["winrate"], abs=1e-6)


def test_reports_are_streamed_after_the_lines_own_replies():
    """With ``emit`` (the stream), warnings come out before the reports, the reports as
    they are made, the final result when its search ends; ``handle`` returns nothing."""
    eng = engine()
    emitted: list[dict] = []
    lines = [
        json.dumps(query(id="r", maxVisits=24, typo=1, firstReportDuringSearchAfter=0.001)),
        json.dumps({"id": "v", "action": "query_version"}),
    ]
    assert eng.handle(lines, emitted.append) == []
    assert [r.get("warning") is not None for r in emitted[:1]] == [True]
    assert emitted[1]["id"] == "v" and "version" in emitted[1]
    assert [r["isDuringSearch"] for r in emitted[2:]] == [True, False]  # one first report
    assert emitted[-1]["id"] == "r" and emitted[-1]["rootInfo"]["visits"] == 24


def test_max_time_stops_a_search_and_leaves_the_others_in_its_batch_alone():
    """``overrideSettings.maxTime`` (KaTrain sends it with every query): a position's search
    stops growing when its time is up, with the visits it has; the others of its batch
    run to their ``maxVisits``."""
    eng = unmeasured(engine())
    hurried = query(id="hurried", maxVisits=200, overrideSettings={"maxTime": 0.001})
    patient = query(id="patient", maxVisits=40, overrideSettings={"maxTime": 1e6})
    replies = {r["id"]: r for r in session([json.dumps(hurried), json.dumps(patient)], eng)}
    # A first part of 1% of the visits measures the speed; by then the time is up.
    assert replies["hurried"]["rootInfo"]["visits"] == 3
    assert sum(m["visits"] for m in searched_infos(replies["hurried"])) == 2
    assert replies["patient"]["rootInfo"]["visits"] == 40
    assert not any(r["isDuringSearch"] for r in replies.values())
    (alone,) = session([json.dumps(query(id="patient", maxVisits=40))], eng)
    assert alone["moveInfos"] == replies["patient"]["moveInfos"]  # the same search


def unmeasured(eng: AnalysisEngine) -> AnalysisEngine:
    """``eng`` with no search speed remembered: its next search in parts begins with the
    short part that measures it (1% of the visits), whatever the tests before it ran."""
    eng._speeds.clear()
    return eng


class _Incoming:
    """A stream's reader as ``handle`` sees it: ``lines`` become available at the
    ``after``-th look (0: the first), once; what is given back is kept."""

    live = True  # lines may arrive during a search: searches run in parts

    def __init__(self, lines: list[str], after: int) -> None:
        self.lines, self.after, self.looks, self.back = list(lines), after, 0, []

    def take_ready(self) -> list[str]:
        self.looks += 1
        if self.looks <= self.after:
            return []
        out, self.lines = self.lines, []
        return out

    def give_back(self, lines: list[str]) -> None:
        self.back = list(lines) + self.back


def test_a_terminate_arriving_during_a_search_stops_it_at_once():
    """KaTrain terminates queries it no longer needs: between the parts of a search run in
    parts (``maxTime`` here) the terminated turn stops growing and replies with what it
    has, its batch-mate goes on, and a query line read meanwhile waits for the next batch."""
    eng = unmeasured(engine())
    long = query(id="long", maxVisits=200, analyzeTurns=[1, 2], overrideSettings={"maxTime": 1e6})
    stop = {"id": "t", "action": "terminate", "terminateId": "long", "turnNumbers": [2]}
    later = json.dumps(query(id="later"))
    incoming = _Incoming([json.dumps(stop), later], after=1)  # after the first part
    emitted: list[dict] = []
    assert eng.handle([json.dumps(long)], emitted.append, incoming) == []
    assert emitted[0] == stop  # the echo, at once
    assert incoming.back == [later]
    replies = emitted[1:]
    by_turn = {r["turnNumber"]: r for r in replies}
    assert [r["isDuringSearch"] for r in replies] == [False, False]
    assert by_turn[1]["rootInfo"]["visits"] == 200
    assert by_turn[2]["rootInfo"]["visits"] == 3  # the first part's 1% and no more
    # Terminated before their search began: KataGo's noResults.
    incoming = _Incoming([json.dumps({"id": "all", "action": "terminate_all"})], after=0)
    replies = eng.handle([json.dumps(long)], None, incoming)
    assert [r.get("noResults") for r in replies[:2]] == [True, True]
    assert replies[2]["id"] == "all" and incoming.back == []


def test_a_stream_stops_any_search_at_a_terminate():
    """Read from a stream, a search without reports or ``maxTime`` runs in parts too
    (about ``_TERMINATE_POLL`` seconds each), so that a terminate stops it; its result
    is then the one search's, as far as it got. Without the stream it runs at once."""
    eng = unmeasured(engine())
    plain = query(id="plain", maxVisits=200)
    stop = {"id": "t", "action": "terminate", "terminateId": "plain"}
    incoming = _Incoming([json.dumps(stop)], after=1)  # after the first part
    emitted: list[dict] = []
    eng.handle([json.dumps(plain)], emitted.append, incoming)
    (echo, reply) = emitted
    assert echo == stop and incoming.looks >= 2
    assert reply["rootInfo"]["visits"] == 3 and not reply["isDuringSearch"]
    # Nothing arrives: the parts make the whole search, the same as at once.
    emitted.clear()
    eng.handle([json.dumps(plain)], emitted.append, _Incoming([], after=0))
    (parted,) = emitted
    (whole,) = eng.handle([json.dumps(plain)])
    assert parted["rootInfo"]["visits"] == whole["rootInfo"]["visits"] == 200
    assert [m["move"] for m in parted["moveInfos"]] == [m["move"] for m in whole["moveInfos"]]
    assert [m["visits"] for m in parted["moveInfos"]] == [m["visits"] for m in whole["moveInfos"]]


@functools.cache
def small_batches() -> AnalysisEngine:
    """An engine that searches two positions at a time: a batch's work in several parts."""
    return AnalysisEngine(model(), symmetry=0, visits=1, batch_size=2, min_batch=2)


def test_results_stream_as_they_are_made_higher_priority_first():
    """KaTrain asks for a whole game at a low priority and the move on screen at a high
    one: the high one is searched first and, read from a stream, its result comes out
    before the others are searched (KataGo's ``priority`` / ``priorities``); without a
    stream the replies keep the order of the lines and turns."""
    eng = small_batches()
    game = query(id="game", analyzeTurns=[0, 1, 2], maxVisits=8, priorities=[0, 5, 0])
    screen = query(id="screen", maxVisits=8, priority=10)
    lines = [json.dumps(game), json.dumps(screen)]
    emitted: list[dict] = []

    original = eng._analyse_positions

    def spy(states, index, *args, **kwargs):  # marks each batch of positions searched
        emitted.append({"searched": len(index)})
        return original(states, index, *args, **kwargs)

    eng._analyse_positions = spy
    assert eng.handle(lines, emitted.append) == []
    order = [(r["id"], r["turnNumber"]) if "id" in r else r["searched"] for r in emitted]
    # batch_size 2: the screen's turn and the game's priority-5 turn, then the others.
    assert order == [2, ("screen", 2), ("game", 1), 2, ("game", 0), ("game", 2)]
    emitted.clear()
    returned = eng.handle(lines)
    assert [(r["id"], r["turnNumber"]) for r in returned] == [
        ("game", 0),
        ("game", 1),
        ("game", 2),
        ("screen", 2),
    ]


def test_a_more_urgent_query_pauses_a_batch_and_goes_first():
    """A GUI asks for a whole game, then for the move on screen at a higher priority
    while the game is being searched: the game's batch pauses after the positions it
    is searching, the screen's query goes next, then the game's other turns."""
    eng = small_batches()
    game = json.dumps(query(id="game", analyzeTurns=[0, 1, 2], maxVisits=8))
    screen = json.dumps(query(id="screen", maxVisits=8, priority=1))
    emitted: list[dict] = []
    incoming = _Incoming([screen], after=1)  # arrives while turns 0 and 1 are searched
    assert eng.handle([game], emitted.append, incoming) == []
    assert [(r["id"], r["turnNumber"]) for r in emitted] == [("game", 0), ("game", 1)]
    assert incoming.back == [screen]
    assert [(q.id, q.turns) for q in eng.carried] == [("game", (2,))]
    eng.handle(incoming.back, emitted.append, _Incoming([], after=0))
    assert [(r["id"], r["turnNumber"]) for r in emitted[2:]] == [("screen", 2), ("game", 2)]
    assert eng.carried == [] and all("moveInfos" in r for r in emitted)
    # A query of the same priority waits its turn: no pause. A terminate reaches turns
    # carried over.
    emitted.clear()
    same = json.dumps(query(id="same", maxVisits=8))
    incoming = _Incoming([same], after=1)
    eng.handle([game], emitted.append, incoming)
    assert [r["turnNumber"] for r in emitted] == [0, 1, 2] and eng.carried == []
    emitted.clear()
    eng.handle([game], emitted.append, _Incoming([screen], after=1))
    stop = {"id": "t", "action": "terminate", "terminateId": "game"}
    eng.handle([json.dumps(stop)], emitted.append, _Incoming([], after=0))
    turns = [r for r in emitted if "turnNumber" in r]
    assert [(r["turnNumber"], r.get("noResults", False)) for r in turns] == [
        (0, False),
        (1, False),
        (2, True),
    ]
    assert {"id": "t", "action": "terminate", "terminateId": "game"} in emitted


def test_serve_finishes_the_work_carried_over_at_the_end_of_the_input():
    eng = small_batches()
    eng.carried = [parse(id="left", analyzeTurns=[1, 2], maxVisits=2)[0]]
    replies = session([], eng)
    assert [(r["id"], r["turnNumber"]) for r in replies] == [("left", 1), ("left", 2)]
    assert eng.carried == []


def test_a_querys_katago_settings_change_its_search_alone():
    """Queries with different KataGo search settings in one batch are searched apart,
    each with its own: no first-play urgency reduction at the root spreads the visits,
    a large one keeps them on the move tried first (without wide root noise, which
    spreads them too)."""
    eng = AnalysisEngine(
        model(), symmetry=0, visits=1, batch_size=2, min_batch=2, search="katago",
        wide_root_noise=0.0,
    )  # fmt: skip
    position = {"moves": [["B", "C3"], ["W", "D3"], ["B", "B2"]], "boardXSize": 5,
                "boardYSize": 5, "komi": 0.5, "maxVisits": 25}  # fmt: skip
    wide = query(id="wide", rootFpuReductionMax=0, **position)
    narrow = query(id="narrow", overrideSettings={"rootFpuReductionMax": 2}, **position)
    default = query(id="default", **position)
    replies = {r["id"]: r for r in session([json.dumps(q) for q in (wide, narrow, default)], eng)}
    searched = {k: len(r["moveInfos"]) for k, r in replies.items()}
    assert searched["wide"] > searched["default"] > searched["narrow"] == 1, searched
    assert all(r["rootInfo"]["visits"] == 25 for r in replies.values())
    # KataGo's wide root noise, the engine's (by default KataGo's 0.04) or a query's own:
    # much of it spreads the visits even where first-play urgency keeps them on one move.
    assert AnalysisEngine(model(), search="katago").wide_root_noise == 0.04
    noisy = narrow | {
        "id": "noisy",
        "overrideSettings": {"rootFpuReductionMax": 2, "wideRootNoise": 1},
    }
    (reply,) = session([json.dumps(noisy)], eng)
    assert len(reply["moveInfos"]) > 1 and reply["rootInfo"]["visits"] == 25
    # The PUCT engine has no such settings: it says so and searches as ever.
    (warning, reply) = session([json.dumps(wide)], small_batches())
    assert warning == {"field": "rootFpuReductionMax", "id": "wide",
                       "warning": "Needs the KataGo search (--search katago), ignored"}  # fmt: skip
    assert reply["id"] == "wide" and reply["rootInfo"]["visits"] == 25
    # Its root policy temperature it has: a hot root spreads the visits, a cold one not.
    hot = query(id="hot", rootPolicyTemperature=20, **position)
    cold = query(id="cold", rootPolicyTemperature=0.05, **position)
    replies = {r["id"]: r for r in session([json.dumps(hot), json.dumps(cold)], small_batches())}
    searched = {k: len(r["moveInfos"]) for k, r in replies.items()}
    assert searched["hot"] > searched["cold"], searched
    # The prior reported is the one searched with, tempered (as KataGo's policyPrior).
    priors = {k: max(m["prior"] for m in r["moveInfos"]) for k, r in replies.items()}
    assert priors["hot"] < 0.5 < priors["cold"], priors


def test_analysis_search_kinds_are_checked():
    with pytest.raises(ValueError, match="search must be"):
        AnalysisEngine(model(), search="gumbel")
    with pytest.raises(ValueError, match="wide root noise needs the KataGo search"):
        AnalysisEngine(model(), wide_root_noise=0.04)
    assert AnalysisEngine(model()).wide_root_noise == 0.0  # the PUCT engine: none
    with pytest.raises(ValueError, match="only the katago search weighs scores"):
        AnalysisEngine(model(), score_utility=False)


@pytest.mark.slow
def test_search_at_eight_visits_is_consistent_and_independent_of_batching():
    """Visits add up, order and PVs make sense, and a position's analysis is the same
    alone and in a batch with others (symmetry 0: the search is deterministic)."""
    eng = engine()
    lines = [
        json.dumps(
            query(
                id=f"s{i}",
                moves=moves,
                maxVisits=8,
                analyzeTurns=list(range(len(moves) + 1))[-2:],
                analysisPVLen=3,
            )
        )
        for i, moves in enumerate(
            [
                [["B", "E5"], ["W", "C3"]],
                [["B", "C7"], ["W", "G3"], ["B", "G7"]],
                [["B", "D4"]],
            ]
        )
    ]
    batched = session(lines, eng)
    assert len(batched) == 6
    for reply in batched:
        infos, root = searched_infos(reply), reply["rootInfo"]
        assert root["visits"] == 8
        assert sum(m["visits"] for m in infos) == 7
        assert [m["order"] for m in reply["moveInfos"]] == list(range(len(reply["moveInfos"])))
        assert infos[0]["visits"] == max(m["visits"] for m in infos)
        assert all(m["visits"] > 0 for m in infos)
        for m in infos:
            assert m["pv"][0] == m["move"] and 1 <= len(m["pv"]) <= 4
            assert 0 <= m["winrate"] <= 1 and 0 < m["prior"] <= 1
            assert m["scoreMean"] == m["scoreLead"]
        assert sum(m["prior"] for m in infos) <= 1 + 1e-5
    alone = session(lines[1:2], eng)
    together = [r for r in batched if r["id"] == "s1"]
    for single, batch in zip(alone, together, strict=True):
        assert [m["move"] for m in single["moveInfos"]] == [m["move"] for m in batch["moveInfos"]]
        assert [m["visits"] for m in single["moveInfos"]] == [
            m["visits"] for m in batch["moveInfos"]
        ]
        assert single["rootInfo"]["winrate"] == pytest.approx(batch["rootInfo"]["winrate"], 1e-4)


@pytest.mark.slow
def test_gojax_analysis_subprocess_session():
    model_path = reference_path("katago", MODEL)
    lines = [
        json.dumps(query(id="one", maxVisits=1)),
        "{broken",
        json.dumps(query(id="two", moves=[], maxVisits=2, includeOwnership=True)),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "eval.cli", "analysis", "--model", str(model_path)]
        + ["--symmetry", "0", "--batch-size", "4"],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    # The error about a line at once, the results as their searches end.
    assert [r.get("id") for r in replies] == [None, "one", "two"]
    assert "error" in replies[0] and replies[1]["rootInfo"]["visits"] == 1
    assert replies[2]["rootInfo"]["visits"] == 2 and len(replies[2]["ownership"]) == 81
    assert "ready" in done.stderr


@pytest.mark.slow
def test_gojax_analysis_pipe_answers_an_urgent_query_before_the_rest_of_a_game():
    """Through a real pipe: a whole game at priority 0, then, once its first turn is
    answered, a query at priority 1 -- answered before the game's last turns, which all
    still come (the batch paused, carried them over and finished them)."""
    turns = list(range(8))
    moves = ["E5", "C3", "D4", "F6", "C7", "G3", "E3", "D7"]
    game = query(id="game", moves=[["BW"[i % 2], m] for i, m in enumerate(moves)])
    game["analyzeTurns"] = turns
    urgent = query(id="urgent", priority=1)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "eval.cli", "analysis", "--model"]
    command += [str(reference_path("katago", MODEL)), "--symmetry", "0", "--batch-size", "1"]
    command += ["--visits", "48"]
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env=env,
    ) as engine_process:
        engine_process.stdin.write(json.dumps(game) + "\n")
        engine_process.stdin.flush()
        replies = [json.loads(engine_process.stdout.readline())]
        engine_process.stdin.write(json.dumps(urgent) + "\n")
        engine_process.stdin.close()  # the engine finishes everything, then exits
        replies += [json.loads(line) for line in engine_process.stdout]
        assert engine_process.wait(timeout=600) == 0
    order = [(r["id"], r["turnNumber"]) for r in replies]
    assert sorted(order) == sorted([("game", t) for t in turns] + [("urgent", 2)])
    assert order[0] == ("game", 0)
    assert order.index(("urgent", 2)) < order.index(("game", 7))


def test_gojax_analysis_bad_model_exits_2(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "eval.cli", "analysis", "--model", str(tmp_path / "none.bin.gz")],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "error" in done.stderr
