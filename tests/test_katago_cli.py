"""A drop-in for KataGo's clients: KataGo's command line and config files, its visit
bound, and the settings gojax does not honour, said once.

``gojax analysis -model M -config C.cfg -override-config k=v`` (KaTrain) and ``gojax gtp
-model M -config C.cfg`` (Lizzie, Sabaki) start the engines as those clients start
``katago``; ``maxVisits`` goes to KataGo's 2^50, a search growing until its tree is full,
its ``maxTime`` or a ``terminate``.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys
import threading

import pytest
from reference import REPO, reference_path

from eval import katago_config
from eval.analysis import AnalysisEngine
from eval.analysis_query import QueryError, parse_query
from eval.katago_config import ConfigError, read_settings
from gojax.katago_model import load_model

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"

ANALYSIS_CFG = """\
# A KataGo analysis config, as KaTrain ships one
logFile = "~/.katrain/katago_log.txt"
reportAnalysisWinratesAs = WHITE   # comment after a value
maxVisits = 3
numSearchThreads = 6
nnMaxBatchSize = 64
nnCacheSizePowerOfTwo = 19
conservativePass = true
playoutDoublingAdvantage = 0.5
@include more.cfg
"""


def query(**fields) -> dict:
    base = {"id": "q", "moves": [["B", "E5"], ["W", "C3"]], "rules": "chinese", "komi": 7,
            "boardXSize": 9, "boardYSize": 9}  # fmt: skip
    return {k: v for k, v in (base | fields).items() if v is not None}


def write_config(tmp_path, text: str = ANALYSIS_CFG) -> str:
    (tmp_path / "more.cfg").write_text("analysisPVLen = 2\n")
    path = tmp_path / "analysis.cfg"
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------
# KataGo's config format and command line (no network)


def test_a_config_is_read_as_katagos_config_parser_reads_it(tmp_path):
    path = write_config(tmp_path)
    settings = read_settings(path)
    assert settings["reportAnalysisWinratesAs"] == "WHITE"  # the comment cut off
    assert settings["logFile"] == '"~/.katrain/katago_log.txt"'
    assert settings["analysisPVLen"] == "2"  # from the included file
    # -override-config: later wins, an empty value drops a key, and the rules given
    # one way drop them given the other (KataGo's mutex key sets).
    (tmp_path / "rules.cfg").write_text("koRule = SIMPLE\nscoringRule = AREA\nmaxTime = 1\n")
    overrides = ["maxTime=, rules = japanese", "homeDataDir=/tmp/x"]
    settings = read_settings(str(tmp_path / "rules.cfg"), overrides)
    assert settings == {"rules": "japanese", "homeDataDir": "/tmp/x"}
    (tmp_path / "twice.cfg").write_text("maxVisits = 1\nmaxVisits = 2\n")
    with pytest.raises(ConfigError, match="line 2: key maxVisits is given twice"):
        read_settings(str(tmp_path / "twice.cfg"))
    (tmp_path / "bad.cfg").write_text("maxVisits 2\n")
    with pytest.raises(ConfigError, match="not a 'key = value' line"):
        read_settings(str(tmp_path / "bad.cfg"))
    with pytest.raises(ConfigError, match="could not find '='"):
        read_settings(None, ["maxVisits"])
    with pytest.raises(ConfigError, match="cannot read KataGo config"):
        read_settings(str(tmp_path / "missing.cfg"))


def test_analysis_config_keys_become_the_engines_options(tmp_path):
    settings = read_settings(write_config(tmp_path), ["maxTime=5, wideRootNoise=0.1"])
    settings |= {"cpuctExploration": "1.1", "rootSymmetryPruning": "false"}
    mapped = katago_config.analysis_options(settings, "katago")
    assert mapped.options == {
        "report_as": "WHITE",
        "visits": 3,
        "pv_length": 2,
        "max_time": 5.0,
        "wide_root_noise": 0.1,
        "root_symmetry_pruning": False,
        "search_settings": {"cpuct_exploration": 1.1},
        "nn_cache": 16,  # KaTrain's 19, at most the largest table allocated whole here
    }
    line = katago_config.ignored_line("analysis", "analysis.cfg", mapped)
    assert line.startswith("gojax analysis: KataGo config analysis.cfg: ignored logFile, ")
    assert "numSearchThreads, nnMaxBatchSize, conservativePass" in line
    assert line.endswith(
        "not supported: nnCacheSizePowerOfTwo above 16 (16 used), "
        "playoutDoublingAdvantage (no playout doubling advantage)"
    )
    assert "\n" not in line
    # KataGo's constants need KataGo's search; KataGo's own default perspective.
    mapped = katago_config.analysis_options({"cpuctExploration": "1.1"}, "puct")
    assert mapped.options == {"report_as": "SIDETOMOVE"}
    assert mapped.unsupported == ["cpuctExploration (needs --search katago)"]
    assert katago_config.analysis_options({}, "puct", config_file=False).options == {}
    # KataGo's bounds: 2^50 visits.
    assert (
        katago_config.analysis_options({"maxVisits": "10000000"}, "puct").options["visits"]
        == 10_000_000
    )
    for key, text, message in (
        ("maxVisits", "0", "maxVisits must be an integer from 1 to 2\\^50"),
        ("maxTime", "soon", "maxTime must be a number"),
        ("reportAnalysisWinratesAs", "black", "BLACK|WHITE|SIDETOMOVE"),
        ("wideRootNoise", "9", "from 0 to 5"),
    ):
        with pytest.raises(ConfigError, match=message):
            katago_config.analysis_options({key: text}, "katago")


def test_gtp_config_keys_become_flags_and_parameters():
    settings = {
        "logDir": "gtp_logs",
        "rules": "japanese",
        "maxVisits": "500",
        "maxTime": "10",
        "lagBuffer": "0.5",
        "allowResignation": "true",
        "resignThreshold": "-0.90",
        "resignConsecTurns": "3",
        "numSearchThreads": "8",
        "ponderingEnabled": "false",
        "searchFactorAfterOnePass": "0.5",
        "humanSLProfile": "preaz_5k",
    }
    mapped = katago_config.gtp_options(settings)
    assert mapped.options == {"rules": "japanese", "visits": 499, "lag": 0.5,
                              "resign_threshold": pytest.approx(0.05)}  # fmt: skip
    assert mapped.settings == {"maxTime": "10", "allowResignation": "true",
                               "ponderingEnabled": "false"}  # fmt: skip
    assert mapped.no_effect == ["logDir", "numSearchThreads"]
    assert mapped.unsupported == ["searchFactorAfterOnePass", "humanSLProfile (no human SL model)"]
    assert katago_config.gtp_parameters(mapped, ["maxTime"]) == {"maxTime": "10"}
    assert mapped.unsupported[-2:] == ["allowResignation (not for this player)",
                                       "ponderingEnabled (not for this player)"]  # fmt: skip
    # Rules given by their parts, and rules no preset has (noted, the nearest used).
    parts = {"koRule": "POSITIONAL", "scoringRule": "AREA", "multiStoneSuicideLegal": "true"}
    assert katago_config.gtp_options(parts).options == {"rules": "tromp-taylor"}
    mapped = katago_config.gtp_options({"rules": "stone_scoring", "maxVisits": "10000000"})
    assert mapped.options == {"rules": "chinese", "visits": 65535}
    assert "maxVisits above 65536 (65536 used)" in mapped.unsupported
    assert any("group tax" in note for note in mapped.unsupported)
    with pytest.raises(ConfigError, match="Could not parse rules: chess"):
        katago_config.gtp_options({"rules": "chess"})


def test_both_commands_take_katagos_command_line():
    from eval.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(
        ["analysis", "-model", "m.bin.gz", "-config", "a.cfg", "-override-config", "a=1",
         "-override-config", "b=2", "-analysis-threads", "4", "-quit-without-waiting"]
    )  # fmt: skip
    assert (args.model, args.config, args.katago_overrides) == ("m.bin.gz", "a.cfg", ["a=1", "b=2"])
    assert args.analysis_threads == 4 and args.quit_without_waiting
    assert args.search == "katago"  # KataGo's search, so that its settings apply
    args = parser.parse_args(["gtp", "-model", "m.bin.gz", "-config", "g.cfg", "-human-model", "h"])
    assert (args.model, args.config, args.human_model) == ("m.bin.gz", "g.cfg", "h")
    assert args.katago_overrides is None and args.override_config is None
    warm = parser.parse_args(["analysis", "--model", "m", "--warm-up", "19:japanese, 9"]).warm_up
    assert warm == [(19, "japanese"), (9, "chinese")]
    for bad in ("19:chess", "30", "nine"):
        with pytest.raises(SystemExit):
            parser.parse_args(["analysis", "--model", "m", "--warm-up", bad])


def test_a_katago_config_implies_the_boards_to_warm_up():
    """An analysis config names no board: KaTrain's 19x19 and 9x9 under its default
    japanese rules, within KataGo's largest board; gojax's own key says otherwise."""
    boards = katago_config.warm_up_boards
    assert boards({}) == [(19, "japanese"), (9, "japanese")]
    assert boards({"maxBoardXSizeForNNBuffer": "13", "maxBoardYSizeForNNBuffer": "19"}) == [
        (9, "japanese")
    ]
    assert boards({"maxBoardXSizeForNNBuffer": "7"}) == [(7, "japanese")]
    only = {"maxBoardXSizeForNNBuffer": "13", "maxBoardYSizeForNNBuffer": "13"}
    assert boards(only | {"requireMaxBoardSize": "true"}) == [(13, "japanese")]
    large = {"maxBoardXSizeForNNBuffer": "29", "maxBoardYSizeForNNBuffer": "29"}
    assert boards(large | {"requireMaxBoardSize": "1"}) == []  # gojax's boards end at 25
    assert boards({"gojaxWarmUp": "13:tromp-taylor, 9"}) == [(13, "tromp-taylor"), (9, "chinese")]
    assert boards({"gojaxWarmUp": "none", "maxBoardXSizeForNNBuffer": "9"}) == []
    with pytest.raises(ConfigError, match="key gojaxWarmUp: expected SIZE.*got '30'"):
        boards({"gojaxWarmUp": "30"})
    with pytest.raises(ConfigError, match="maxBoardYSizeForNNBuffer must be an integer"):
        boards({"maxBoardYSizeForNNBuffer": "big"})
    # Read for the warm-up, so not named as ignored; a GTP config has no warm-up.
    settings = {"gojaxWarmUp": "9", "maxBoardXSizeForNNBuffer": "19", "numSearchThreads": "2"}
    mapped = katago_config.analysis_options(settings, "katago")
    assert (mapped.no_effect, mapped.unsupported) == (["numSearchThreads"], [])
    mapped = katago_config.gtp_options(settings)
    assert mapped.unsupported == ["gojaxWarmUp"]
    assert mapped.no_effect == ["maxBoardXSizeForNNBuffer", "numSearchThreads"]


def test_gtp_engine_from_a_katago_config(tmp_path, capsys):
    """A KataGo GTP config (read with ``-config``) sets the player's visits, the rules,
    the clock's lag and KataGo's parameters; a flag given wins; what gojax has no use for
    is named in one stderr line."""
    from eval.cli import build_parser
    from eval.gtp import make_engine

    path = tmp_path / "gtp.cfg"
    path.write_text(
        "logDir = gtp_logs\nrules = chinese\nmaxVisits = 9\nmaxTime = 3\nlagBuffer = 0.25\n"
        "allowResignation = true\nresignThreshold = -0.8\nnumSearchThreads = 4\n"
        "ponderingEnabled = false\nantiMirror = true\n"
    )
    argv = ["gtp", "--player", "uct", "--size", "5", "-config", str(path)]
    engine = make_engine(build_parser().parse_args([*argv, "-override-config", "maxTime=2"]))
    assert engine.player.visits == 8 and engine.rules == "chinese"
    assert engine.max_time == 2.0 and engine.lag == 0.25
    assert engine.resign_threshold == pytest.approx(0.1)
    assert not engine.pondering
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"gojax gtp: KataGo config {path}: ignored logDir, numSearchThreads (threads, "
        "batches, caches, devices, logs: nothing to do here); not supported: antiMirror "
        "(no anti-mirror play)"
    ]
    engine = make_engine(build_parser().parse_args([*argv, "--visits", "4", "--rules", "aga"]))
    assert engine.player.visits == 4 and engine.rules == "aga"  # the flags given win


# ----------------------------------------------------------------------------
# Queries: KataGo's visit bound, settings said once


def test_max_visits_goes_to_katagos_bound():
    q, _ = parse_query(query(maxVisits=10_000_000), visits=1, report_as="BLACK")
    assert q.visits == 10_000_000
    q, _ = parse_query(query(overrideSettings={"maxVisits": 1 << 50}), visits=1, report_as="BLACK")
    assert q.visits == 1 << 50
    with pytest.raises(QueryError, match=r"Must be an integer from 1 to 2\^50"):
        parse_query(query(maxVisits=(1 << 50) + 1), visits=1, report_as="BLACK")


def test_settings_gojax_lacks_are_warned_unless_at_katagos_default():
    settings = {"playoutDoublingAdvantage": 1.5, "antiMirror": "true", "humanSLProfile": "rank_5k"}
    _, warnings = parse_query(query(overrideSettings=settings), visits=1, report_as="BLACK")
    assert [f for f, _ in warnings] == ["overrideSettings"] * 3
    assert warnings[2][1] == (
        "playoutDoublingAdvantage is not supported: gojax's search has no playout doubling "
        "advantage; analysed without it (said once)"
    )
    defaults = {"playoutDoublingAdvantage": 0, "antiMirror": False, "humanSLProfile": ""}
    assert parse_query(query(overrideSettings=defaults), visits=1, report_as="BLACK")[1] == []


# ----------------------------------------------------------------------------
# The engine on the reference net


@functools.cache
def model():
    return load_model(reference_path("katago", MODEL))


def serve(eng: AnalysisEngine, lines: list[str]) -> list[dict]:
    stdout = io.StringIO()
    eng.serve(io.StringIO("".join(line + "\n" for line in lines)), stdout)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


def test_unsupported_settings_and_rules_are_said_once_per_engine(capsys):
    eng = AnalysisEngine(model(), symmetry=0, visits=1)
    pda = {"playoutDoublingAdvantage": 0.5}
    lines = [
        json.dumps(query(id="a", overrideSettings=pda, rules="stone_scoring")),
        json.dumps(query(id="b", overrideSettings=pda, rules="stone-scoring")),
        json.dumps(query(id="c", overrideSettings=pda | {"antiMirror": True})),
    ]
    replies = serve(eng, lines)
    warnings = [(r["id"], r["field"]) for r in replies if "warning" in r]
    assert warnings == [("a", "rules"), ("a", "overrideSettings"), ("c", "overrideSettings")]
    assert "antiMirror" in replies[2]["warning"] and replies[2]["id"] == "c"
    results = [r for r in replies if "rootInfo" in r]
    assert [r["id"] for r in results] == ["a", "b", "c"]  # every query analysed
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("gojax analysis: ") for line in err)
    assert "using chinese instead" in err[0]
    (again,) = serve(eng, lines[:1])  # later: no warning, the result
    assert again["id"] == "a" and "rootInfo" in again


def test_engine_defaults_from_a_config_file():
    """``maxTime``, ``analysisPVLen`` and KataGo's search settings of a config are the
    engine's defaults: a query without its own is searched with them."""
    eng = AnalysisEngine(model(), symmetry=0, visits=6, pv_length=1, max_time=1e6)
    (reply,) = serve(eng, [json.dumps(query())])
    assert reply["rootInfo"]["visits"] == 6
    assert max(len(m["pv"]) for m in reply["moveInfos"]) <= 2
    assert eng._time_limit(parse_query(query(), visits=1, report_as="BLACK")[0]) == 1e6
    timed = query(overrideSettings={"maxTime": 3})
    assert eng._time_limit(parse_query(timed, visits=1, report_as="BLACK")[0]) == 3


