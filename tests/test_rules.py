"""Scripted rules tests: positions drawn as ASCII, exact boards and legal sets after each move."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import (
    ascii_of,
    drawing,
    empty_vertices,
    fast_jit,
    jit_legal,
    jit_play,
    legal_vertices,
    new_game,
    parse_board,
    play_moves,
    position,
    stones,
    tromp_taylor_area,
    vertices,
)

import gojax

ALL_RULES = ["tromp-taylor", "chinese", "chinese-ogs", "aga", "new-zealand"]
SUICIDE_LEGAL = ["tromp-taylor", "new-zealand"]
SUICIDE_ILLEGAL = ["chinese", "chinese-ogs", "aga"]
POSITIONAL = ["tromp-taylor", "chinese-ogs"]
SITUATIONAL = ["aga", "new-zealand"]

_jit_result = fast_jit(lambda state: (gojax.area(state), gojax.score(state), gojax.winner(state)))


def result(state) -> tuple[list[int], float, int]:
    """``([black area, white area], score, winner)`` in one compiled call."""
    area, score, winner = _jit_result(state)
    return [int(x) for x in np.asarray(area)], float(score), int(winner)


def assert_hash(state):
    np.testing.assert_array_equal(
        np.asarray(state.zobrist), np.asarray(gojax.position_hash(state.board))
    )


def captures(state) -> list[int]:
    return [int(x) for x in np.asarray(state.captures)]


# ----------------------------------------------------------------------------
# The helpers themselves.


def test_drawing_round_trip_and_gtp_orientation():
    text = """
        . X O .
        X O . O
        . X O .
        . . . .
    """
    state = position(text, to_play="W", rules="chinese", komi=0.5)
    assert state.size == 4
    assert int(state.to_play) == -1
    assert float(state.komi) == 0.5
    assert state.rules.name == "chinese"
    assert ascii_of(state) == drawing(text)
    # The top line is GTP row 4; A1 is the bottom-left corner.
    assert stones(state, "B") == vertices("B4 A3 B2")
    assert stones(state, "W") == vertices("C4 B3 D3 C2")
    assert gojax.gtp_to_action("A4", 4) == 0
    assert gojax.gtp_to_action("A1", 4) == 12
    assert gojax.action_to_gtp(16, 4) == "pass"
    assert_hash(state)


def test_jitted_constructor_matches_eager_new_game():
    board = parse_board(SEND_TWO).reshape(-1)
    eager = gojax.new_game(5, komi=6.5, rules="aga", board=board, to_play=gojax.WHITE)
    jitted = new_game(5, komi=6.5, rules="aga", board=board, to_play=gojax.WHITE)
    assert jax.tree.structure(eager) == jax.tree.structure(jitted)
    for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype


def test_eager_calls_compile_only_once():
    """Called outside jit, the board functions reuse their compiled programs: a second game
    compiles nothing (their loops, rebuilt eagerly, once recompiled at every call)."""

    def game():
        state = gojax.new_game(9, rules="chinese", board=np.eye(9, dtype=np.int8).reshape(-1))
        state = gojax.play(state, 41)  # off the diagonal
        state = gojax.play(state, 81)
        return gojax.score(state), gojax.legal_moves(state), gojax.area(state)

    class Messages(logging.Handler):
        def __init__(self):
            super().__init__()
            self.compiled = []

        def emit(self, record):
            if "compil" in record.getMessage().lower():
                self.compiled.append(record.getMessage())

    jax.block_until_ready(game())
    messages = Messages()
    logger = logging.getLogger("jax")
    logger.addHandler(messages)
    try:
        with jax.log_compiles(True):
            jax.block_until_ready(game())
    finally:
        logger.removeHandler(messages)
    assert messages.compiled == []


def test_play_moves_checks_colour_and_legality():
    state = new_game(5, rules="chinese")
    state = play_moves(state, "B C3", "W pass", "D4")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . . X .
        . . X . .
        . . . . .
        . . . . .
        """
    )
    assert int(state.to_play) == -1
    with pytest.raises(AssertionError):
        play_moves(state, "B A1")  # White is to play
    with pytest.raises(AssertionError):
        play_moves(state, "W C3")  # occupied


