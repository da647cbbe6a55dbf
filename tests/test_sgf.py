"""Tests for gojax.sgf: parsing, errors with locations, writing and round trips."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gojax import sgf
from gojax.sgf import GameRecord, Node, SGFError

REFERENCE = Path(
    os.environ.get("GOJAX_REFERENCE", Path(__file__).resolve().parents[2] / "shared" / "reference")
)

# A hand-written 9x9 handicap game. Raw string: every backslash is the file's own.
# The root comment holds an escaped "]", an escaped backslash and a soft line break.
GAME = r"""(;FF[4]GM[1]SZ[9]KM[0.5]RU[Chinese]HA[2]
PB[Black \] player]PW[White\\player]RE[W+3.5]DT[2024-05-06]
GN[Test game]AP[hand:1.0]PL[W]
AB[aa:bb][ee]AW[ii]
C[Root \] bracket, a back\\slash and a soft \
line break.
Second line.]
;W[cc]C[first]
;B[ia]
;W[ai]
;AE[ai]AB[ih]C[setup only]
;B[]
;W[tt]
;B[ee]C[occupied? not the parser's business]
)"""


def test_hand_written_game_every_field():
    record = sgf.parse(GAME)
    assert record.size == 9
    assert record.komi == 0.5
    assert record.rules == "Chinese"
    assert record.handicap == 2
    # aa:bb is the rectangle aa, ba, ab, bb, expanded row by row; ee is the centre.
    assert record.setup_black == [0, 1, 9, 10, 40]
    assert record.setup_white == [80]
    assert record.setup_empty == []
    assert record.player_black == "Black ] player"
    assert record.player_white == "White\\player"
    assert record.result == "W+3.5"
    assert record.date == "2024-05-06"
    assert record.to_play == "W"
    assert record.comment == ("Root ] bracket, a back\\slash and a soft line break.\nSecond line.")
    assert record.extra == {"GN": ["Test game"], "AP": ["hand:1.0"]}
    assert record.nodes == [
        Node("W", 20, comment="first"),  # cc: column 2, row 2
        Node("B", 8),  # ia: top-right corner
        Node("W", 72),  # ai: bottom-left corner
        Node(add_black=(71,), add_empty=(72,), comment="setup only"),  # ih, ai
        Node("B", 81),  # B[] is a pass
        Node("W", 81),  # W[tt] is a pass on boards up to 19x19
        Node("B", 40, comment="occupied? not the parser's business"),
    ]
    assert record.moves == [("W", 20), ("B", 8), ("W", 72), ("B", 81), ("W", 81), ("B", 40)]


def test_corner_points():
    record = sgf.parse("(;SZ[9];B[aa];W[ia];B[ai];W[ii];B[cc])")
    assert [a for _, a in record.moves] == [0, 8, 72, 80, 20]


def test_defaults_when_properties_are_missing():
    record = sgf.parse("(;)")
    assert record == GameRecord()
    assert record.size == 19 and record.komi == 0.0 and record.nodes == []


def test_tt_is_a_point_above_19x19():
    assert sgf.parse("(;SZ[21];B[tt])").moves == [("B", 19 * 21 + 19)]
    assert sgf.parse("(;SZ[19];B[tt])").moves == [("B", 361)]


def test_setup_after_size_in_root_and_reversed_rectangle():
    # AB comes before SZ; the points are still read on the 9x9 board.
    record = sgf.parse("(;AB[ii:hh]SZ[9])")
    assert record.setup_black == [70, 71, 79, 80]


def test_numbers_are_tolerant_where_harmless():
    assert sgf.parse("(;KM[7.50])").komi == 7.5
    assert sgf.parse("(;KM[-2])").komi == -2.0
    assert sgf.parse("(;KM[ 7 ])").komi == 7.0
    assert sgf.parse("(;SZ[13:13])").size == 13
    assert sgf.parse("(;HA[0])").handicap == 0


def test_variations_keep_the_main_line():
    record = sgf.parse("(;SZ[9];B[aa](;W[bb];B[cc])(;W[dd]))")
    assert record.moves == [("B", 0), ("W", 10), ("B", 20)]


def test_nested_variations_follow_first_children():
    text = "(;SZ[9](;B[aa](;W[bb])(;W[cc]))(;B[dd](;W[ee])))"
    assert sgf.parse(text).moves == [("B", 0), ("W", 10)]


def test_deep_nesting_does_not_recurse():
    depth = 5000
    text = "(;SZ[9]" + "(;C[x]" * depth + ")" * depth + ")"
    assert len(sgf.parse(text).nodes) == depth


def test_errors_in_dropped_variations_are_still_reported():
    with pytest.raises(SGFError, match=r"line 1, column 29: unexpected character '#'"):
        sgf.parse("(;SZ[9];B[aa](;W[bb])(;W[cc]#))")


def test_ff3_identifiers_with_lowercase_letters():
    record = sgf.parse("(;GaMe[1]SiZe[9]AddBlack[aa]Comment[hi];Black[bb])")
    assert record.size == 9
    assert record.setup_black == [0]
    assert record.comment == "hi"
    assert record.moves == [("B", 10)]


def test_move_in_root_becomes_first_node():
    record = sgf.parse("(;SZ[9]AB[aa]B[bb]C[root];W[cc])")
    assert record.setup_black == [0]
    assert record.comment == "root"
    assert record.nodes == [Node("B", 10), Node("W", 20)]


def test_whitespace_and_line_breaks_between_tokens():
    text = "\ufeff  ( ; SZ [9] \r\n KM[6.5]\n ; B [cc]\t;W[dd] )\n\n"
    record = sgf.parse(text)
    assert (record.size, record.komi, record.moves) == (9, 6.5, [("B", 20), ("W", 30)])


def test_comment_keeps_newlines_and_soft_breaks_of_all_kinds():
    text = "(;C[a\nb\r\nc\\\nd\\\r\ne])"
    assert sgf.parse(text).comment == "a\nb\r\ncde"


def test_parse_collection_reads_every_game():
    records = sgf.parse_collection("(;SZ[9];B[aa])\n(;SZ[13];W[bb])")
    assert [(r.size, r.moves) for r in records] == [(9, [("B", 0)]), (13, [("W", 14)])]
    assert sgf.parse("(;SZ[9];B[aa])(;SZ[13];W[bb])").size == 9


def test_unknown_properties_in_later_nodes_are_dropped():
    record = sgf.parse("(;SZ[9];B[aa]BL[30.5]LB[aa:x]TR[bb])")
    assert record.nodes == [Node("B", 0)]


# ---------------------------------------------------------------------------- errors

MALFORMED = [
    ("", ["line 1, column 1", "empty input"]),
    ("   \n", ["line 2, column 1", "empty input"]),
    ("abc", ["line 1, column 1", "expected '('"]),
    ("(;SZ[9]", ["line 1, column 8", "missing ')'"]),
    ("(;SZ[9];B[aa", ["line 1, column 10", "unterminated value of property B"]),
    ("(;SZ[9];B[zz])", ["line 1, column 10", "node 1 (move 1), property B", "off a 9x9 board"]),
    ("(;SZ[x])", ["line 1, column 5", "property SZ", "bad board size"]),
    ("(;KM[abc])", ["line 1, column 5", "property KM", "bad komi"]),
    ("(;KM[nan])", ["property KM"]),
    ("(;HA[x])", ["line 1, column 5", "property HA"]),
    ("(;GM[2])", ["line 1, column 5", "not a Go game (GM[2])"]),
    ("(;SZ[9];B[aa]W[bb])", ["line 1, column 14", "both B and W"]),
    ("(;SZ[19:13])", ["line 1, column 5", "rectangular boards are not supported"]),
    ("(;SZ[1])", ["property SZ", "outside 2..25"]),
    ("(;SZ[26])", ["property SZ", "outside 2..25"]),
    ("(;SZ[9];b[aa])", ["line 1, column 9", "identifier 'b'"]),
    ("(;SZ[9];B)", ["line 1, column 9", "property B has no value"]),
    ("(;SZ[9];B[aa]B[bb])", ["line 1, column 14", "appears twice"]),
    ("(;SZ[9];B[aa][bb])", ["line 1, column 9", "exactly one value"]),
    ("(SZ[9])", ["line 1, column 2", "expected ';'"]),
    ("()", ["line 1, column 2", "expected ';'"]),
    ("(;SZ[9]#)", ["line 1, column 8", "unexpected character '#'"]),
    ("(;SZ[9];[aa])", ["line 1, column 9", "without a property identifier"]),
    ("(;SZ[9](;B[aa]);W[bb])", ["line 1, column 16", "node after a variation"]),
    ("(;SZ[9])x", ["line 1, column 9", "expected '('"]),
    ("(;SZ[9]AB[])", ["line 1, column 10", "property AB", "pass, not a point"]),
    ("(;SZ[9]AB[aa:zz])", ["line 1, column 10", "property AB", "off a 9x9 board"]),
    ("(;SZ[9]AB[aa]AW[aa])", ["property AW", "set up twice"]),
    ("(;SZ[9]PL[X])", ["property PL"]),
    # Locations on later lines count every kind of line break.
    ("(;SZ[9]\n;B[aa]\r\n;W[zz])", ["line 3, column 3", "node 2 (move 2), property W"]),
]


@pytest.mark.parametrize(("text", "expected"), MALFORMED)
def test_malformed_input_is_reported_with_its_location(text, expected):
    with pytest.raises(SGFError) as info:
        sgf.parse(text)
    for part in expected:
        assert part in str(info.value)
    assert info.value.line is not None and info.value.column is not None


def test_error_is_a_value_error_with_parts():
    with pytest.raises(ValueError) as info:
        sgf.parse("(;SZ[9];B[aa]\n;W[zz])")
    error = info.value
    assert isinstance(error, SGFError)
    assert (error.line, error.column) == (2, 3)
    assert str(error) == f"line 2, column 3: {error.message}"
    copy = pickle.loads(pickle.dumps(error.with_path("game.sgf")))
    assert (copy.line, copy.column, copy.path) == (2, 3, "game.sgf")
    assert str(copy) == f"game.sgf: {error}"


def test_non_text_input_is_an_sgf_error():
    with pytest.raises(SGFError):
        sgf.parse(b"(;SZ[9])")  # type: ignore[arg-type]


# ------------------------------------------------------------------------ fuzzing


def _assert_parses_or_sgf_error(text: str) -> None:
    try:
        record = sgf.parse(text)
    except SGFError as error:
        # parse() turns its own bugs into SGFError too; those must not happen.
        assert "internal error" not in str(error)
        return
    # Whatever parses must also write and read back to the same record.
    assert sgf.parse(sgf.dumps(record)) == record


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fuzz_arbitrary_text(text):
    _assert_parses_or_sgf_error(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="()[];\\:ABWCSZKMaceitz19 \n"))
def test_fuzz_sgf_alphabet(text):
    _assert_parses_or_sgf_error(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(GAME)), st.sampled_from(["delete", *"()[];\\"])),
        min_size=1,
        max_size=6,
    )
)
def test_fuzz_mutated_valid_record(edits):
    text = GAME
    for position, edit in edits:
        position %= len(text) + 1
        if edit == "delete":
            text = text[:position] + text[position + 1 :]
        else:
            text = text[:position] + edit + text[position:]
    _assert_parses_or_sgf_error(text)


# -------------------------------------------------------------------------- writing


def test_dumps_exact_text():
    record = GameRecord(
        size=9,
        komi=7.5,
        result="B+R",
        nodes=[Node("B", 20), Node("W", 81), Node(comment="a]b\\c")],
    )
    assert sgf.dumps(record) == "(;FF[4]GM[1]SZ[9]KM[7.5]RE[B+R]\n;B[cc];W[];C[a\\]b\\\\c])\n"


def test_dumps_breaks_lines_and_is_deterministic():
    record = GameRecord(size=9, nodes=[Node("B" if i % 2 == 0 else "W", 81) for i in range(25)])
    text = sgf.dumps(record)
    assert text == sgf.dumps(sgf.parse(text))
    assert text.count("\n") == 4  # root line, three lines of moves, final newline


def test_hand_written_game_round_trips():
    record = sgf.parse(GAME)
    assert sgf.parse(sgf.dumps(record)) == record


def test_dumps_komi_forms():
    for komi, written in [(7.0, "7"), (-0.5, "-0.5"), (1e-5, "0.00001"), (1e20, "1" + "0" * 20)]:
        text = sgf.dumps(GameRecord(komi=komi))
        assert f"KM[{written}]" in text
        assert sgf.parse(text).komi == komi


@pytest.mark.parametrize(
    "record",
    [
        GameRecord(size=1),
        GameRecord(komi=float("nan")),
        GameRecord(size=9, nodes=[Node("B", 82)]),
        GameRecord(size=9, nodes=[Node("X", 3)]),
        GameRecord(size=9, nodes=[Node(None, 3)]),
        GameRecord(size=9, setup_black=[81]),
        GameRecord(size=9, setup_black=[3], setup_white=[3]),
        GameRecord(extra={"SZ": ["9"]}),
        GameRecord(extra={"gn": ["x"]}),
        GameRecord(extra={"GN": []}),
        GameRecord(to_play="black"),
    ],
)
def test_dumps_rejects_records_it_cannot_write_faithfully(record):
    with pytest.raises(SGFError):
        sgf.dumps(record)


RESERVED = {"FF", "GM", "SZ", "KM", "HA", "RU", "PB", "PW", "RE", "DT", "C", "PL"}
RESERVED |= {"AB", "AW", "AE", "B", "W"}


@st.composite
def _records(draw):
    size = draw(st.integers(2, 25))
    # Distinct points, so that no point is set up twice in one node.
    cells = draw(st.lists(st.integers(0, size * size - 1), min_size=4, max_size=12, unique=True))
    black, white, empty = (draw(st.integers(0, 3)) for _ in range(3))
    nodes = []
    for _ in range(draw(st.integers(0, 6))):
        color = draw(st.sampled_from([None, "B", "W"]))
        nodes.append(
            Node(
                color=color,
                action=None if color is None else draw(st.integers(0, size * size)),
                add_black=tuple(
                    draw(st.lists(st.sampled_from(cells[:4]), max_size=2, unique=True))
                ),
                add_empty=tuple(
                    draw(st.lists(st.sampled_from(cells[4:8]), max_size=2, unique=True))
                )
                if len(cells) > 4
                else (),
                comment=draw(st.text(max_size=8)),
            )
        )
    text = st.none() | st.text(max_size=8)
    return GameRecord(
        size=size,
        komi=draw(st.floats(allow_nan=False, allow_infinity=False)),
        rules=draw(text),
        handicap=draw(st.integers(0, 9)),
        setup_black=cells[:black],
        setup_white=cells[black : black + white],
        setup_empty=cells[black + white : black + white + empty],
        player_black=draw(text),
        player_white=draw(text),
        result=draw(text),
        date=draw(text),
        comment=draw(st.text(max_size=8)),
        to_play=draw(st.sampled_from([None, "B", "W"])),
        nodes=nodes,
        extra=draw(
            st.dictionaries(
                st.from_regex(r"[A-Z]{1,3}", fullmatch=True).filter(lambda k: k not in RESERVED),
                st.lists(st.text(max_size=6), min_size=1, max_size=3),
                max_size=3,
            )
        ),
    )


@settings(max_examples=200, deadline=None)
@given(_records())
def test_random_records_round_trip(record):
    assert sgf.parse(sgf.dumps(record)) == record


# ---------------------------------------------------------------------------- files


def test_save_is_atomic_and_load_reads_it_back(tmp_path):
    record = sgf.parse(GAME)
    path = tmp_path / "game.sgf"
    path.write_text("old contents")
    sgf.save(record, path)
    assert os.listdir(tmp_path) == ["game.sgf"]  # the temporary file was renamed, not left
    assert path.read_text(encoding="utf-8") == sgf.dumps(record)
    assert sgf.load(path) == record
    sgf.save(record, str(path))  # str paths too
    assert sgf.load(str(path)) == record


def test_save_leaves_no_temp_file_on_failure(tmp_path):
    with pytest.raises(SGFError):
        sgf.save(GameRecord(size=99), tmp_path / "bad.sgf")
    # A folder in the way makes the final rename fail after the temporary file exists.
    (tmp_path / "folder.sgf").mkdir()
    with pytest.raises(OSError):
        sgf.save(GameRecord(), tmp_path / "folder.sgf")
    assert os.listdir(tmp_path) == ["folder.sgf"]


def test_load_decodes_as_ca_says(tmp_path):
    latin = tmp_path / "latin.sgf"
    latin.write_bytes("(;CA[ISO-8859-1]PB[Jérôme];B[aa])".encode("latin-1"))
    record = sgf.load(latin)
    assert record.player_black == "Jérôme"
    assert record.extra == {"CA": ["ISO-8859-1"]}
    sgf.save(record, latin)  # written back in its own character set
    assert latin.read_bytes().decode("latin-1").count("Jérôme") == 1

    utf8 = tmp_path / "utf8.sgf"
    utf8.write_bytes("\ufeff(;PB[李昌镐])".encode())
    assert sgf.load(utf8).player_black == "李昌镐"

    unlabelled = tmp_path / "unlabelled.sgf"
    unlabelled.write_bytes("(;PW[Zoë])".encode("latin-1"))  # not UTF-8: falls back to Latin-1
    assert sgf.load(unlabelled).player_white == "Zoë"


def test_load_errors_name_the_file(tmp_path):
    path = tmp_path / "broken.sgf"
    path.write_text("(;SZ[9]\n;B[zz])")
    with pytest.raises(SGFError) as info:
        sgf.load(path)
    assert str(info.value).startswith(f"{path}: line 2, column 3: ")
    assert info.value.path == str(path)


# ------------------------------------------------------------------------- results


@pytest.mark.parametrize(
    ("result", "winner"),
    [
        ("B+R", 1),
        ("B+3.5", 1),
        ("B+T", 1),
        ("W+R", -1),
        ("W+0.5", -1),
        (" w+resign ", -1),
        ("0", 0),
        ("Draw", 0),
        ("Void", None),
        ("?", None),
        ("", None),
        (None, None),
    ],
)
def test_result_winner(result, winner):
    assert sgf.result_winner(result) == winner


# ----------------------------------------------------------------- reference games


def _reference_files(folder: str) -> list[Path]:
    if not REFERENCE.is_dir():
        pytest.skip(f"reference data not found at {REFERENCE}: set GOJAX_REFERENCE")
    return sorted((REFERENCE / "sgf" / folder).glob("*.sgf"))


@pytest.mark.parametrize(
    ("folder", "size", "count"), [("katago-9x9", 9, 300), ("katago-19x19", 19, 24)]
)
def test_reference_games_parse_and_round_trip(folder, size, count):
    files = _reference_files(folder)
    assert len(files) == count
    winners = []
    for path in files:
        record = sgf.load(path)
        assert record.size == size, path
        assert record.komi in (6.5, 7.5), path
        assert record.rules == "Tromp-Taylor", path
        assert record.handicap == 0 and not record.setup_black and not record.setup_white, path
        assert record.extra == {"CA": ["UTF-8"]}, path
        colors = [color for color, _ in record.moves]
        assert colors == ["B", "W"] * (len(colors) // 2) + ["B"] * (len(colors) % 2), path
        assert all(0 <= action <= size * size for _, action in record.moves), path
        # Self-play ran until two passes in a row.
        assert [action for _, action in record.moves[-2:]] == [size * size] * 2, path
        winner = sgf.result_winner(record.result)
        assert winner in (1, -1), path
        winners.append(winner)
        assert sgf.parse(sgf.dumps(record)) == record, path
    if folder == "katago-9x9":
        # The reference README's tally: Black 146, White 154.
        assert (winners.count(1), winners.count(-1)) == (146, 154)


def test_reference_first_game_exactly():
    path = _reference_files("katago-9x9")[0]
    record = sgf.load(path)
    assert path.name == "kg9-9-0000.sgf"
    assert (record.komi, record.result) == (7.5, "W+4.5")
    assert record.player_black == record.player_white == "KataGo g170-b6c96"
    # ;B[fd];W[df];B[ff] ... ;W[];B[]: fd is column 5, row 3.
    assert record.moves[:3] == [("B", 3 * 9 + 5), ("W", 5 * 9 + 3), ("B", 5 * 9 + 5)]
    assert record.moves[-2:] == [("W", 81), ("B", 81)]