@functools.cache
def small_tree_engine() -> AnalysisEngine:
    """Trees of at most 1,024 visits: a search asked for 10,000,000 fills one."""
    return AnalysisEngine(model(), symmetry=0, visits=1, max_tree_visits=1024)


def test_a_search_beyond_the_tree_goes_on_until_it_is_full():
    eng = small_tree_engine()
    huge = query(maxVisits=10_000_000, overrideSettings={"maxTime": 1e6})
    (reply,) = serve(eng, [json.dumps(huge)])
    assert reply["rootInfo"]["visits"] == 1024 and not reply["isDuringSearch"]


def test_a_huge_search_reports_as_it_grows_until_terminated():
    """KaTrain's pondering: ``maxVisits`` 10,000,000 with ``reportDuringSearchEvery``;
    through a real pipe the reports come with more and more visits until a ``terminate``
    ends the search, which then gives its final reply."""
    eng = small_tree_engine()
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    stdin, stdout = os.fdopen(in_read, "r"), os.fdopen(out_write, "w")
    worker = threading.Thread(target=eng.serve, args=(stdin, stdout), daemon=True)
    worker.start()
    feed, replies = os.fdopen(in_write, "w"), os.fdopen(out_read, "r")
    ponder = query(id="ponder", maxVisits=10_000_000, reportDuringSearchEvery=0.05)
    feed.write(json.dumps(ponder) + "\n")
    feed.flush()
    reports = []
    while len(reports) < 4:
        reports.append(json.loads(replies.readline()))
        assert reports[-1]["id"] == "ponder" and reports[-1]["isDuringSearch"], reports[-1]
    stop = {"id": "stop", "action": "terminate", "terminateId": "ponder"}
    feed.write(json.dumps(stop) + "\n")
    feed.flush()
    rest = []
    while not rest or rest[-1].get("isDuringSearch", True):
        rest.append(json.loads(replies.readline()))
    feed.close()  # the end of the input: the engine returns
    worker.join(timeout=120)
    assert not worker.is_alive()
    stdout.close()
    assert replies.read() == ""
    final = rest[-1]
    assert stop in rest  # the echo, before the final reply
    during = reports + [r for r in rest if r.get("isDuringSearch")]
    visits = [r["rootInfo"]["visits"] for r in during]
    assert visits == sorted(set(visits)), visits  # growing
    assert visits[-1] <= final["rootInfo"]["visits"] < 1024  # stopped, not full
    assert final["id"] == "ponder" and final["isDuringSearch"] is False