# ----------------------------------------------------------------------------
# Captures.


@pytest.mark.parametrize("rules", ALL_RULES)
def test_single_stone_capture(rules):
    state = position(
        """
        . . . . .
        . . X . .
        . X O . .
        . . X . .
        . . . . .
        """,
        rules=rules,
    )
    state = play_moves(state, "B D3")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . X . .
        . X . X .
        . . X . .
        . . . . .
        """
    )
    assert captures(state) == [1, 0]
    assert int(state.ko) == -1  # the capturing stone has four liberties: no ko
    # C3 is now a one-point eye: White may not play there (single-stone suicide).
    assert legal_vertices(state) == (empty_vertices(state) - {"C3"}) | {"pass"}
    assert_hash(state)


@pytest.mark.parametrize("mover", ["B", "W"])
def test_one_move_captures_two_separate_chains(mover):
    text = """
        X O O . O
        . X X X O
        . . . X O
        . . . . X
        . . . . .
    """
    after = """
        X . . X .
        . X X X .
        . . . X .
        . . . . X
        . . . . .
    """
    if mover == "W":  # the same position with the colours swapped
        swap = str.maketrans("XO", "OX")
        text, after = text.translate(swap), after.translate(swap)
    state = position(text, to_play=mover, rules="chinese")
    state = play_moves(state, f"{mover} D5")
    assert ascii_of(state) == drawing(after)
    assert captures(state) == ([5, 0] if mover == "B" else [0, 5])
    assert int(state.ko) == -1
    assert_hash(state)


def test_capture_in_the_corner():
    state = position(
        """
        . . . . .
        . . . . .
        . . . . .
        O . . . .
        X . . . .
        """,
        to_play="W",
    )
    assert "B1" in legal_vertices(state)
    state = play_moves(state, "W B1")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . . . .
        . . . . .
        O . . . .
        . O . . .
        """
    )
    assert captures(state) == [0, 1]
    # Black may not play back into the corner: it is a one-point eye of White's.
    assert "A1" not in legal_vertices(state)
    assert_hash(state)


def test_capture_on_the_edge():
    state = position(
        """
        . X O X .
        . . . . .
        . . . . .
        . . . . .
        . . . . .
        """,
    )
    state = play_moves(state, "B C4")
    assert ascii_of(state) == drawing(
        """
        . X . X .
        . . X . .
        . . . . .
        . . . . .
        . . . . .
        """
    )
    assert captures(state) == [1, 0]
    assert "C5" not in legal_vertices(state)  # suicide for White now
    assert_hash(state)


@pytest.mark.parametrize("rules", ALL_RULES)
def test_snapback(rules):
    state = position(
        """
        . . . . .
        . . . . .
        X X X X .
        O O O X .
        . . O X .
        """,
        rules=rules,
    )
    # Black throws in at B1: a self-atari that also puts White's four stones in atari.
    state = play_moves(state, "B B1")
    assert "A1" in legal_vertices(state)
    # White captures the throw-in...
    state = play_moves(state, "W A1")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . . . .
        X X X X .
        O O O X .
        O . O X .
        """
    )
    assert captures(state) == [0, 1]
    assert int(state.ko) == -1  # A1 joined A2: not a lone stone, so no ko
    # ...and Black takes back five stones on the very point: legal, not a ko.
    assert "B1" in legal_vertices(state)
    state = play_moves(state, "B B1")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . . . .
        X X X X .
        . . . X .
        . X . X .
        """
    )
    assert captures(state) == [5, 1]
    assert int(state.ko) == -1
    assert_hash(state)


# ----------------------------------------------------------------------------
# Suicide.


@pytest.mark.parametrize("rules", ALL_RULES)
def test_single_stone_suicide_is_illegal_everywhere(rules):
    state = position(
        """
        . . . . .
        . . . . .
        . . . . .
        O . . . .
        . O . . .
        """,
        rules=rules,
    )
    assert legal_vertices(state) == (empty_vertices(state) - {"A1"}) | {"pass"}


MULTI_SUICIDE = """
    . . . . .
    . . . . .
    O O . . .
    X X O . .
    . O . . .
"""


