"""Tests for gojax.render: the text showboard, the SVG diagram and save_svg."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from gojax.render import _star_points, board_to_svg, board_to_text, save_svg

SVG_NS = "{http://www.w3.org/2000/svg}"


def _board(size: int, black=(), white=()) -> np.ndarray:
    board = np.zeros(size * size, dtype=np.int32)
    board[list(black)] = 1
    board[list(white)] = -1
    return board


def _a(vertex_row: int, col: int, size: int) -> int:
    """Action of GTP row number ``vertex_row`` (1 = bottom) and column ``col``."""
    return (size - vertex_row) * size + col


def _by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG_NS + tag) if e.get("class") == cls]


# --------------------------------------------------------------------------- text


def test_text_5x5_exact():
    # Row 0 is the top line (GTP row 5); no star points on boards below 7x7.
    board = np.array(
        [
            [1, 0, 0, 0, 0],
            [0, -1, 1, 0, 0],
            [0, -1, 1, 0, 0],
            [0, 0, -1, 0, 0],
            [0, 0, 0, 0, 0],
        ]
    ).reshape(-1)
    text = board_to_text(board, size=5, to_play=1, last_move=17)  # row 3, col 2
    expected = (
        "  A B C D E\n"
        "5 X . . . . 5\n"
        "4 . O X . . 4\n"
        "3 . O X . . 3\n"
        "2 . .(O). . 2\n"
        "1 . . . . . 1\n"
        "  A B C D E\n"
        "Black to play\n"
        "Last move: C2"
    )
    assert text == expected


def test_text_9x9_exact_with_all_info():
    size = 9
    black = [_a(6, 3, size), _a(5, 4, size), _a(4, 3, size)]  # D6 E5 D4
    white = [_a(6, 5, size), _a(4, 5, size), _a(5, 6, size)]  # F6 F4 G5
    board = _board(size, black, white)
    text = board_to_text(
        board,
        size=size,
        to_play=-1,
        last_move=_a(5, 4, size),  # E5
        ko=_a(5, 5, size),  # F5, empty: shown as "*"
        komi=7.5,
        move_number=12,
        captures=(1, 0),
    )
    expected = (
        "  A B C D E F G H J\n"
        "9 . . . . . . . . . 9\n"
        "8 . . . . . . . . . 8\n"
        "7 . . + . . . + . . 7\n"
        "6 . . . X . O . . . 6\n"
        "5 . . . .(X)* O . . 5\n"
        "4 . . . X . O . . . 4\n"
        "3 . . + . . . + . . 3\n"
        "2 . . . . . . . . . 2\n"
        "1 . . . . . . . . . 1\n"
        "  A B C D E F G H J\n"
        "White to play\n"
        "Komi 7.5\n"
        "Move 12\n"
        "Last move: E5\n"
        "Captures: Black 1, White 0"
    )
    assert text == expected


def test_text_empty_9x9_has_tengen_and_no_info_lines():
    lines = board_to_text(np.zeros(81, dtype=np.int8), size=9).split("\n")
    assert len(lines) == 11  # letters, 9 rows, letters: nothing optional was given
    assert lines[5] == "5 . . . . + . . . . 5"


def test_text_19x19_letters_skip_i_and_rows_align():
    text = board_to_text(np.zeros(361, dtype=np.int8), size=19)
    lines = text.split("\n")
    header = lines[0]
    assert header.split() == list("ABCDEFGHJKLMNOPQRST")
    assert "I" not in header
    rows = lines[1:20]
    assert [r.split()[0] for r in rows] == [str(n) for n in range(19, 0, -1)]
    # Right-aligned row numbers: every row's points sit in the same columns,
    # and those columns line up under the header letters.
    assert rows[0].startswith("19 .") and rows[10].startswith(" 9 .")
    for row in rows:
        assert [i for i, ch in enumerate(row) if ch in ".+"] == [
            i for i, ch in enumerate(header) if ch.isalpha()
        ]
    # The nine hoshi: D/K/Q on rows 16, 10 and 4.
    star_rows = {r.split()[0]: [i for i, ch in enumerate(r) if ch == "+"] for r in rows}
    want = [header.index(c) for c in "DKQ"]
    assert {k: v for k, v in star_rows.items() if v} == {"16": want, "10": want, "4": want}


def test_text_25x25_and_2x2():
    text25 = board_to_text(np.zeros(625, dtype=np.int8), size=25)
    assert text25.split("\n")[0].split()[-1] == "Z"
    text2 = board_to_text(np.array([1, 0, 0, -1]), size=2, last_move=3)
    assert text2 == "  A B\n2 X . 2\n1 .(O)1\n  A B\nLast move: B1"


def test_text_last_move_marks_only_that_stone():
    board = _board(9, black=[40])
    text = board_to_text(board, size=9, last_move=40)
    assert text.count("(") == 1 and text.count(")") == 1
    assert "(X)" in text
    # Row 0 col 0: the "(" takes the separator right after the row number.
    text = board_to_text(_board(9, white=[0]), size=9, last_move=0)
    assert text.split("\n")[1] == "9(O). . . . . . . . 9"


def test_text_pass_and_no_last_move():
    board = _board(9, black=[40])
    text = board_to_text(board, size=9, last_move=81)
    assert "(" not in text and text.endswith("Last move: pass")
    for none in (None, -1):
        text = board_to_text(board, size=9, last_move=none)
        assert "(" not in text and "Last move" not in text


def test_text_ko_point():
    # Black just captured a white stone on C4 (action 7) by playing D4 (8):
    # White may not retake at C4 at once.
    board = _board(5, black=[2, 6, 12, 8], white=[3, 9, 13])
    text = board_to_text(board, size=5, ko=7)
    assert text.split("\n")[2] == "4 . X * X O 4"
    assert text.count("*") == 1
    # A ko on an occupied point (stale) shows the stone; no ko → no "*".
    assert "*" not in board_to_text(board, size=5, ko=2)
    assert "*" not in board_to_text(board, size=5, ko=-1)
    assert "*" not in board_to_text(board, size=5, ko=25)


def test_text_accepts_2d_and_float_boards():
    flat = _board(5, black=[0], white=[24])
    assert board_to_text(flat.reshape(5, 5), size=5) == board_to_text(flat, size=5)
    assert board_to_text(flat.astype(np.float32), size=5) == board_to_text(flat, size=5)


def test_text_komi_formatting():
    board = np.zeros(25)
    assert board_to_text(board, size=5, komi=6).endswith("Komi 6")
    assert board_to_text(board, size=5, komi=-0.5).endswith("Komi -0.5")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(board=np.zeros(80), size=9), "81"),
        (dict(board=np.full(81, 2), size=9), "-1, 0 or"),
        (dict(board=np.full(81, np.nan), size=9), "NaN"),
        (dict(board=np.zeros(1), size=1), "size"),
        (dict(board=np.zeros(26 * 26), size=26), "size"),
        (dict(board=np.zeros(81), size=9, to_play=0), "to_play"),
        (dict(board=np.zeros(81), size=9, last_move=82), "last_move"),
        (dict(board=np.zeros(81), size=9, ko=100), "ko"),
    ],
)
def test_text_rejects_bad_input(kwargs, match):
    board = kwargs.pop("board")
    with pytest.raises(ValueError, match=match):
        board_to_text(board, **kwargs)


def test_star_points():
    def gtp(size):
        return {(size - a // size, "ABCDEFGHJKLMNOPQRST"[a % size]) for a in _star_points(size)}

    assert gtp(9) == {(7, "C"), (7, "G"), (3, "C"), (3, "G"), (5, "E")}
    assert gtp(13) == {(10, "D"), (10, "K"), (4, "D"), (4, "K"), (7, "G")}
    assert len(_star_points(19)) == 9
    assert _star_points(5) == frozenset()
    for size in range(7, 26):
        assert _star_points(size), size


# --------------------------------------------------------------------------- SVG


def test_svg_is_valid_standalone_document():
    svg = board_to_svg(np.zeros(81), size=9, cell=30)
    root = ET.fromstring(svg)
    assert root.tag == SVG_NS + "svg"
    assert 'xmlns="http://www.w3.org/2000/svg"' in svg
    width, height = float(root.get("width")), float(root.get("height"))
    assert width > 9 * 30 and height > 9 * 30
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert len(_by_class(root, "line", "grid")) == 18
    assert len(_by_class(root, "circle", "star")) == 5
    coords = [t.text for t in _by_class(root, "text", "coord")]
    # Letters top and bottom, numbers left and right.
    assert coords.count("A") == 2 and coords.count("J") == 2 and coords.count("9") == 2
    assert "I" not in coords
    assert not _by_class(root, "circle", "stone black")


def test_svg_counts_stones_and_last_move():
    rng = np.random.default_rng(7)
    board = rng.choice([-1, 0, 0, 1], size=361)
    last = int(np.flatnonzero(board == 1)[0])
    root = ET.fromstring(board_to_svg(board, size=19, last_move=last))
    assert len(_by_class(root, "circle", "stone black")) == int((board == 1).sum())
    assert len(_by_class(root, "circle", "stone white")) == int((board == -1).sum())
    markers = _by_class(root, "circle", "last-move")
    assert len(markers) == 1
    stone = [
        e
        for e in _by_class(root, "circle", "stone black")
        if (e.get("cx"), e.get("cy")) == (markers[0].get("cx"), markers[0].get("cy"))
    ]
    assert len(stone) == 1
    # Opposite colour: a light ring on a black stone.
    assert markers[0].get("stroke") != stone[0].get("fill")


@pytest.mark.parametrize("last_move", [None, -1, 81])
def test_svg_no_marker_for_pass_or_none(last_move):
    root = ET.fromstring(board_to_svg(_board(9, black=[40]), size=9, last_move=last_move))
    assert not _by_class(root, "circle", "last-move")


def test_svg_ownership_heat_squares():
    heat = np.zeros(81, dtype=np.float32)
    heat[[0, 1, 2]] = [1.0, -0.5, 0.25]
    heat[40] = -1.0  # on the black stone: drawn as a smaller square
    board = _board(9, black=[40])
    root = ET.fromstring(board_to_svg(board, size=9, heatmap=heat))
    squares = _by_class(root, "rect", "heat")
    assert len(squares) == np.count_nonzero(heat)
    fills = [s.get("fill") for s in squares]
    assert fills == ["#000000", "#ffffff", "#000000", "#ffffff"]  # side by sign
    opacities = sorted(float(s.get("fill-opacity")) for s in squares)
    assert opacities[0] < opacities[1] < opacities[2] == opacities[3]  # magnitude
    sides = sorted(float(s.get("width")) for s in squares)
    assert sides[0] < sides[-1]
    assert not _by_class(root, "text", "heat-text")


def test_svg_policy_heat_squares_and_percentages():
    policy = np.zeros(81)
    policy[[10, 20, 30]] = [0.6, 0.3, 0.005]
    root = ET.fromstring(board_to_svg(np.zeros(81), size=9, heatmap=policy, heatmap_kind="policy"))
    squares = _by_class(root, "rect", "heat")
    assert len(squares) == 3
    opacities = sorted(float(s.get("fill-opacity")) for s in squares)
    # value / max: the top move is the most opaque, half of it gets half the opacity.
    assert opacities[2] == pytest.approx(2 * opacities[1], rel=1e-2)
    texts = sorted(t.text for t in _by_class(root, "text", "heat-text"))
    assert texts == ["30%", "60%"]  # 0.5% is below the 1% text threshold


def test_svg_labels_and_escaping():
    labels = {0: "A", 40: "<1>", 80: "&"}
    svg = board_to_svg(_board(9, black=[40]), size=9, labels=labels, title="Game <&> 1")
    root = ET.fromstring(svg)
    assert sorted(t.text for t in _by_class(root, "text", "label")) == ["&", "<1>", "A"]
    assert [t.text for t in _by_class(root, "text", "title")] == ["Game <&> 1"]
    assert root.find(SVG_NS + "title").text == "Game <&> 1"
    assert "&lt;&amp;&gt;" in svg
    # Control characters cannot appear in XML at all: they are dropped.
    root = ET.fromstring(board_to_svg(np.zeros(81), size=9, labels={3: "a\x00b"}))
    assert [t.text for t in _by_class(root, "text", "label")] == ["ab"]
    assert not _by_class(ET.fromstring(board_to_svg(np.zeros(81), size=9)), "text", "title")


def test_svg_accepts_2d_board():
    board = _board(9, black=[3], white=[4])
    assert board_to_svg(board.reshape(9, 9), size=9) == board_to_svg(board, size=9)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(board=np.zeros(80)), "81"),
        (dict(board=np.full(81, np.nan)), "NaN"),
        (dict(heatmap=np.zeros(80)), "heatmap"),
        (dict(heatmap=np.zeros(82), heatmap_kind="policy"), "pass"),
        (dict(heatmap=np.full(81, np.nan)), "NaN"),
        (dict(heatmap=np.full(81, 1.5)), r"\[-1, 1\]"),
        (dict(heatmap=np.full(81, -0.1), heatmap_kind="policy"), r"\[0, 1\]"),
        (dict(heatmap_kind="score"), "heatmap_kind"),
        (dict(heatmap=np.zeros(81), heatmap_kind="score"), "heatmap_kind"),
        (dict(labels={81: "x"}), "label"),
        (dict(last_move=99), "last_move"),
        (dict(cell=0), "cell"),
    ],
)
def test_svg_rejects_bad_input(kwargs, match):
    board = kwargs.pop("board", np.zeros(81))
    with pytest.raises(ValueError, match=match):
        board_to_svg(board, size=9, **kwargs)


# --------------------------------------------------------------------------- save_svg


def test_save_svg_atomic(tmp_path):
    path = tmp_path / "board.svg"
    path.write_text("old contents")
    svg = board_to_svg(_board(9, black=[40], white=[41]), size=9, last_move=41, title="x<y")
    save_svg(svg, path)
    assert os.listdir(tmp_path) == ["board.svg"]  # replaced in place, no temp file left
    root = ET.parse(path).getroot()
    assert len(_by_class(root, "circle", "stone white")) == 1
    assert path.read_text(encoding="utf-8") == svg
    save_svg(svg, str(tmp_path / "second.svg"))  # plain str path works too
    assert sorted(os.listdir(tmp_path)) == ["board.svg", "second.svg"]


def test_save_svg_failure_leaves_no_temp_file(tmp_path):
    path = tmp_path / "board.svg"
    path.write_text("old contents")
    with pytest.raises(TypeError):
        save_svg(123, path)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == ["board.svg"]
    assert path.read_text() == "old contents"  # the old file survives a failed write