def test_visit_budgets_share_a_tree_size_a_program_and_a_batch():
    """Searches run in trees of a power of two nodes, each stopping at its own visits:
    queries of 100 and 120 visits are searched in one batch by one compiled program, and
    each gets what it would get alone."""
    eng = AnalysisEngine(model(), symmetry=0, visits=1, min_batch=2)
    batches = []
    original = eng._analyse_positions

    def spy(states, index, visits, *args, **kwargs):
        batches.append((len(index), visits))
        return original(states, index, visits, *args, **kwargs)

    eng._analyse_positions = spy
    a, b = query(id="a", maxVisits=100), query(id="b", maxVisits=120)
    replies = {r["id"]: r for r in serve(eng, [json.dumps(a), json.dumps(b)])}
    assert batches == [(2, 128)]
    assert [replies[k]["rootInfo"]["visits"] for k in "ab"] == [100, 120]
    (alone,) = serve(eng, [json.dumps(a)])
    assert alone["moveInfos"] == replies["a"]["moveInfos"]


def test_warm_up_compiles_what_the_first_query_needs():
    """``--warm-up 9:stone_scoring``: the first queries of that size compile no search
    and no evaluation of their own (their ``maxTime`` is all search), whatever their
    rules, ownership, visits (the config's tree, or the largest for more) or number (one
    batch of several queries runs at the batch sizes compiled)."""
    eng = AnalysisEngine(model(), symmetry=0, visits=24, max_tree_visits=64)
    eng.warm_up([(9, "stone_scoring")])
    compiled = (eng._search._cache_size(), eng._evaluate._cache_size())
    first = query(rules="chinese", includeOwnership=True, includeMovesOwnership=True)
    (reply,) = serve(eng, [json.dumps(first | {"overrideSettings": {"maxTime": 1e6}})])
    assert reply["rootInfo"]["visits"] == 24 and len(reply["moveInfos"][0]["ownership"]) == 81
    assert (eng._search._cache_size(), eng._evaluate._cache_size()) == compiled
    # Fewer visits: searched in the tree compiled for 24 (32 nodes), not one of its own,
    # and the same search as in a tree of its own size.
    fewer = first | {"maxVisits": 7}
    (small,) = serve(eng, [json.dumps(fewer)])
    assert small["rootInfo"]["visits"] == 7
    assert (eng._search._cache_size(), eng._evaluate._cache_size()) == compiled
    (alone,) = serve(AnalysisEngine(model(), symmetry=0, visits=24), [json.dumps(fewer)])
    assert alone["moveInfos"] == small["moveInfos"] and alone["rootInfo"] == small["rootInfo"]
    # Other rule sets, less ownership, more visits (the largest tree), several at once.
    others = [
        query(id="jp", rules="japanese"),
        query(id="tt", rules="tromp-taylor", includeOwnership=True),
        query(id="aga", rules="aga", maxVisits=50),
        *(query(id=f"n{i}", moves=[["B", "E5"], ["W", "C3"]][:i]) for i in range(3)),
    ]
    replies = {r["id"]: r for r in serve(eng, [json.dumps(q) for q in others])}
    assert {k: r["rootInfo"]["visits"] for k, r in replies.items()} == {
        "jp": 24, "tt": 24, "aga": 50, "n0": 24, "n1": 24, "n2": 24,
    }  # fmt: skip
    assert "ownership" in replies["tt"] and "ownership" not in replies["jp"]
    assert (eng._search._cache_size(), eng._evaluate._cache_size()) == compiled
    # Each as a fresh engine answers it alone, in programs of its own.
    fresh = AnalysisEngine(model(), symmetry=0, visits=24, max_tree_visits=64)
    for q in others[:2]:
        (alone,) = serve(fresh, [json.dumps(q)])
        assert alone["moveInfos"] == replies[q["id"]]["moveInfos"], q["id"]