@pytest.mark.parametrize("rules", SUICIDE_ILLEGAL)
def test_multi_stone_suicide_illegal(rules):
    state = position(MULTI_SUICIDE, rules=rules)
    assert legal_vertices(state) == (empty_vertices(state) - {"A1"}) | {"pass"}


@pytest.mark.parametrize("rules", SUICIDE_LEGAL)
def test_multi_stone_suicide_legal_and_removes_the_chain(rules):
    state = position(MULTI_SUICIDE, rules=rules)
    assert legal_vertices(state) == empty_vertices(state) | {"pass"}
    state = play_moves(state, "B A1")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . . . .
        O O . . .
        . . O . .
        . O . . .
        """
    )
    # White is credited with all three Black stones, the one just played included (KataGo).
    assert captures(state) == [0, 3]
    assert int(state.to_play) == -1
    assert int(state.move_number) == 1
    assert_hash(state)


@pytest.mark.parametrize("rules", ALL_RULES)
def test_move_without_liberties_that_captures_is_legal(rules):
    state = position(
        """
        . . . . .
        . . . . .
        X . . . .
        O X . . .
        . O . . .
        """,
        rules=rules,
    )
    assert "A1" in legal_vertices(state)
    state = play_moves(state, "B A1")
    assert ascii_of(state) == drawing(
        """
        . . . . .
        . . . . .
        X . . . .
        . X . . .
        X O . . .
        """
    )
    assert captures(state) == [1, 0]
    # The lone stone took one stone and has one liberty: a ko, A2 is banned.
    assert int(state.ko) == gojax.gtp_to_action("A2", 5)
    assert "A2" not in legal_vertices(state)
    assert_hash(state)


EYES = """
    . X . X O
    X X X X O
    O O O O O
    . . . . .
    . . . . .
"""


@pytest.mark.parametrize("rules", ALL_RULES)
def test_filling_own_eye_is_legal_while_another_liberty_remains(rules):
    state = position(EYES, rules=rules)
    assert {"A5", "C5"} <= legal_vertices(state)
    state = play_moves(state, "B A5")
    assert ascii_of(state) == drawing(
        """
        X X . X O
        X X X X O
        O O O O O
        . . . . .
        . . . . .
        """
    )
    # Now White can take the whole group on its last liberty.
    state = play_moves(state, "W C5")
    assert ascii_of(state) == drawing(
        """
        . . O . O
        . . . . O
        O O O O O
        . . . . .
        . . . . .
        """
    )
    assert captures(state) == [0, 7]


@pytest.mark.parametrize("rules", ALL_RULES)
def test_playing_into_a_real_eye_is_single_stone_suicide(rules):
    state = position(EYES, to_play="W", rules=rules)
    assert legal_vertices(state) == (empty_vertices(state) - {"A5", "C5"}) | {"pass"}


LAST_EYE = """
    X X . X O
    X X X X O
    O O O O O
    . . . . .
    . . . . .
"""


@pytest.mark.parametrize("rules", ALL_RULES)
def test_filling_the_last_eye(rules):
    state = position(LAST_EYE, rules=rules)
    if rules in SUICIDE_ILLEGAL:
        assert "C5" not in legal_vertices(state)
        return
    assert "C5" in legal_vertices(state)
    state = play_moves(state, "B C5")
    assert ascii_of(state) == drawing(
        """
        . . . . O
        . . . . O
        O O O O O
        . . . . .
        . . . . .
        """
    )
    assert captures(state) == [0, 8]  # the seven stones and C5, the suicide's own stone
    assert_hash(state)


# ----------------------------------------------------------------------------
# Ko and superko.

KO = """
    . X O . .
    X O . O .
    . X O . .
    . . . . .
    . . . . .
