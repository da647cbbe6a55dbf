"""`gojax match`: the GTP client, the match runner and its files, against fake and real engines.

The fake engine is a small Python script written into a temporary folder: it
plays the first free point in reading order (A9, B9, ...) for a few moves and
then passes, and flags make it hang, die, answer garbage, play an illegal
move or refuse a legal one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import jax
import pytest

import gojax
from eval import cli
from eval.gtp_client import (
    EngineDied,
    EngineError,
    EngineProtocolError,
    EngineTimeout,
    GTPCommandError,
    GTPEngine,
)
from eval.match import MatchConfig, format_table, read_results, run_match, wilson_interval
from gojax import sgf
from gojax.atomic import DamagedFileWarning

REPO = Path(__file__).resolve().parents[1]

FAKE_ENGINE = textwrap.dedent(
    """
    import argparse, sys, time

    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="fake")
    parser.add_argument("--moves", type=int, default=3)  # stones before passing
    parser.add_argument("--hang-on", default="")  # command that never gets an answer
    parser.add_argument("--die-on", default="")  # command on which the engine exits
    parser.add_argument("--garbage-on", default="")  # command answered without '='
    parser.add_argument("--illegal", action="store_true")  # always answers genmove with A9
    parser.add_argument("--refuse-play", action="store_true")  # '? illegal move' to every play
    parser.add_argument("--resign", action="store_true")  # resigns at its first genmove
    parser.add_argument("--chatty", type=int, default=0)  # bytes written to stderr per command
    parser.add_argument("--delay", type=float, default=0.0)  # seconds per genmove
    parser.add_argument("--record", default="")  # a file that receives every command
    parser.add_argument("--script", default="")  # comma-separated moves to play, then pass
    parser.add_argument("--final-score", default="")  # its answer to final_score
    args = parser.parse_args()
    script = [move for move in args.script.split(",") if move]

    SIZE = 9
    COLUMNS = "ABCDEFGHJ"
    occupied, mine = set(), 0

    def reply(text="", ok=True):
        sys.stdout.write(("= " if ok else "? ") + text + "\\n\\n")
        sys.stdout.flush()

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command = words[0]
        if args.record:
            with open(args.record, "a") as f:
                f.write(" ".join(words) + "\\n")
        if args.chatty:
            sys.stderr.write("x" * args.chatty + "\\n")
            sys.stderr.flush()
        if command == args.hang_on:
            time.sleep(3600)
        if command == args.die_on:
            sys.stderr.write("fake engine: giving up\\n")
            sys.exit(3)
        if command == args.garbage_on:
            sys.stdout.write("hello there\\n\\n")
            sys.stdout.flush()
            continue
        if command == "name":
            reply(args.name)
        elif command == "version":
            reply("1.0")
        elif command == "protocol_version":
            reply("2")
        elif command == "list_commands":
            reply("\\n".join(["name", "version", "boardsize", "clear_board", "komi", "play",
                             "genmove", "quit", "list_commands", "multi", "kata-set-rules",
                             "time_left"]))
        elif command == "multi":
            reply("one\\ntwo\\nthree")
        elif command == "boardsize":
            SIZE = int(words[1])
            reply()
        elif command == "clear_board":
            occupied, mine = set(), 0
            reply()
        elif command == "play":
            if args.refuse_play:
                reply("illegal move", ok=False)
                continue
            vertex = words[2].upper()
            if vertex in occupied:  # as any engine would: never on an occupied point
                reply("illegal move", ok=False)
                continue
            if vertex != "PASS":
                occupied.add(vertex)
            reply()
        elif command == "genmove":
            time.sleep(args.delay)
            if args.resign:
                reply("resign")
                continue
            if args.illegal:
                reply("A9")
                continue
            if script:
                move = script[mine] if mine < len(script) else "pass"
                occupied.add(move)
                mine += 1
                reply(move)
                continue
            move = "pass"
            if mine < args.moves:
                free = [f"{c}{r}" for r in range(SIZE, 0, -1) for c in COLUMNS[:SIZE]
                        if f"{c}{r}" not in occupied]
                move = free[0]
                occupied.add(move)
                mine += 1
            reply(move)
        elif command == "final_score":
            reply(args.final_score)
        elif command == "quit":
            reply()
            break
        else:
            reply()  # komi, kata-set-rules, time_settings, ...
    """
)


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("engines") / "fake_engine.py"
    path.write_text(FAKE_ENGINE)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def _gnugo() -> str | None:
    # Debian and Ubuntu install it under /usr/games, which PATH often lacks.
    return shutil.which("gnugo") or shutil.which("gnugo", path="/usr/games")


def replay_legally(record: sgf.GameRecord, rules: str) -> gojax.GoState:
    """The final position of ``record``, asserting that every move was legal."""
    state = gojax.new_game(record.size, komi=record.komi, rules=rules)
    for number, (colour, action) in enumerate(record.moves, start=1):
        assert colour == ("B" if number % 2 else "W"), f"move {number} out of turn"
        assert bool(gojax.legal_moves(state)[action]), f"move {number} illegal"
        state = gojax.play(state, action)
    return state


# ---------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    "wins, n, low, high",
    [
        (5, 10, 0.2366, 0.7634),  # textbook values (Wilson 1927; Agresti & Coull 1998)
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),
        (50, 100, 0.4038, 0.5962),
    ],
)
def test_wilson_interval_known_values(wins, n, low, high):
    lo, hi = wilson_interval(wins, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(7.5, 15)  # draws count half
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)


# ---------------------------------------------------------------------------- GTP client


def test_client_replies_and_multiline(fake, tmp_path):
    with GTPEngine(fake, label="fake", log=tmp_path / "e.log") as engine:
        assert engine.send("name") == "fake"
        assert engine.send("multi") == "one\ntwo\nthree"
        assert engine.knows("kata-set-rules") and not engine.knows("kgs-rules")
        assert engine.request("boardsize 9") == (True, "")
        assert engine.send("genmove b") == "A9"
        pid = engine.pid
    assert not engine.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_client_refusal_is_an_error_naming_engine_and_command(fake):
    with GTPEngine(f"{fake} --refuse-play", label="fussy") as engine:
        assert engine.request("play b E5") == (False, "illegal move")
        with pytest.raises(GTPCommandError, match=r"fussy.*'play b E5'.*illegal move"):
            engine.send("play b E5")


def test_client_hang_times_out_and_kills(fake):
    engine = GTPEngine(f"{fake} --hang-on genmove", label="sleepy", timeout=0.5)
    assert engine.send("name") == "fake"
    began = time.monotonic()
    with pytest.raises(EngineTimeout, match=r"sleepy.*'genmove b'.*0.5 s"):
        engine.send("genmove b")
    assert time.monotonic() - began < 5
    assert not engine.alive
    engine.close()


def test_client_timeout_kills_what_the_engine_started(fake):
    # A wrapper shell whose child hangs: the child holds the pipes, so it must go too.
    engine = GTPEngine(
        ["sh", "-c", f"{fake} --hang-on genmove; true"], timeout=0.5, start_timeout=0.5
    )
    with pytest.raises(EngineTimeout):
        engine.send("genmove b")
    began = time.monotonic()
    engine.close()
    assert time.monotonic() - began < 5
    # The engine ran in a process group of its own; once its killed members are
    # reaped (the orphaned child by init, in its own time) the group is gone.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(engine.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("a process of the engine's group outlived close()")


def test_client_death_is_reported_with_last_words(fake, tmp_path):
    engine = GTPEngine(f"{fake} --die-on genmove", label="mortal", log=tmp_path / "m.log")
    with pytest.raises(EngineDied, match=r"mortal.*'genmove w'.*code 3.*giving up"):
        engine.send("genmove w")
    with pytest.raises(EngineDied):  # and stays dead
        engine.send("name")
    engine.close()


def test_client_garbage_is_a_protocol_error(fake):
    engine = GTPEngine(f"{fake} --garbage-on name", label="babbler")
    with pytest.raises(EngineProtocolError, match=r"babbler.*'name'.*hello there"):
        engine.send("name")
    engine.close()


def test_client_missing_binary_is_an_os_error(tmp_path):
    with pytest.raises(OSError, match=r"cannot start .*no-such-engine"):
        GTPEngine(str(tmp_path / "no-such-engine") + " --gtp")
    with pytest.raises(ValueError, match="empty"):
        GTPEngine("   ")


def test_client_chatty_stderr_never_blocks(fake, tmp_path):
    # 200 KB of stderr per command would fill any pipe buffer many times over.
    for log in (None, tmp_path / "chatty.log"):
        with GTPEngine(f"{fake} --chatty 200000", log=log, timeout=20) as engine:
            for _ in range(5):
                assert engine.send("name") == "fake"
    assert (tmp_path / "chatty.log").stat().st_size >= 1_000_000


# ---------------------------------------------------------------------------- matches


def test_match_plays_scores_and_writes_files(fake, tmp_path):
    out = tmp_path / "match"
    seen = []
    config = MatchConfig(
        engine_a=f"{fake} --name alpha --record {shlex.quote(str(tmp_path / 'a.txt'))}",
        engine_b=f"{fake} --name beta --moves 4",
        games=2,
        size=9,
        komi=0.5,
        rules="tromp-taylor",
        out=out,
        time=(10, 1, 1),
    )
    result = run_match(config, progress=lambda game, so_far: seen.append(game.game))
    assert seen == [0, 1]
    # Along the top line: A9 B9 C9 ... The side with 4 stones wins by 0.5 or 1.5 after komi.
    first, second = result.games
    assert (first.black, first.result, first.reason, first.moves) == ("A", "W+1.5", "score", 10)
    assert (second.black, second.result, second.winner) == ("B", "B+0.5", "B")
    assert result.wins("B") == 2 and result.wins("B", "B") == 1 and result.wins("B", "W") == 1
    assert first.black_name == "alpha 1.0" and first.white_name == "beta 1.0"
    assert sorted(read_results(out)) == [0, 1]
    assert json.loads((out / "match.json").read_text())["komi"] == 0.5
    record = sgf.load(out / "game-0001.sgf")
    assert (record.size, record.komi, record.rules) == (9, 0.5, "tromp-taylor")
    assert record.result == "W+1.5"
    assert (record.player_black, record.player_white) == ("alpha 1.0", "beta 1.0")
    assert record.date and len(record.moves) == 10
    final = replay_legally(record, "tromp-taylor")
    assert float(gojax.score(final)) == first.margin == -1.5
    sent = (tmp_path / "a.txt").read_text().splitlines()
    setup = ["boardsize 9", "clear_board", "komi 0.5", "kata-set-rules tromp-taylor"]
    assert sent[sent.index("boardsize 9") :][:5] == setup + ["time_settings 10 1 1"]
    assert sent[sent.index("time_settings 10 1 1") + 1 :][:2] == ["time_left b 10 0", "genmove b"]
    assert "play w B9" in sent and "quit" in sent
    table = format_table(result)
    assert "A win rate: 0.0%" in table and "Wilson" in table and "mean game length: 9.5" in table


def test_illegal_move_loses_and_is_never_relayed(fake, tmp_path):
    # B refuses a play on an occupied point: had A9 been relayed, B would lose by "refused".
    config = MatchConfig(
        engine_a=f"{fake} --illegal", engine_b=f"{fake}", games=2, out=tmp_path / "m"
    )
    result = run_match(config)
    assert [g.reason for g in result.games] == ["illegal", "illegal"]
    assert [g.winner for g in result.games] == ["B", "B"]
    assert [g.result for g in result.games] == ["W+F", "B+F"]
    assert result.forfeits("A", "illegal") == 2 and result.games[0].loser_move == "A9"
    for game in result.games:
        record = sgf.load(tmp_path / "m" / game.sgf)
        replay_legally(record, "tromp-taylor")
        assert "illegal" in record.comment
    assert "illegal moves                2       0" in format_table(result)


def test_refusing_a_legal_move_forfeits(fake, tmp_path):
    config = MatchConfig(engine_a=fake, engine_b=f"{fake} --refuse-play", games=1, out=tmp_path)
    (game,) = run_match(config).games
    assert (game.reason, game.winner, game.result, game.loser_move) == ("refused", "A", "B+F", "A9")


def test_resignation(fake, tmp_path):
    config = MatchConfig(engine_a=fake, engine_b=f"{fake} --resign", games=1, out=tmp_path)
    (game,) = run_match(config).games
    assert (game.reason, game.winner, game.result, game.moves) == ("resign", "A", "B+R", 1)


def test_hung_and_dead_engines_forfeit_and_are_restarted(fake, tmp_path):
    config = MatchConfig(
        engine_a=fake,
        engine_b=f"{fake} --hang-on genmove",
        games=2,
        out=tmp_path / "hang",
        move_timeout=0.5,
    )
    result = run_match(config)
    assert [(g.reason, g.winner) for g in result.games] == [("timeout", "A")] * 2
    assert result.games[0].result == "B+T" and result.forfeits("B", "timeout") == 2
    config = MatchConfig(
        engine_a=f"{fake} --die-on genmove", engine_b=fake, games=2, out=tmp_path / "die"
    )
    result = run_match(config)
    assert [(g.reason, g.winner) for g in result.games] == [("error", "B")] * 2
    assert "giving up" in sgf.load(tmp_path / "die" / "game-0001.sgf").comment


def test_move_cap_adjudicates_by_score(fake, tmp_path):
    config = MatchConfig(
        engine_a=f"{fake} --moves 50", engine_b=f"{fake} --moves 50", games=1, out=tmp_path,
        komi=0, max_moves=5,
    )  # fmt: skip
    (game,) = run_match(config).games
    assert (game.reason, game.moves, game.result) == ("cap", 5, "B+1")


def test_torn_last_line_is_reported_left_out_and_repaired(fake, tmp_path):
    config = MatchConfig(engine_a=fake, engine_b=fake, games=1, out=tmp_path)
    run_match(config)
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write('{"game": 1, "black": "B", "res')
    with pytest.warns(DamagedFileWarning, match=r"results.jsonl: 1 line.*line 2: cut short"):
        assert sorted(read_results(tmp_path)) == [0]
    with pytest.warns(DamagedFileWarning):
        result = run_match(MatchConfig(engine_a=fake, engine_b=fake, games=2, out=tmp_path))
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["game"] for line in lines] == [0, 1]
    assert [g.game for g in result.games] == [0, 1]


def _game_line(number: int, **changes) -> str:
    """A results line as ``_play_game`` writes it, with ``changes``."""
    fields = dict(
        game=number, black="A" if number % 2 == 0 else "B", black_name="x", white_name="y",
        result="B+1", winner="A" if number % 2 == 0 else "B", reason="score", moves=10,
        margin=1.0, loser_move=None, seconds=0.5, sgf=f"game-{number + 1:04d}.sgf",
        counted_by="board",
    )  # fmt: skip
    fields.update(changes)
    return json.dumps({k: v for k, v in fields.items() if v is not ...}, sort_keys=True)


@pytest.mark.parametrize(
    "damaged, why",
    [
        ('{"game": 1, "black": "B", "res', "not JSON"),
        ("\udcff\udcfe garbage", "not JSON"),
        ("[1, 2, 3]", "a JSON list, not an object"),
        (_game_line(1, reason="bogus"), "reason='bogus'"),
        (_game_line(1, moves="10"), "moves='10'"),
        (_game_line(1, game=-1), "game=-1"),
        (_game_line(1, winner=...), "no winner"),
    ],
)
def test_a_damaged_line_is_reported_and_left_out_the_rest_is_trusted(damaged, why, tmp_path):
    """Lines 1 and 3 are games 0 and 2; line 2 (game 1) is damaged: games 0 and 2 are
    read, the warning names the file, the line and why; with ``repair`` the file keeps the
    trusted lines and ``results.jsonl.damaged`` the other."""
    path = tmp_path / "results.jsonl"
    text = "\n".join([_game_line(0), damaged, _game_line(2)]) + "\n"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = path.read_bytes()
    with pytest.warns(DamagedFileWarning, match=rf"{path}: 1 line.*line 2: .*{re.escape(why)}"):
        assert sorted(read_results(tmp_path)) == [0, 2]
    assert path.read_bytes() == before  # reading alone changes nothing
    with pytest.warns(DamagedFileWarning):
        read_results(tmp_path, repair=True)
    assert path.read_text() == _game_line(0) + "\n" + _game_line(2) + "\n"
    assert (tmp_path / "results.jsonl.damaged").read_bytes() == damaged.encode(
        "utf-8", "surrogateescape"
    ) + b"\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: nothing left to report
        assert sorted(read_results(tmp_path)) == [0, 2]


def test_a_damaged_game_is_played_again_on_resume(fake, tmp_path, capsys, monkeypatch):
    """A match of 3 games whose second line is damaged on disk: a resume (the
    command, in a fresh process) reports it in one line, plays game 2 again and
    counts each game once."""
    config = MatchConfig(engine_a=fake, engine_b=fake, games=3, komi=0.5, out=tmp_path)
    first = run_match(config)
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1][: len(lines[1]) // 2], lines[2]]) + "\n")
    argv = [
        sys.executable, "-m", "eval.cli", "match", "--engine-a", fake, "--engine-b", fake,
        "--games", "3", "--komi", "0.5", "--out", str(tmp_path),
    ]  # fmt: skip
    env = dict(os.environ, GOJAX_CACHE="")
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (warning,) = done.stderr.strip().splitlines()
    assert warning.startswith(f"gojax: warning: {path}: 1 line(s) not a game result")
    assert "line 2: not JSON" in warning
    assert "resuming" in done.stdout and "2 games already played" in done.stdout
    assert "game 2/3" in done.stdout and "game 1/3" not in done.stdout
    games = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(g["game"] for g in games) == [0, 1, 2]
    replayed = next(g for g in games if g["game"] == 1)
    assert replayed["result"] == first.games[1].result  # the fake engines play alike
    assert (tmp_path / "results.jsonl.damaged").read_text() == lines[1][: len(lines[1]) // 2] + "\n"


def test_other_settings_in_the_same_folder_are_refused(fake, tmp_path):
    run_match(MatchConfig(engine_a=fake, engine_b=fake, games=1, out=tmp_path))
    with pytest.raises(ValueError, match=r"different match.*komi"):
        run_match(MatchConfig(engine_a=fake, engine_b=fake, games=1, out=tmp_path, komi=6))


def test_resume_after_kill_plays_exactly_the_missing_games(fake, tmp_path):
    out = tmp_path / "resume"
    argv = [
        sys.executable, "-m", "eval.cli", "match",
        "--engine-a", f"{fake} --delay 0.3", "--engine-b", f"{fake} --delay 0.3",
        "--games", "3", "--out", str(out),
    ]  # fmt: skip
    env = dict(os.environ, GOJAX_CACHE="")
    runner = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and runner.poll() is None:
            if len(read_results(out)) >= 1:
                break
            time.sleep(0.05)
        assert runner.poll() is None, "the match ended before it could be killed"
        runner.send_signal(signal.SIGKILL)
    finally:
        runner.wait()
    assert sorted(read_results(out)) == [0]
    finished = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert "resuming" in finished.stdout and "game 1/3" not in finished.stdout
    assert "game 2/3" in finished.stdout and "game 3/3" in finished.stdout
    lines = (out / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["game"] for line in lines) == [0, 1, 2]
    assert sorted(p.name for p in out.glob("*.sgf")) == [f"game-000{i}.sgf" for i in (1, 2, 3)]


# ---------------------------------------------------------------------------- the command line


def test_cli_match_runs_and_prints_the_table(fake, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")
    code = cli.main(
        ["match", "--engine-a", fake, "--engine-b", fake, "--games", "2", "--komi", "0.5",
         "--name-a", "first", "--name-b", "second", "--out", str(tmp_path)]
    )  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0
    assert "game 1/2: A (first) B vs B (second) W: W+0.5 by score" in out
    assert "A win rate: 50.0% (95% Wilson interval 9.5%..90.5%)" in out
    assert sgf.load(tmp_path / "game-0002.sgf").player_black == "second"
    assert "gojax recount" not in out  # Tromp-Taylor rules: the count is the engines' own


def test_cli_match_under_chinese_rules_points_to_recount(fake, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")
    code = cli.main(
        ["match", "--engine-a", fake, "--engine-b", fake, "--games", "1", "--komi", "0.5",
         "--rules", "chinese", "--out", str(tmp_path)]
    )  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0 and "by score" in out
    assert f"gojax recount {tmp_path} --engine CMD" in out and "dead stones" in out


# A 5x5 game: Black walls off columns A-C, White D-E; then White drops a stone at A3
# inside Black's area and both pass. Counted as the board stands (Tromp-Taylor), A3
# makes columns A-B nobody's and White wins by 6.5; counted with A3 dead, Black wins.
# (tests/test_recount.py counts the same game.)
WALL_GAME = [
    ("B", "C1"), ("W", "D1"), ("B", "C2"), ("W", "D2"), ("B", "C3"), ("W", "D3"),
    ("B", "C4"), ("W", "D4"), ("B", "C5"), ("W", "D5"), ("B", "pass"), ("W", "A3"),
    ("B", "pass"), ("W", "pass"),
]  # fmt: skip
# Each side's moves, as the fake engines' scripts (they pass once a script runs out).
WALL_BLACK, WALL_WHITE = (
    ",".join(vertex for c, vertex in WALL_GAME if c == colour and vertex != "pass")
    for colour in "BW"
)


def _walls(fake: str, referee: str | None, out, **settings) -> MatchConfig:
    return MatchConfig(
        engine_a=f"{fake} --name alpha --script {WALL_BLACK}",
        engine_b=f"{fake} --name beta --script {WALL_WHITE}",
        games=1,
        size=5,
        komi=0.5,
        rules="chinese",
        out=out,
        referee=referee,
        **settings,
    )


def test_arena_games_over_gtp_take_the_referees_count(fake, tmp_path):
    """``eval.arena.play_games`` (sweeps' gnugo cells, gating) with a referee: the
    outcome and Black's margin are the referee's; without one, the board's."""

    from eval.arena import GTPAgent, play_games, random_agent

    black = GTPAgent(f"{fake} --name alpha --script {WALL_BLACK}", "alpha")
    white = GTPAgent(f"{fake} --name beta --script {WALL_WHITE}", "beta")
    key = jax.random.PRNGKey(0)
    common = dict(size=5, komi=0.5, rules="chinese", num_games=1)
    board = play_games(black, white, key, **common)
    assert board.outcome.tolist() == [-1] and board.score.tolist() == [-6.5]  # A is Black
    referee = f"{fake} --final-score B+12.5"
    counted = play_games(black, white, key, referee=referee, sgf_dir=tmp_path, **common)
    assert counted.outcome.tolist() == [1] and counted.score.tolist() == [12.5]
    assert counted.result_string(0) == "B+12.5"
    (line,) = (tmp_path / "results.jsonl").read_text().splitlines()
    assert json.loads(line)["counted_by"] == "referee"
    with pytest.raises(ValueError, match="a referee counts GTP games"):
        play_games(random_agent(), random_agent(), key, referee=referee, size=5, num_games=2)


def test_a_referee_counts_games_that_end_by_two_passes(fake, tmp_path):
    sent = tmp_path / "referee.txt"
    referee = f"{fake} --final-score B+12.5 --record {shlex.quote(str(sent))}"
    result = run_match(_walls(fake, referee, tmp_path / "match"))
    (game,) = result.games
    assert (game.reason, game.counted_by) == ("score", "referee")
    assert (game.result, game.winner) == ("B+12.5", "A")
    assert game.margin == -6.5  # the board as it stood is kept beside the referee's count
    record = sgf.load(tmp_path / "match" / "game-0001.sgf")
    assert record.result == "B+12.5" and "the board as it stood: W+6.5" in record.comment
    lines = sent.read_text().splitlines()
    counted = lines[lines.index("boardsize 5") :]
    assert counted[:4] == ["boardsize 5", "clear_board", "komi 0.5", "kata-set-rules chinese"]
    assert counted[4:8] == ["play b C1", "play w D1", "play b C2", "play w D2"]
    assert "play w A3" in counted and counted[-2:] == ["final_score", "quit"]
    assert counted.count("play b pass") == 2 and counted.count("play w pass") == 1
    manifest = json.loads((tmp_path / "match" / "match.json").read_text())
    assert manifest["referee"] == referee
    assert "counted by the referee's final_score" in format_table(result)
    # Without a referee the same game is counted as the board stands.
    (board,) = run_match(_walls(fake, None, tmp_path / "board")).games
    assert (board.counted_by, board.result, board.winner) == ("board", "W+6.5", "B")


def test_a_referee_that_cannot_count_stops_the_match_and_no_game_is_kept(fake, tmp_path):
    config = _walls(fake, f"{fake} --final-score maybe", tmp_path)
    with pytest.raises(EngineError, match="engine referee answering 'final_score'.*maybe"):
        run_match(config)
    assert read_results(tmp_path) == {}  # a rerun plays the game again
    # Another referee is another match, in another folder.
    with pytest.raises(ValueError, match="referee"):
        run_match(_walls(fake, f"{fake} --final-score 0", tmp_path))


@pytest.mark.parametrize(
    "engine, message",
    [("no-such-engine-binary --gtp", "cannot start"), ("{python} -c pass", "exited with code 0")],
)
def test_cli_bad_engine_is_one_line_exit_2(engine, message, fake, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")
    engine = engine.format(python=shlex.quote(sys.executable))
    code = cli.main(["match", "--engine-a", engine, "--engine-b", fake, "--out", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("gojax match: error: engine A") and message in err
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- real engines


def test_gnugo_vs_gnugo_full_game(tmp_path):
    gnugo = _gnugo()
    if gnugo is None:
        pytest.skip("gnugo is not installed (apt-get install gnugo)")
    command = f"{shlex.quote(gnugo)} --mode gtp --level 0"
    config = MatchConfig(
        engine_a=command, engine_b=command, games=1, size=9, komi=7, rules="chinese",
        out=tmp_path, time=(60, 5, 1), move_timeout=60,
    )  # fmt: skip
    (game,) = run_match(config).games
    assert game.reason in ("score", "resign") and game.moves > 10
    assert game.black_name.startswith("GNU Go")
    record = sgf.load(tmp_path / game.sgf)
    final = replay_legally(record, "chinese")
    if game.reason == "score":
        assert [action for _, action in record.moves[-2:]] == [81, 81]
        margin = float(gojax.score(final))  # integer komi: a draw is possible, RE is "0"
        expected = "0" if margin == 0 else ("B+" if margin > 0 else "W+") + f"{abs(margin):g}"
        assert record.result == expected


def test_gnugo_as_referee_removes_the_dead_stone(fake, tmp_path, capsys, monkeypatch):
    gnugo = _gnugo()
    if gnugo is None:
        pytest.skip("gnugo is not installed (apt-get install gnugo)")
    monkeypatch.setenv("GOJAX_CACHE", "")
    code = cli.main(
        ["match", "--engine-a", f"{fake} --script {WALL_BLACK}",
         "--engine-b", f"{fake} --script {WALL_WHITE}", "--games", "1", "--size", "5",
         "--komi", "0.5", "--rules", "chinese", "--referee", f"{gnugo} --mode gtp --level 0",
         "--out", str(tmp_path)]
    )  # fmt: skip
    out, _ = capsys.readouterr()
    (game,) = read_results(tmp_path).values()
    assert code == 0 and game.counted_by == "referee"
    assert game.result.startswith("B+") and game.margin < 0  # the board alone says White
    assert f"{game.result} by score" in out and "gojax recount" not in out


@pytest.mark.slow
def test_our_engine_vs_gnugo(tmp_path, monkeypatch):
    gnugo = _gnugo()
    if gnugo is None:
        pytest.skip("gnugo is not installed (apt-get install gnugo)")
    from reference import reference_path

    monkeypatch.setenv("GOJAX_CACHE", "")  # as the other CLI tests: no persistent XLA cache
    model = reference_path("katago", "g170-b6c96-s175395328-d26788732.bin.gz")
    ours = [sys.executable, "-m", "eval.cli", "gtp", "--model", str(model), "--visits", "1"]
    config = MatchConfig(
        engine_a=shlex.join(ours), engine_b=f"{shlex.quote(gnugo)} --mode gtp --level 0",
        games=1, size=9, komi=7, rules="chinese", out=tmp_path, name_a="gojax",
        move_timeout=240, start_timeout=240,
    )  # fmt: skip
    (game,) = run_match(config).games
    assert game.reason in ("score", "resign", "cap"), game
    assert game.black == "A" and game.black_name == "gojax"
    record = sgf.load(tmp_path / game.sgf)
    replay_legally(record, "chinese")
    assert record.result == game.result


def test_openings_vary_by_pair_and_are_played_to_both_engines(fake, tmp_path):
    out = tmp_path / "m"
    record_a = tmp_path / "a.txt"
    config = MatchConfig(
        engine_a=f"{fake} --name alpha --record {shlex.quote(str(record_a))}",
        engine_b=f"{fake} --name beta --moves 4",
        games=6,
        size=9,
        komi=0.5,
        rules="tromp-taylor",
        out=out,
        openings=3,
        opening_seed=7,
    )
    run_match(config)
    openings = [sgf.load(out / f"game-{i:04d}.sgf").moves[:3] for i in range(1, 7)]
    assert openings[0] == openings[1] and openings[2] == openings[3] and openings[4] == openings[5]
    assert len({tuple(openings[i]) for i in (0, 2, 4)}) == 3
    for moves in openings:
        assert [colour for colour, _ in moves] == ["B", "W", "B"]
        for _, action in moves:
            assert 2 <= action // 9 <= 6 and 2 <= action % 9 <= 6
    # A (Black in game 1) heard the opening, then White's first move, before its genmove.
    sent = (tmp_path / "a.txt").read_text().splitlines()
    first_genmove = next(i for i, line in enumerate(sent) if line.startswith("genmove"))
    plays = [line for line in sent[:first_genmove] if line.startswith("play ")]
    assert sent[first_genmove] == "genmove b"
    assert [p.split()[1] for p in plays] == ["b", "w", "b", "w"]
    assert json.loads((out / "match.json").read_text())["openings"] == 3
    # The same match without openings is another match.
    with pytest.raises(ValueError, match="openings"):
        run_match(dataclasses.replace(config, openings=0, games=8))