def test_what_gojax_analysis_warms_up(tmp_path, monkeypatch, capsys):
    """Started with a KataGo config, ``gojax analysis`` compiles KaTrain's boards before
    its ready line, and says so first; ``--warm-up`` given wins, ``none`` (flag or
    config key) skips it; without a config nothing is compiled ahead."""
    from eval import cli
    from gojax import katago_model

    warmed: list = []
    monkeypatch.setattr(AnalysisEngine, "warm_up", lambda eng, boards: warmed.append(boards))
    monkeypatch.setattr(katago_model, "load_model", lambda path: model())
    config = write_config(tmp_path)

    def warms(*argv: str) -> list | None:
        warmed.clear()
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        assert cli.main(["analysis", "-model", "net.bin.gz", *argv]) == 0
        assert len(warmed) <= 1
        return warmed[0] if warmed else None

    assert warms("-config", config) == [(19, "japanese"), (9, "japanese")]
    err = capsys.readouterr().err.strip().splitlines()
    assert err[1] == (
        "gojax analysis: compiling the search of up to 3 visits for 19x19 japanese, 9x9 "
        "japanese (from the KataGo config; --warm-up none, or gojaxWarmUp = none in the "
        "config, skips this)"
    )
    assert err[-1].endswith("; ready (compiled in 0 s)")
    assert warms("-config", config, "--warm-up", "9:aga") == [(9, "aga")]
    assert "(from --warm-up;" in capsys.readouterr().err
    assert warms("-config", config, "--warm-up", "none") is None
    assert warms("-config", config, "-override-config", "gojaxWarmUp=none") is None
    assert warms("-config", config, "-override-config", "gojaxWarmUp=13") == [(13, "chinese")]
    capsys.readouterr()
    assert warms("-override-config", "maxVisits=5") is None  # no config file: as before
    assert warms() is None
    assert "compiling" not in capsys.readouterr().err