"""


@pytest.mark.parametrize("rules", ALL_RULES)
def test_simple_ko(rules):
    state = position(KO, rules=rules)
    state = play_moves(state, "B C4")
    assert ascii_of(state) == drawing(
        """
        . X O . .
        X . X O .
        . X O . .
        . . . . .
        . . . . .
        """
    )
    assert int(state.ko) == gojax.gtp_to_action("B4", 5)
    # The immediate retake is banned; A5 is single-stone suicide for White.
    assert legal_vertices(state) == (empty_vertices(state) - {"B4", "A5"}) | {"pass"}
    # A ko threat elsewhere and an answer: the retake is legal again.
    state = play_moves(state, "W E1")
    assert int(state.ko) == -1
    state = play_moves(state, "B A1")
    assert "B4" in legal_vertices(state)
    state = play_moves(state, "W B4")
    assert ascii_of(state) == drawing(
        """
        . X O . .
        X O . O .
        . X O . .
        . . . . .
        X . . . O
        """
    )
    assert captures(state) == [1, 1]
    assert int(state.ko) == gojax.gtp_to_action("C4", 5)
    assert "C4" not in legal_vertices(state)


@pytest.mark.parametrize("rules", ALL_RULES)
def test_ko_ban_lasts_one_move(rules):
    # White tenukis at A1 and Black passes: the retake at B4 is legal again.
    state = play_moves(position(KO, rules=rules), "B C4", "W A1")
    assert int(state.ko) == -1
    state = play_moves(state, "B pass")
    assert "B4" in legal_vertices(state)
    state = play_moves(state, "W B4")
    assert captures(state) == [1, 1]


# Send two, return one: Black's throw-in at C5 is captured with its partner,
# and Black retakes on B5, which recreates the starting stones with White to
# move. Positional superko bans the retake (same stones); situational superko
# allows it (the same stones had Black to move).
SEND_TWO = """
    . X . O .
    X O O . .
    . . . . .
    . . . . .
    . . . . .
"""


@pytest.mark.parametrize("rules", ALL_RULES)
def test_superko_positional_versus_situational(rules):
    start = position(SEND_TWO, rules=rules)
    state = play_moves(start, "B C5", "W A5")
    assert ascii_of(state) == drawing(
        """
        O . . O .
        X O O . .
        . . . . .
        . . . . .
        . . . . .
        """
    )
    assert int(state.ko) == -1  # two stones were taken
    if rules in POSITIONAL:
        assert "B5" not in legal_vertices(state)
        assert legal_vertices(state) == (empty_vertices(state) - {"B5"}) | {"pass"}
        return
    assert "B5" in legal_vertices(state)
    state = play_moves(state, "B B5")
    assert ascii_of(state) == ascii_of(start)
    assert int(state.to_play) == -1  # the start had Black to move
    assert captures(state) == [1, 2]
    state = play_moves(state, "W pass")
    # Black to move in the starting situation: C5 would recreate the position
    # after move 1 with White to move, which situational superko remembers.
    if rules in SITUATIONAL:
        assert "C5" not in legal_vertices(state)
    else:
        assert rules == "chinese"
        assert "C5" in legal_vertices(state)
        play_moves(state, "B C5")


# Three kos: Black can take at C8 and C3, White at G8. Six captures in turn
# bring back the starting position with Black to move.
TRIPLE_KO = """
    . X O . . . X O .
    X O . O . X . X O
    . X O . . . X O .
    . . . . . . . . .
    . . . . . . . . .
    . X O . . . . . .
    X O . O . . . . .
    . X O . . . . . .
    . . . . . . . . .
"""
TRIPLE_KO_CYCLE = ["B C8", "W G8", "B C3", "W B8", "B H8", "W B3"]


@pytest.mark.parametrize("rules", ALL_RULES)
def test_triple_ko_cycle(rules):
    start = position(TRIPLE_KO, rules=rules)
    state = play_moves(start, *TRIPLE_KO_CYCLE[:5])
    last = TRIPLE_KO_CYCLE[5].split()[1]
    if rules != "chinese":
        # Every superko flavour bans the sixth capture: it recreates the start
        # with Black to move again.
        assert last not in legal_vertices(state)
        return
    assert int(state.ko) == gojax.gtp_to_action("G8", 9)  # only the last ko is banned
    state = play_moves(state, TRIPLE_KO_CYCLE[5])
    assert ascii_of(state) == ascii_of(start)
    assert int(state.to_play) == 1
    # Simple ko lets the cycle go round again.
    state = play_moves(state, *TRIPLE_KO_CYCLE)
    assert ascii_of(state) == ascii_of(start)
    assert captures(state) == [6, 6]
    assert_hash(state)


def test_chinese_allows_a_repetition_tromp_taylor_forbids():
    chinese = play_moves(position(TRIPLE_KO, rules="chinese"), *TRIPLE_KO_CYCLE[:5])
    tromp = play_moves(position(TRIPLE_KO, rules="tromp-taylor"), *TRIPLE_KO_CYCLE[:5])
    assert ascii_of(chinese) == ascii_of(tromp)
    assert legal_vertices(chinese) - legal_vertices(tromp) == {"B3"}
    assert legal_vertices(tromp) <= legal_vertices(chinese)


# ----------------------------------------------------------------------------
# Scoring.

# Black's S-shaped group and White's L-shaped group share A6 and B5 and have no
# eyes: whoever fills one is captured on the other. The outer groups live.
SEKI = """
    . X X O . O
    O . X O O O
    O O X O . O
    X X O O O O
    X X X X X X
    . X . X . X
