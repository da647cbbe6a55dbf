"""Whole games: SGF replay, scoring against recorded results, random self-play."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import reference_path

import gojax
import gojax._random_play
from gojax import _game, sgf
from gojax._random_play import play_random_games


def _replay_final(records, size):
    """Final states of ``records`` (all ``size``), replayed together as one vmapped scan."""
    cap = 4 * size * size
    actions = np.full((len(records), cap), size * size, np.int32)
    for row, record in zip(actions, records, strict=True):
        moves = [action for _, action in record.moves]
        row[: len(moves)] = moves
    lengths = jnp.asarray([len(record.moves) for record in records], jnp.int32)
    komi = jnp.asarray([record.komi for record in records], jnp.float32)

    @jax.jit
    def run(actions, lengths, komi):
        def one(actions, length, komi):
            start = gojax.new_game(size, rules="tromp-taylor", max_moves=cap, komi=komi)
            final, _, _, was_legal = gojax.replay(start, actions, length)
            return gojax.score(final), final.terminated, jnp.all(was_legal)

        return jax.vmap(one)(actions, lengths, komi)

    margins, terminated, all_legal = run(jnp.asarray(actions), lengths, komi)
    assert bool(np.all(all_legal)), "a recorded move is illegal for us"
    return np.asarray(margins), np.asarray(terminated)


def test_tromp_taylor_scores_equal_recorded_results_9x9():
    files = sorted(reference_path("sgf", "katago-9x9").glob("*.sgf"))
    assert len(files) == 300
    records = [sgf.load(path) for path in files]
    margins, terminated = _replay_final(records, 9)
    for path, record, margin, ended in zip(files, records, margins, terminated, strict=True):
        assert _game.result_string(float(margin)) == record.result, path.name
        assert ended, f"{path.name} did not end with two passes"


def test_tromp_taylor_scores_equal_recorded_results_19x19():
    files = sorted(reference_path("sgf", "katago-19x19").glob("*.sgf"))
    assert len(files) == 24
    records = [sgf.load(path) for path in files]
    margins, _ = _replay_final(records, 19)
    for path, record, margin in zip(files, records, margins, strict=True):
        assert _game.result_string(float(margin)) == record.result, path.name


def test_state_at_replays_setup_moves_and_passes():
    record = sgf.parse("(;SZ[5]KM[0.5]RU[Chinese]AB[aa]AW[ee];B[cc];W[];B[dd]AE[aa])")
    assert _game.rules_of_record(record) == "chinese"
    state = _game.state_at(record)
    board = np.asarray(state.board).reshape(5, 5)
    assert board[0, 0] == 0  # removed by AE before the third move
    assert board[4, 4] == gojax.WHITE and board[2, 2] == board[3, 3] == gojax.BLACK
    assert int(state.move_number) == 3 and int(state.to_play) == gojax.WHITE
    early = _game.state_at(record, move=1)
    assert int(early.move_number) == 1 and np.asarray(early.board).reshape(5, 5)[0, 0] == 1
    with pytest.raises(ValueError, match="out of range"):
        _game.state_at(record, move=9)


def test_state_at_names_an_illegal_move():
    record = sgf.parse("(;SZ[5];B[cc];W[cc])")
    with pytest.raises(ValueError, match=r"move 2 \(W C3\) is illegal"):
        _game.state_at(record)


def test_state_at_plays_on_after_two_passes():
    """A record that goes on after two passes (GTP's printsgf writes them) replays, as
    loadsgf reads it: the game resumes, and its final position is the last move's."""
    record = sgf.parse("(;FF[4]GM[1]SZ[9]KM[7];B[ee];W[cc];B[];W[];B[fe])")
    state = _game.state_at(record)
    board = np.asarray(state.board)
    assert board[gojax.gtp_to_action("F5", 9)] == gojax.BLACK
    assert int(state.move_number) == 5 and not bool(state.terminated)
    assert int(state.to_play) == gojax.WHITE and int(state.passes) == 0
    # The position at the two passes is still the finished game.
    assert bool(_game.state_at(record, move=4).terminated)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The record: White A9 set up inside Black's B9 and A8.
        ("(;GM[1]FF[4]SZ[9]AB[ab][ba]AW[aa];B[ee])", "in the root: the white chain at A9"),
        # A later setup node is checked on the board it changes.
        ("(;SZ[9]AB[ab];W[ee];B[ba];AW[aa];W[cc])", "before move 3: the white chain at A9"),
    ],
)
def test_state_at_refuses_setup_stones_without_liberties(text, message):
    with pytest.raises(gojax.SetupError, match=message):
        _game.state_at(sgf.parse(text))
    # A record made in code (not read from SGF) gets the same check for points set twice.
    record = sgf.GameRecord(size=9, setup_black=[1], setup_white=[1])
    with pytest.raises(ValueError, match="in the root: point B9 is set up twice"):
        _game.state_at(record)


def test_record_from_actions_round_trips_through_sgf(tmp_path):
    record = _game.record_from_actions([0, 24, 25, 25], size=5, komi=7.5, rules="chinese")
    path = tmp_path / "g.sgf"
    sgf.save(record, path)
    again = sgf.load(path)
    assert again.moves == [("B", 0), ("W", 24), ("B", 25), ("W", 25)]
    assert bool(_game.state_at(again).terminated)


def test_result_string():
    assert _game.result_string(3.5) == "B+3.5"
    assert _game.result_string(-0.5) == "W+0.5"
    assert _game.result_string(0.0) == "0"


def test_random_games_are_complete_and_consistent():
    result = play_random_games(5, 24, batch=8, rules="tromp-taylor", komi=0.5, seed=3)
    assert result.games == 24
    assert result.black_wins + result.white_wins + result.draws == 24
    assert result.draws == 0  # half-point komi
    assert np.all(result.lengths >= 2) and np.all(result.lengths <= 50)
    assert result.moves == int(result.lengths.sum())
    # Every recorded game replays legally to the recorded final board and margin.
    start = gojax.new_game(5, rules="tromp-taylor", komi=0.5)
    padded = np.where(result.actions >= 0, result.actions, 25).astype(np.int32)

    @jax.jit
    def run(actions, lengths):
        def one(actions, length):
            final, _, _, legal = gojax.replay(start, actions, length)
            return final.board, gojax.score(final), final.terminated, jnp.all(legal)

        return jax.vmap(one)(actions, lengths)

    boards, margins, terminated, legal = run(jnp.asarray(padded), jnp.asarray(result.lengths))
    assert np.all(np.asarray(legal)) and np.all(np.asarray(terminated))
    np.testing.assert_array_equal(boards, result.final_boards)
    np.testing.assert_allclose(margins, result.margins)
    for i in range(24):
        assert np.sum(result.actions[i] >= 0) == result.lengths[i]


def test_random_games_depend_on_the_seed_only():
    first = play_random_games(5, 8, batch=8, seed=1)
    again = play_random_games(5, 8, batch=8, seed=1)
    other = play_random_games(5, 8, batch=8, seed=2)
    np.testing.assert_array_equal(first.actions, again.actions)
    assert not np.array_equal(first.actions, other.actions)


def test_random_action_draws_only_legal_moves():
    legal = jnp.zeros(10, bool).at[jnp.array([2, 7])].set(True)
    draws = jax.vmap(lambda k: gojax._random_play.random_action(k, legal))(
        jax.random.split(jax.random.key(0), 200)
    )
    assert set(np.asarray(draws).tolist()) == {2, 7}