def test_gojax_analysis_cache_and_leaf_batch_flags_reach_the_engine(monkeypatch):
    """``--nn-cache`` (default 2^15; a config's ``nnCacheSizePowerOfTwo`` where the flag is
    left alone, at most 16) and ``--leaf-batch`` (the searches' ``leaf_batch``)."""
    from eval import cli
    from gojax import katago_model

    made: list[AnalysisEngine] = []
    init = AnalysisEngine.__init__

    def record(engine, *args, **kwargs):
        init(engine, *args, **kwargs)
        made.append(engine)

    monkeypatch.setattr(AnalysisEngine, "__init__", record)
    monkeypatch.setattr(katago_model, "load_model", lambda path: model())

    def engine(*argv: str) -> AnalysisEngine:
        made.clear()
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        assert cli.main(["analysis", "-model", "net.bin.gz", "--warm-up", "none", *argv]) == 0
        return made[0]

    assert engine().nn_cache == 15
    assert "leaf_batch" not in engine()._search_settings  # a CPU's default: one leaf a step
    assert engine("--nn-cache", "0").nn_cache == 0
    assert engine("-override-config", "nnCacheSizePowerOfTwo=12").nn_cache == 12
    assert engine("-override-config", "nnCacheSizePowerOfTwo=20").nn_cache == 16
    given = engine("--nn-cache", "10", "-override-config", "nnCacheSizePowerOfTwo=12")
    assert given.nn_cache == 10
    assert engine("--leaf-batch", "4")._search_settings["leaf_batch"] == 4