"""


def test_seki_shared_liberties_count_for_nobody():
    state = position(SEKI, komi=7.5)
    # 15 stones and 3 eyes for Black, 14 stones and 2 eyes for White, A6 and B5 dame.
    assert result(state) == ([18, 16], pytest.approx(-5.5), -1)
    assert tromp_taylor_area(state.board) == (18, 16)
    # Both shared liberties are legal for both players (self-atari, not suicide)...
    assert {"A6", "B5"} <= legal_vertices(state)
    assert {"A6", "B5"} <= legal_vertices(position(SEKI, to_play="W"))
    # ...and whoever plays one is captured on the other.
    state = play_moves(state, "B A6", "W B5")
    assert stones(state, "B").isdisjoint({"A6", "B6", "C6", "C5", "C4"})
    assert captures(state) == [0, 5]


def test_empty_board_scores_zero():
    for size in (2, 9, 19):
        assert result(new_game(size, komi=7.5)) == ([0, 0], -7.5, -1)
        assert result(new_game(size, komi=0.0)) == ([0, 0], 0.0, 0)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("X . \n . O", [1, 1]),
        ("X . O\nX . O\nX . O", [3, 3]),
    ],
)
def test_komi_decides_ties(text, expected):
    assert result(position(text, komi=0.0)) == (expected, 0.0, 0)
    assert result(position(text, komi=0.5)) == (expected, -0.5, -1)
    assert result(position(text, komi=-0.5)) == (expected, 0.5, 1)


def test_area_counts_regions_bordering_one_colour():
    state = position(
        """
        . X . O .
        X X . O O
        . . . . .
        O O O O O
        . . . O .
        """
    )
    # Black: 3 stones + A5; White: 9 stones + E5, A1, B1, C1, E1; the rest touches both.
    assert result(state) == ([4, 14], -17.5, -1)
    assert tromp_taylor_area(state.board) == (4, 14)


# ----------------------------------------------------------------------------
# The end of the game.


def test_two_passes_end_the_game():
    state = new_game(5, rules="chinese")
    state = play_moves(state, "B pass", "W C3", "B pass")
    assert int(state.passes) == 1
    assert not bool(state.terminated)
    assert bool(jit_legal(state)[-1])
    state = play_moves(state, "W pass")
    assert bool(state.terminated)
    assert int(state.move_number) == 4
    assert not np.asarray(jit_legal(state)).any()
    # Playing on a finished game changes nothing.
    for action in (0, 12, 25):
        after = jit_play(state, action)
        for old, new in zip(jax.tree.leaves(state), jax.tree.leaves(after), strict=True):
            np.testing.assert_array_equal(np.asarray(old), np.asarray(new))


@pytest.mark.parametrize("rules", ["chinese", "tromp-taylor"])
def test_move_cap_ends_the_game(rules):
    state = new_game(5, rules=rules, max_moves=4)
    state = play_moves(state, "B C3", "W D4", "B pass")
    assert not bool(state.terminated)
    state = play_moves(state, "W B2")
    assert bool(state.terminated)
    assert int(state.move_number) == 4
    assert not np.asarray(jit_legal(state)).any()
    assert int(jit_play(state, 0).move_number) == 4


# ----------------------------------------------------------------------------
# Handicap.

HANDICAP_19 = {
    2: "D4 Q16",
    3: "D4 Q16 D16",
    4: "D4 Q16 D16 Q4",
    5: "D4 Q16 D16 Q4 K10",
    6: "D4 Q16 D16 Q4 D10 Q10",
    7: "D4 Q16 D16 Q4 D10 Q10 K10",
    8: "D4 Q16 D16 Q4 D10 Q10 K4 K16",
    9: "D4 Q16 D16 Q4 D10 Q10 K4 K16 K10",
}
HANDICAP_9 = {
    2: "C3 G7",
    3: "C3 G7 C7",
    4: "C3 G7 C7 G3",
    5: "C3 G7 C7 G3 E5",
    6: "C3 G7 C7 G3 C5 G5",
    7: "C3 G7 C7 G3 C5 G5 E5",
    8: "C3 G7 C7 G3 C5 G5 E3 E7",
    9: "C3 G7 C7 G3 C5 G5 E3 E7 E5",
}


@pytest.mark.parametrize("size, table", [(19, HANDICAP_19), (9, HANDICAP_9)])
def test_handicap_points_follow_gtp(size, table):
    for count, expected in table.items():
        got = [gojax.action_to_gtp(a, size) for a in gojax.handicap_points(size, count)]
        assert got == expected.split(), count


def test_handicap_points_other_sizes():
    def names(size, count):
        return " ".join(gojax.action_to_gtp(a, size) for a in gojax.handicap_points(size, count))

    assert names(13, 9) == "D4 K10 D10 K4 D7 K7 G4 G10 G7"
    assert names(8, 4) == "C3 F6 C6 F3"
    assert names(25, 5) == "D4 W22 D22 W4 N13"  # GTP's placement goes up to 25x25


@pytest.mark.parametrize("size, count", [(19, 1), (19, 10), (6, 2), (8, 5), (7, 5), (26, 2)])
def test_handicap_points_rejects_bad_requests(size, count):
    with pytest.raises(ValueError):
        gojax.handicap_points(size, count)


@pytest.mark.parametrize("size, count", [(19, 9), (19, 4), (9, 5)])
def test_handicap_game_starts_with_white_to_play(size, count):
    points = gojax.handicap_points(size, count)
    board = np.zeros(size * size, np.int8)
    board[points] = gojax.BLACK
    state = new_game(size, komi=0.5, rules="chinese", board=board, to_play=gojax.WHITE)
    assert int(state.to_play) == -1
    assert stones(state, "B") == {gojax.action_to_gtp(a, size) for a in points}
    assert stones(state, "W") == set()
    legal = legal_vertices(state)
    assert legal == empty_vertices(state) | {"pass"}
    assert_hash(state)
    state = play_moves(state, "W C2")
    assert stones(state, "W") == {"C2"}
    assert int(state.to_play) == 1
    assert len(stones(state, "B")) == count


# ----------------------------------------------------------------------------
# Bad inputs.


@pytest.mark.parametrize("size", [0, 1, 26, 30])
def test_bad_sizes_raise(size):
    with pytest.raises(ValueError):
        gojax.new_game(size)


@pytest.mark.parametrize("rules", ["ancient-territory", "", "ing", "tromp taylor"])
def test_unknown_rules_raise(rules):
    with pytest.raises(ValueError):
        gojax.new_game(9, rules=rules)


@pytest.mark.parametrize(
    "alias, name", [("TT", "tromp-taylor"), ("Chinese", "chinese"), ("nz", "new-zealand")]
)
def test_rule_aliases(alias, name):
    assert gojax.get_rules(alias).name == name


@pytest.mark.parametrize("vertex", ["I5", "Z1", "A0", "A10", "5A", ""])
def test_bad_vertices_raise(vertex):
    with pytest.raises(ValueError):
        gojax.gtp_to_action(vertex, 9)


# ----------------------------------------------------------------------------
# One contract over every preset.

CONTRACT_MOVES = (
    "C1 E4 E5 C2 B1 B4 D4 B5 E1 D1 A2 C3 D3 E3 D2 C4 E2 E4 A4 A5 A1 D5 B2 B3 D1 E3 E5 E3 A3 E4"
)


@pytest.mark.parametrize("rules", ALL_RULES)
def test_contract_fixed_game_every_preset(rules):
    state = new_game(5, rules=rules)
    moves = CONTRACT_MOVES.split()
    assert len(moves) == 30
    total_captures = 0
    for number, vertex in enumerate(moves):
        legal = np.asarray(jit_legal(state))
        board = np.asarray(state.board)
        assert not (legal[:-1] & (board != 0)).any(), number
        assert legal[-1], number  # pass is legal until the game ends
        assert legal[gojax.gtp_to_action(vertex, 5)], (number, vertex)
        state = jit_play(state, gojax.gtp_to_action(vertex, 5))
        assert_hash(state)
        assert int(state.move_number) == number + 1
        total_captures = sum(captures(state))
    assert total_captures == 20
    assert not bool(state.terminated)
    assert int(state.to_play) == 1
    state = play_moves(state, "B pass", "W pass")
    assert bool(state.terminated)
    assert not np.asarray(jit_legal(state)).any()


def test_liberty_counts_agree_single_batched_nested_and_off_cpu(monkeypatch):
    """Liberties come from one scatter-add whose batched form (a flat scatter on a CPU, the
    vmapped one elsewhere) must give every board the counts it gets alone."""
    from gojax import _board

    boards = []
    for seed in range(6):  # random positions with chains of every size
        rng = np.random.default_rng(seed)
        board = rng.choice(np.array([-1, 0, 1], np.int8), size=81, p=[0.35, 0.3, 0.35])
        boards.append(board)
    boards = jax.numpy.asarray(np.stack(boards))
    chains = jax.vmap(lambda b: _board._label_chains(b, 9))(boards)

    def count(board, chain):
        return _board._count_liberties(board, chain, 9)

    one_by_one = np.stack([np.asarray(count(b, c)) for b, c in zip(boards, chains, strict=True)])
    # The reference: distinct empty neighbours of each chain, counted in Python.
    nbrs = _board.neighbor_table(9)
    for board, chain, libs in zip(np.asarray(boards), np.asarray(chains), one_by_one, strict=True):
        for rep in set(chain[board != 0].tolist()):
            members = np.flatnonzero(chain == rep)
            empty = {int(n) for m in members for n in nbrs[m] if n < 81 and board[n] == 0}
            assert libs[rep] == len(empty)
    np.testing.assert_array_equal(jax.jit(jax.vmap(count))(boards, chains), one_by_one)
    nested = jax.jit(jax.vmap(jax.vmap(count)))(boards.reshape(2, 3, 81), chains.reshape(2, 3, 81))
    np.testing.assert_array_equal(nested.reshape(6, 81), one_by_one)
    shared = jax.vmap(count, in_axes=(None, None), axis_size=3)(boards[0], chains[0])
    np.testing.assert_array_equal(shared, np.tile(one_by_one[:1], (3, 1)))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # the vmapped scatter
    np.testing.assert_array_equal(jax.vmap(count)(boards, chains), one_by_one)


def _random_game_liberties(size: int, rules: str, moves: int):
    """One random game as a function of its key: per move, whether the incremental
    liberties equal a full recount, and whether the move removed stones."""
    from gojax import _board

    def one(key):
        def step(state, key):
            legal = gojax.legal_moves(state)
            points = legal.at[-1].set(False)  # pass only when no point is legal
            mask = jax.numpy.where(points.any(), points, legal)
            action = jax.random.categorical(key, jax.numpy.where(mask, 0.0, -jax.numpy.inf))
            after = gojax.play(state, action)
            recount = _board._liberties_at(after.board, after.chain, size)
            removed = jax.numpy.sum(after.captures) > jax.numpy.sum(state.captures)
            return after, (jax.numpy.all(recount == after.liberties), removed)

        start = gojax.new_game(size, rules=rules)
        return jax.lax.scan(step, start, jax.random.split(key, moves))[1]

    return one


@pytest.mark.parametrize("rules", ["tromp-taylor", "chinese"])
def test_boards_up_to_25x25_keep_exact_liberties_and_larger_ones_are_refused(rules):
    """21x21 and 25x25 games, captures included, keep the liberties of a full recount."""
    for size in (21, 25):
        one = _random_game_liberties(size, rules, size * size)
        exact, removed = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(size), 4))
        assert np.asarray(exact).all() and np.asarray(removed).sum() > 20, size
    with pytest.raises(ValueError, match=r"2\.\.25, got 26"):
        gojax.new_game(26)


@pytest.mark.parametrize("rules", ["tromp-taylor", "chinese"])
def test_liberties_after_every_move_equal_a_full_recount(rules):
    """A move updates liberties around the played point and recounts only the boards where
    it removed stones (batched: gathered, up to B / 16 of them, else all): every path must
    give the counts of a full recount, alone, batched and under nested vmap."""
    from gojax import _board

    size, batch, moves = 7, 32, 98
    one = _random_game_liberties(size, rules, moves)
    keys = jax.random.split(jax.random.key(7), batch)
    exact, removed = jax.jit(jax.vmap(one))(keys)
    assert np.asarray(exact).all()
    # Both batched paths were taken: some moves removed stones on a few boards, some on more.
    slots = batch // _board.RECOUNT_DIVISOR
    per_move = np.asarray(removed).sum(axis=0)
    assert ((per_move >= 1) & (per_move <= slots)).any() and (per_move > slots).any()
    nested, _ = jax.jit(jax.vmap(jax.vmap(one)))(keys.reshape(4, 8))
    assert np.asarray(nested).all()
    alone, removed_alone = jax.jit(one)(keys[0])
    assert np.asarray(alone).all() and np.asarray(removed_alone).any()
    # An empty batch is a batch too (it once failed to trace: the recount gathered a row).
    empty, _ = jax.jit(jax.vmap(one))(keys[:0])
    assert empty.shape == (0, moves)


# ----------------------------------------------------------------------------
# Rules kept as data: one program for every preset.


def test_rules_kept_as_data_play_every_preset_as_its_static_rules():
    """Random 5x5 games of every preset (suicides, kos, superko bans, captures, passes
    come up), run side by side under their static rules and, all presets in one batch,
    under ``RUNTIME_RULES``: the same legal moves, boards, captures, repetition bans,
    KataGo inputs and scores at every move."""
    from gojax._board import repetition_bans
    from gojax.katago_features import katago_inputs

    presets, games, moves = list(gojax.RULE_PRESETS), 12, 70

    def step(states, key):
        legal = jax.vmap(gojax.legal_moves)(states)
        # Mostly stones, a pass now and then: long games with captures and repetitions.
        logits = jnp.where(legal, 0.0, -jnp.inf).at[:, -1].add(-2.5)
        # Game g of every preset draws the same numbers, whatever the batch.
        game = jnp.arange(logits.shape[0]) % games
        draw = jax.vmap(lambda g, row: jax.random.categorical(jax.random.fold_in(key, g), row))
        actions = draw(game, logits)
        seen = (
            legal,
            states.board,
            states.captures,
            jax.vmap(repetition_bans)(states),
            *jax.vmap(katago_inputs)(states),
            jax.vmap(gojax.score)(states),
        )
        return jax.vmap(gojax.play)(states, actions), seen

    @jax.jit
    def run(states, keys):
        return jax.lax.scan(step, states, keys)[1]

    def start(rules, runtime):
        one = gojax.new_game(5, komi=0.5, rules=rules, max_moves=moves, runtime_rules=runtime)
        return jax.tree.map(lambda x: jnp.stack([x] * games), one)

    keys = jax.random.split(jax.random.key(7), moves)
    mixed = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[start(r, True) for r in presets])
    assert mixed.rules == gojax.RUNTIME_RULES
    together = run(mixed, keys)
    rows = np.arange(len(presets) * games).reshape(len(presets), games)
    bans = 0
    for p, rules in enumerate(presets):
        alone = run(start(rules, False), keys)
        for name, ours, theirs in zip(
            ("legal", "board", "captures", "bans", "spatial", "global", "score"),
            together,
            alone,
            strict=True,
        ):
            np.testing.assert_array_equal(
                np.asarray(ours)[:, rows[p]], np.asarray(theirs), f"{rules}: {name}"
            )
        bans += int(np.asarray(alone[3]).sum())
    assert bans > 0  # the games met ko and superko bans
