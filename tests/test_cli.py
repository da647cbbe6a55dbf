"""The gojax command line: each subcommand end to end, and clear errors for bad input."""

import json

import pytest
from reference import reference_path

from eval import cli
from gojax import sgf


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _no_persistent_cache(monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")


def test_selfplay_random_reports_and_writes(capsys, tmp_path):
    svg, folder, summary = tmp_path / "final.svg", tmp_path / "games", tmp_path / "s.json"
    code, out, _ = run(
        capsys,
        "selfplay-random",
        "--size", "5", "--games", "12", "--batch", "4", "--quiet",
        "--svg", str(svg), "--sgf-dir", str(folder), "--json", str(summary),
    )  # fmt: skip
    assert code == 0
    assert "games/s" in out and "moves/s" in out and "mean game length" in out
    assert "Black wins" in out and "White wins" in out
    data = json.loads(summary.read_text())
    assert data["games"] == 12 and data["black_wins"] + data["white_wins"] + data["draws"] == 12
    assert svg.read_text().startswith("<svg") or "<svg" in svg.read_text()
    files = sorted(folder.glob("*.sgf"))
    assert len(files) == 12
    record = sgf.load(files[0])
    assert record.size == 5 and record.result and record.result[0] in "BW0"


def test_show_prints_board_score_and_svg(capsys, tmp_path):
    game = tmp_path / "g.sgf"
    game.write_text("(;GM[1]FF[4]SZ[5]KM[0.5]RU[Chinese];B[cc];W[dd];B[];W[])")
    svg = tmp_path / "g.svg"
    code, out, _ = run(capsys, "show", str(game), "--svg", str(svg))
    assert code == 0
    assert "A B C D E" in out and "Rules chinese" in out
    assert "Tromp-Taylor area: Black 1, White 1" in out and "W+0.5" in out
    assert svg.exists()
    code, out, _ = run(capsys, "show", str(game), "--move", "1")
    assert code == 0 and "Move 1" in out and "Black 25" in out
    # RU[Japanese]: territory. After B C3 alone Black's 24 points count (a
    # stone placed is not a point); two stones each leave nothing by dame.
    game.write_text("(;GM[1]FF[4]SZ[5]KM[0.5]RU[Japanese];B[cc];W[dd];B[];W[])")
    code, out, _ = run(capsys, "show", str(game), "--move", "1")
    assert code == 0 and "Rules japanese; territory and prisoners" in out and "B+23.5" in out
    code, out, _ = run(capsys, "show", str(game))
    assert code == 0 and "W+0.5" in out


@pytest.mark.parametrize(
    "content, message",
    [
        ("(;SZ[5];B[zz])", "off a 5x5 board"),
        ("(;SZ[5];B[cc", "line 1"),
        ("(;SZ[5];B[cc];W[cc])", "illegal"),
        ("(;SZ[26];B[cc])", "outside 2..25"),
        ("(;GM[1]FF[4]SZ[9]AB[ab][ba]AW[aa];B[ee])", "the white chain at A9 has no liberty"),
    ],
)
def test_show_rejects_bad_files_in_one_line(capsys, tmp_path, content, message):
    game = tmp_path / "bad.sgf"
    game.write_text(content)
    code, out, err = run(capsys, "show", str(game))
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_show_plays_on_after_two_passes(capsys, tmp_path):
    """gojax's own printsgf output, with a move after two passes, as loadsgf reads it."""
    game = tmp_path / "resumed.sgf"
    game.write_text("(;FF[4]GM[1]SZ[9]KM[7]RU[chinese]AP[gojax]\n;B[ee];W[cc];B[];W[];B[fe])\n")
    code, out, err = run(capsys, "show", str(game))
    assert code == 0, err
    assert "Move 5" in out and "Tromp-Taylor area: Black 2, White 1" in out


def test_show_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "show", str(tmp_path / "nope.sgf"))
    assert code == 2 and "nope.sgf" in err


def test_selfplay_random_rejects_bad_size(capsys):
    code, _, err = run(capsys, "selfplay-random", "--size", "26", "--games", "2")
    assert code == 2 and "board size" in err and "2..25" in err


def test_show_a_25x25_game(capsys, tmp_path):
    game = tmp_path / "big.sgf"
    game.write_text("(;GM[1]FF[4]SZ[25]KM[7.5];B[yy];W[aa];B[tt])")  # tt: a point past 19
    code, out, _ = run(capsys, "show", str(game))
    assert code == 0
    assert "A B C D E F G H J K L M N O P Q R S T U V W X Y Z" in out
    assert "Tromp-Taylor area: Black 2, White 1" in out


def test_verify_rules_passes_and_fails(capsys, tmp_path):
    good = {
        "size": 3,
        "komi": 0.5,
        "rules": "chinese",
        "moves": [["B", "B2"], ["W", "pass"], ["B", "pass"]],
        "illegal_empty": [[], [], []],
        "final_board": ["...", ".X.", "..."],
    }
    bad = dict(good, final_board=["X..", ".X.", "..."], illegal_empty=[[], ["A1"], []])
    path = tmp_path / "games.jsonl"
    path.write_text(json.dumps(good) + "\n")
    code, out, _ = run(capsys, "verify-rules", str(path))
    assert code == 0 and "0 disagreements" in out and "B 9 W 0" in out
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code, out, _ = run(capsys, "verify-rules", str(path))
    assert code == 1
    assert "ply 1: illegal empty points differ: only ours [], only theirs ['A1']" in out
    assert "final board differs at ['A3']" in out
    assert "2 disagreements" in out


def test_verify_rules_rejects_malformed_lines(capsys, tmp_path):
    path = tmp_path / "games.jsonl"
    path.write_text('{"size": 3}\n')
    code, _, err = run(capsys, "verify-rules", str(path))
    assert code == 2 and "games.jsonl:1: missing field" in err
    path.write_text("not json\n")
    code, _, err = run(capsys, "verify-rules", str(path))
    assert code == 2 and "not valid JSON" in err


@pytest.mark.slow
def test_verify_rules_agrees_with_katago_on_every_game(capsys):
    path = reference_path("katago", "rules_games.jsonl")
    code, out, _ = run(capsys, "verify-rules", str(path))
    assert code == 0, out
    assert "70 games" in out and " 0 disagreements" in out
    for preset in ("tromp-taylor", "chinese", "chinese-ogs", "aga", "new-zealand"):
        assert f" {preset}, " in out


@pytest.mark.slow
def test_verify_rules_legal_sets_of_evaluated_positions(capsys):
    path = reference_path("katago", "positions.jsonl")
    code, out, _ = run(capsys, "verify-rules", str(path))
    assert code == 0, out
    assert "46 games" in out and " 0 disagreements" in out