# ----------------------------------------------------------------------------
# End to end: the engines started as clients start katago


def run_gojax(argv: list[str], stdin: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "eval.cli", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )


def test_gojax_analysis_started_as_katrain_starts_katago(tmp_path):
    """KaTrain: ``<exe> analysis -model M -config C -analysis-threads N -override-config
    homeDataDir=...``; the config's maxVisits, perspective and PV length apply."""
    model_path = str(reference_path("katago", MODEL))
    argv = ["analysis", "-model", model_path, "-config", write_config(tmp_path)]
    argv += ["-analysis-threads", "8", "-override-config", f"homeDataDir={tmp_path}"]
    lines = [json.dumps(query(id="one")), json.dumps(query(id="raw", maxVisits=1))]
    argv += ["--symmetry", "0", "--warm-up", "none"]  # tests/test_katrain.py warms up
    done = run_gojax(argv, "".join(line + "\n" for line in lines))
    assert done.returncode == 0, done.stderr
    err = done.stderr.strip().splitlines()
    ignored = [line for line in err if "KataGo config" in line]
    assert len(ignored) == 1 and "-analysis-threads" in ignored[0] and "homeDataDir" in ignored[0]
    assert "playoutDoublingAdvantage" in ignored[0] and "katago search" in err[-1]
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    one = replies["one"]
    assert one["rootInfo"]["visits"] == 3  # maxVisits = 3
    assert max(len(m["pv"]) for m in one["moveInfos"]) <= 3  # analysisPVLen = 2
    # reportAnalysisWinratesAs = WHITE: White's view of Black to move, where an engine
    # with the default BLACK gives Black's.
    white = replies["raw"]["rootInfo"]
    (black,) = serve(AnalysisEngine(model(), symmetry=0), [json.dumps(query(maxVisits=1))])
    assert white["currentPlayer"] == "B"
    assert white["rawWinrate"] == pytest.approx(1 - black["rootInfo"]["rawWinrate"], abs=2e-6)


