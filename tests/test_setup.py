"""Setup stones: the one check (gojax.place_stones) behind SGF, GTP and analysis setups."""

import numpy as np
import pytest

import gojax
from gojax import BLACK, EMPTY, WHITE, SetupError, place_stones, sgf
from gojax._setup import chain_without_liberty, repeated_point


def at(vertex: str, size: int = 9) -> int:
    return gojax.gtp_to_action(vertex, size)


def test_places_stones_and_clears_points():
    board = place_stones(9, [(BLACK, at("E5")), (WHITE, at("C3"))])
    assert board.dtype == np.int8 and board.shape == (81,)
    assert {int(p): int(board[p]) for p in np.flatnonzero(board)} == {at("E5"): 1, at("C3"): -1}
    # On a board already set up (a later SGF node): the given board is left as it was.
    later = place_stones(9, [(EMPTY, at("E5")), (BLACK, at("D4"))], board=board)
    assert later[at("E5")] == 0 and later[at("D4")] == 1 and later[at("C3")] == -1
    assert board[at("E5")] == 1


def test_a_point_set_twice_is_refused_by_name():
    with pytest.raises(SetupError, match="point E5 is set up twice") as err:
        place_stones(9, [(BLACK, at("E5")), (WHITE, at("E5"))])
    assert err.value.point == at("E5") and isinstance(err.value, ValueError)
    # Clearing a point and setting it in the same setup is just as ambiguous.
    with pytest.raises(SetupError, match="set up twice"):
        place_stones(9, [(EMPTY, at("A1")), (BLACK, at("A1"))])
    assert repeated_point([3, 5, 3, 5]) == 2 and repeated_point([1, 2]) is None


def test_a_chain_without_a_liberty_is_refused_by_name():
    # The SGF setup: White A9 inside Black's B9 and A8.
    with pytest.raises(SetupError, match="the white chain at A9 has no liberty") as err:
        place_stones(9, [(BLACK, at("B9")), (BLACK, at("A8")), (WHITE, at("A9"))])
    assert err.value.point == at("A9")
    # A chain of two in the corner, both stones surrounded.
    stones = [(WHITE, at(v)) for v in ("C1", "A2", "B2")] + [(BLACK, at(v)) for v in ("A1", "B1")]
    with pytest.raises(SetupError, match="the black chain at A1 has no liberty"):
        place_stones(9, stones)
    # One liberty anywhere along the chain is enough: without White C1, B1 has C1.
    assert place_stones(9, stones[1:])[at("A1")] == BLACK
    # Clearing a point can take a chain's last liberty away too... or give one back.
    full = place_stones(9, [(BLACK, at("B9")), (BLACK, at("A8"))])
    with pytest.raises(SetupError, match="white chain at A9"):
        place_stones(9, [(WHITE, at("A9"))], board=full)
    assert place_stones(9, [(WHITE, at("A9")), (EMPTY, at("B9"))], board=full)[at("A9")] == -1


def test_off_board_points_and_bad_colours_are_refused():
    with pytest.raises(SetupError, match="off the 9x9 board"):
        place_stones(9, [(BLACK, 81)])
    with pytest.raises(SetupError, match="colour 2"):
        place_stones(9, [(2, 0)])


def test_chain_without_liberty_agrees_with_the_board_functions():
    """The host check finds exactly the stones whose chain ``new_game`` counts no liberty for."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        board = rng.choice(np.array([BLACK, WHITE, EMPTY], np.int8), size=25, p=[0.4, 0.4, 0.2])
        counted = np.asarray(gojax.new_game(5, board=board).liberties)
        stuck = np.flatnonzero((board != 0) & (counted == 0))
        expected = int(stuck[0]) if stuck.size else None
        assert chain_without_liberty(board, 5) == expected, board.reshape(5, 5)


def test_the_sgf_reader_uses_the_same_check_for_one_node():
    with pytest.raises(sgf.SGFError, match="property AE: point 'aa' is set up twice"):
        sgf.parse("(;SZ[9]AB[aa][bb]AE[aa])")
