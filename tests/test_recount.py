"""``gojax recount``: a match's scored games counted again by a GTP engine's ``final_score``.

The match folder here is written by hand: one 5x5 game that ends by two
passes with a lone White stone left inside Black's area (the Tromp-Taylor
count makes that area nobody's and White wins; GnuGo removes the dead stone
and gives Black the game), and one resigned game, which is not recounted.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_match import WALL_GAME as MOVES
from test_match import _gnugo as gnugo_path

import gojax
from eval import cli
from eval.match import GameResult, parse_final_score, read_match
from eval.recount import RECOUNT_FILE, Recount, recount_match, win_rate_a


def _gnugo() -> str:
    found = gnugo_path()
    if found is None:
        pytest.skip("gnugo is not installed (apt-get install gnugo)")
    return f"{found} --mode gtp --level 0"


def _tromp_taylor_result() -> tuple[str, float]:
    state = gojax.new_game(5, komi=0.5, rules="chinese")
    for _, vertex in MOVES:
        state = gojax.play(state, gojax.gtp_to_action(vertex, 5))
    margin = float(gojax.score(state))
    return (f"B+{margin:g}" if margin > 0 else f"W+{-margin:g}"), margin


def _sgf(moves) -> str:
    nodes = "".join(
        f";{c}[{'' if v == 'pass' else chr(97 + 'ABCDE'.index(v[0])) + chr(97 + 5 - int(v[1:]))}]"
        for c, v in moves
    )
    return f"(;FF[4]GM[1]SZ[5]KM[0.5]RU[chinese]{nodes})\n"


@pytest.fixture
def match_folder(tmp_path):
    result, margin = _tromp_taylor_result()
    manifest = {"engine_a": "a", "engine_b": "b", "size": 5, "komi": 0.5, "rules": "chinese",
                "max_moves": 50, "time": None}  # fmt: skip
    (tmp_path / "match.json").write_text(json.dumps(manifest))
    (tmp_path / "game-0001.sgf").write_text(_sgf(MOVES))
    (tmp_path / "game-0002.sgf").write_text(_sgf(MOVES[:3]))
    games = [
        GameResult(0, "A", "alpha", "beta", result, "B" if margin < 0 else "A", "score",
                   len(MOVES), margin, None, 1.0, "game-0001.sgf"),
        GameResult(1, "B", "beta", "alpha", "W+R", "A", "resign", 3, 0.0, None, 1.0,
                   "game-0002.sgf"),
    ]  # fmt: skip
    lines = "".join(json.dumps(dataclasses.asdict(g)) + "\n" for g in games)
    (tmp_path / "results.jsonl").write_text(lines)
    return tmp_path


def test_final_score_answers_parse():
    assert parse_final_score("B+3.5") == "B+3.5"
    assert parse_final_score(" W+12.0 ") == "W+12"
    assert parse_final_score("0") == parse_final_score("Draw") == "0"
    with pytest.raises(ValueError, match="final_score"):
        parse_final_score("black wins")


def test_the_engines_count_removes_the_dead_stone(match_folder):
    result, margin = _tromp_taylor_result()
    assert margin < 0  # premise: by Tromp-Taylor the dead stone makes White win
    recounts = recount_match(match_folder, _gnugo())
    assert [r.game for r in recounts] == [0]  # the resigned game is not recounted
    assert recounts[0].result == result
    assert recounts[0].recount.startswith("B+")  # GnuGo counts A3 dead: Black wins
    # A (Black in game 0) lost by the match's count and wins by GnuGo's.
    match = read_match(match_folder)
    assert match.win_rate_a == pytest.approx(0.5)
    rate, wins, losses, draws = win_rate_a(match, recounts)
    assert (rate, wins, losses, draws) == (1.0, 2, 0, 0)
    written = (match_folder / RECOUNT_FILE).read_text().splitlines()
    assert [Recount(**json.loads(line)) for line in written] == recounts


def test_command_line_prints_both_counts_and_names_bad_folders(match_folder, tmp_path, capsys):
    assert cli.main(["recount", str(match_folder), "--engine", _gnugo()]) == 0
    out = capsys.readouterr().out
    assert "another winner" in out
    assert "by the match's count: 50.0%" in out and "by the engine's count: 100.0%" in out
    empty = tmp_path / "nothing"
    empty.mkdir()
    assert cli.main(["recount", str(empty), "--engine", _gnugo()]) == 2
    assert "not a match folder" in capsys.readouterr().err