def test_gojax_gtp_started_as_lizzie_starts_katago(tmp_path):
    """Lizzie and Sabaki: ``<exe> gtp -model M -config C``."""
    path = tmp_path / "gtp.cfg"
    path.write_text(
        "# KataGo GTP config\nlogDir = gtp_logs\nrules = japanese\nmaxVisits = 1\n"
        "numSearchThreads = 8\nmaxTime = 10\nallowResignation = true\n"
    )
    model_path = str(reference_path("katago", MODEL))
    session = "kata-get-rules\nboardsize 9\ngenmove b\nkata-get-param allowResignation\nquit\n"
    done = run_gojax(["gtp", "-model", model_path, "-config", str(path)], session)
    assert done.returncode == 0, done.stderr
    replies = done.stdout[:-2].split("\n\n")
    assert json.loads(replies[0][2:])["scoring"] == "TERRITORY"
    assert replies[1] == "=" and len(replies[2].split()) == 2 and replies[3] == "= true"
    ignored = [line for line in done.stderr.splitlines() if "KataGo config" in line]
    assert len(ignored) == 1 and "logDir, numSearchThreads" in ignored[0]
    assert "maxTime (not for this player)" in ignored[0]
    assert "GTP ready" in done.stderr


def test_katago_form_errors_are_one_line(tmp_path):
    (tmp_path / "bad.cfg").write_text("maxVisits = lots\n")
    for command in ("analysis", "gtp"):
        done = run_gojax(
            [command, "-model", "none.bin.gz", "-config", str(tmp_path / "bad.cfg")], "", 120
        )
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [
            f"gojax {command}: error: KataGo config: key maxVisits must be an integer from 1 "
            "to 2^50"
        ]
