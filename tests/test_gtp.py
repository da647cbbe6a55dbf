"""GTP front end and engine: conformance vectors, analysis streaming, time, fuzzing, CLI.

Protocol tests run on an engine with the uniform (no network) player; the
tests that need real moves use the reference KataGo net, loaded once.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import REPO, reference_path

import gojax
from eval.engine import (
    RESIGN,
    Clock,
    Engine,
    TimeSettings,
    allocate_time,
    dead_chains,
    expected_moves_left,
    rules_from_json,
)
from eval.gtp import GTPServer, preprocess
from eval.players import PolicyPlayer, UniformPlayer
from gojax import sgf

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"
REPLY = re.compile(r"^[=?][0-9]*( [^\n]*)?(\n[^\n]+)*$")


def uniform_engine(**kwargs) -> Engine:
    options = {"size": 9, "komi": 7.0, "rules": "chinese"} | kwargs
    return Engine(UniformPlayer(), **options)


@functools.cache
def net_engine() -> Engine:
    from gojax.katago_model import load_model

    model = load_model(reference_path("katago", MODEL))
    return Engine(PolicyPlayer(model, symmetry="average"), size=9, komi=7.0, rules="chinese")


def fresh_net_server() -> GTPServer:
    engine = net_engine()
    engine.resign_threshold = None
    engine.set_time(TimeSettings())
    server = GTPServer(engine, io.StringIO(), version="test")
    run(server, "boardsize 9\nkomi 7\nkata-set-rules chinese\nclear_board\n")
    return server


def make_server(**kwargs) -> GTPServer:
    return GTPServer(uniform_engine(**kwargs), io.StringIO(), version="test")


def run(server: GTPServer, text: str) -> list[str]:
    """Send ``text`` and return the replies it produced, each without its final blank line."""
    out = server.out
    start = len(out.getvalue())
    server.serve(io.StringIO(text))
    produced = out.getvalue()[start:]
    assert produced.endswith("\n\n") or not produced
    return produced[:-2].split("\n\n") if produced else []


def ask(server: GTPServer, command: str) -> str:
    (reply,) = run(server, command + "\n")
    return reply


def gtp_flags(*argv: str) -> dict:
    """``gojax gtp``'s flags as its own parser gives them for ``argv`` (every default)."""
    import argparse

    from eval.gtp import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return vars(parser.parse_args(["gtp", *argv]))


# ----------------------------------------------------------------------------
# Protocol basics


@pytest.mark.parametrize(
    "command, reply",
    [
        ("protocol_version", "= 2"),
        ("name", "= gojax"),
        ("version", "= test"),
        ("7 name", "=7 gojax"),
        ("known_command play", "= true"),
        ("known_command kata-analyze", "= true"),
        ("known_command frobnicate", "= false"),
        ("known_command", "? syntax error"),
        ("frobnicate", "? unknown command"),
        ("12 frobnicate 3", "?12 unknown command"),
        ("NAME", "? unknown command"),
        ("boardsize 1", "? unacceptable size"),
        ("boardsize 26", "? unacceptable size"),
        ("3 boardsize 30", "?3 unacceptable size"),
        ("boardsize nine", "? syntax error"),
        ("boardsize", "? syntax error"),
        ("boardsize 9", "="),
        ("clear_board", "="),
        ("komi 6.5", "="),
        ("komi x", "? syntax error"),
        ("komi nan", "? syntax error"),
        ("play b D4", "="),
        ("play B d4", "="),
        ("play black pass", "="),
        ("play x D4", "? syntax error"),
        ("play b", "? syntax error"),
        ("play b I4", "? syntax error"),
        ("play b Z4", "? illegal move"),
        ("play b D44", "? illegal move"),
        ("undo", "? cannot undo"),
        ("final_score", "= W+7"),
        ("final_status_list dead", "="),
        ("final_status_list nonsense", "? syntax error"),
        ("fixed_handicap 4", "= C3 G7 C7 G3"),
        ("fixed_handicap 5", "= C3 G7 C7 G3 E5"),
        ("fixed_handicap 1", "? invalid number of stones"),
        ("fixed_handicap 10", "? invalid number of stones"),
        ("place_free_handicap 2", "= C3 G7"),
        ("set_free_handicap C3 G7", "="),
        ("set_free_handicap C3 C3", "? bad vertex list: point C3 is set up twice"),
        ("set_free_handicap pass D4", "? bad vertex list"),
        ("set_free_handicap", "? syntax error"),
        ("set_position b D4 w E5", "="),
        ("set_position", "="),
        ("set_position b D4 w", "? syntax error"),
        ("set_position b pass", "? syntax error"),
        ("set_position x D4", "? syntax error"),
        ("set_position b D4 w D4", "? illegal stone placements: point D4 is set up twice"),
        (
            "set_position b A1 w A2 w B1",
            "? illegal stone placements: the black chain at A1 has no liberty",
        ),
        ("time_settings 300 30 5", "="),
        ("time_settings 300 0 0", "="),
        ("time_settings -1 0 0", "? syntax error"),
        ("time_settings 300 30", "? syntax error"),
        ("time_left b 100 0", "="),
        ("time_left white 10 3", "="),
        ("time_left b x 0", "? syntax error"),
        ("kgs-time_settings none", "="),
        ("kgs-time_settings absolute 600", "="),
        ("kgs-time_settings canadian 600 300 25", "="),
        ("kgs-time_settings byoyomi 600 30 5", "="),
        ("kgs-time_settings byoyomi 600", "? syntax error"),
        ("kgs-time_settings sudden 600", "? syntax error"),
        ("kgs-time_settings fischer 600 10", "? syntax error"),
        ("kata-time_settings fischer 600 10", "="),
        ("kata-time_settings fischer-capped 600 10 900 60", "="),
        ("kata-time_settings fischer-capped 600 10 -1 -1", "="),
        ("kata-time_settings fischer-capped 600 10 300 60", "? syntax error"),
        ("kata-time_settings fischer 600", "? syntax error"),
        ("kata-time_settings fischer 600 -1", "? syntax error"),
        ("kata-time_settings byoyomi 600 30 5", "="),
        ("kata-time_settings", "? syntax error"),
        ("kata-list_time_settings", "= none absolute byoyomi canadian fischer fischer-capped"),
        ("kgs-rules chinese", "="),
        ("kgs-rules japanese", "="),
        ("kgs-rules ing", "? rules not supported"),
        ("kata-set-rules aga", "="),
        ("kata-set-rules japanese", "="),
        ("kata-set-rules stone-scoring", "? rules not supported"),
        ("kata-set-rules {not json", "? syntax error"),
        ("kata-set-rule ko POSITIONAL", "="),
        ("kata-set-rule suicide true", "? rules not supported"),
        ("kata-set-rule suicide maybe", "? suicide is true or false, not 'maybe'"),
        ("kata-set-rule ko", "? syntax error"),
        (
            "kata-set-rule komi 7",
            "? unknown rules field 'komi': one of ko, scoring, tax, suicide, hasButton, "
            "whiteHandicapBonus",
        ),
        ("kata-raw-nn 0", "? this player has no network"),
        ("kata-raw-nn 8", "? syntax error"),
        ("kata-raw-nn", "? syntax error"),
        ("cputime", "= 0.000"),
        ("gomill-cpu_time", "= 0.000"),
        (
            "kata-get-rules",
            '= {"hasButton":false,"ko":"SIMPLE","scoring":"AREA","suicide":false,'
            '"tax":"NONE","whiteHandicapBonus":"N"}',
        ),
        ("loadsgf /no/such/file.sgf", "? cannot load file"),
        ("loadsgf", "? syntax error"),
        ("printsgf", "= (;FF[4]GM[1]SZ[9]KM[7]RU[chinese]AP[gojax])"),
        ("stop", "="),
        ("clear_cache", "="),
        ("quit", "="),
    ],
)
def test_reply_vectors(command, reply):
    server = make_server()
    assert ask(server, command) == reply


def test_japanese_rules_count_territory_and_prisoners():
    server = make_server()
    run(server, "boardsize 5\nkomi 0.5\nkata-set-rules japanese\nclear_board\n")
    moves = ["B B1", "W C1", "B B2", "W C2", "B B3", "W C3", "B B4", "W C4", "B B5", "W C5"]
    run(server, "".join(f"play {m}\n" for m in moves + ["B A1"]))
    assert ask(server, "kata-get-rules") == (
        '= {"hasButton":false,"ko":"SIMPLE","scoring":"TERRITORY","suicide":false,'
        '"tax":"SEKI","whiteHandicapBonus":"0"}'
    )
    # Territory: Black A2-A5 (4), White D and E (10); by area 10 against 15.
    assert ask(server, "final_score") == "= W+6.5"
    assert ask(server, "kata-set-rules chinese") == "="
    assert ask(server, "final_score") == "= W+5.5"


def test_list_commands_names_every_command_once():
    server = make_server()
    listed = ask(server, "list_commands")[2:].split("\n")
    assert len(listed) == len(set(listed))
    for name in (
        "protocol_version name version known_command list_commands quit boardsize clear_board "
        "komi play genmove undo showboard final_score final_status_list loadsgf printsgf "
        "fixed_handicap place_free_handicap set_free_handicap time_settings time_left "
        "kgs-time_settings kgs-rules kgs-genmove_cleanup kata-set-rules kata-get-rules "
        "lz-analyze kata-analyze lz-genmove_analyze kata-genmove_analyze analyze genmove_analyze"
    ).split():
        assert name in listed


def test_preprocessing_comments_blank_lines_tabs_and_cr():
    server = make_server()
    text = "\n   \n# a comment\nname # trailing\r\n\t7\tname\x01\r\n\x00\n8 known_command\tplay\n"
    assert run(server, text) == ["= gojax", "=7 gojax", "=8 true"]
    assert preprocess("a\tb # c") == "a b"


def test_quit_ends_the_session():
    server = make_server()
    assert run(server, "1 name\n2 quit\n3 name\n") == ["=1 gojax", "=2"]


def test_id_only_line_and_huge_ids():
    server = make_server()
    assert run(server, "5\n00012 name\n") == ["?5 unknown command", "=12 gojax"]


def test_multi_line_replies_have_no_blank_lines():
    server = make_server()
    board = ask(server, "showboard")
    assert board.startswith("= \n") and "A B C D E F G H J" in board
    assert REPLY.match(board)


# ----------------------------------------------------------------------------
# The game: play, undo, scoring, handicap, SGF


def test_play_and_undo_restore_the_position():
    server = make_server()
    engine = server.engine
    run(server, "play b E5\nplay w C3\n")
    board, to_play = np.asarray(engine.state.board), engine.to_play
    run(server, "play b D4\nplay w F6\n")
    assert run(server, "undo\nundo\n") == ["=", "="]
    np.testing.assert_array_equal(np.asarray(engine.state.board), board)
    assert engine.to_play == to_play
    assert [m.action for m in engine.moves] == [40, 56]
    assert run(server, "undo\nundo\nundo\n") == ["=", "=", "? cannot undo"]
    assert not np.any(np.asarray(engine.state.board))


def test_capture_and_ko_are_enforced():
    server = make_server()
    # Black A3 B2 B4 C3 against White C2 D3 C4: a ko at B3/C3.
    moves = "play b B2\nplay w C2\nplay b A3\nplay w D3\nplay b B4\nplay w C4\nplay b C3\n"
    assert run(server, moves) == ["="] * 7
    assert ask(server, "play w B3") == "="  # White captures C3
    assert ask(server, "play b C3") == "? illegal move"  # the ko
    assert ask(server, "play b J9") == "="
    assert ask(server, "play w J8") == "="
    assert ask(server, "play b C3") == "="  # after a ko threat exchange


def test_the_largest_board_25x25_is_played_to_its_corners():
    server = make_server()
    assert run(server, "boardsize 25\nclear_board\n") == ["=", "="]
    # Columns A..Z without I: Z is the 25th; row 25 is the top line (action 0..24).
    assert run(server, "play b Z25\nplay w A1\nplay b A25\n") == ["="] * 3
    assert [m.action for m in server.engine.moves] == [24, 600, 0]
    assert ask(server, "play w Z26") == "? illegal move"
    assert re.fullmatch(r"= [A-HJ-Z](1[0-9]|2[0-5]|[1-9])", ask(server, "genmove w"))
    assert ask(server, "final_score").startswith("= ")


def test_out_of_turn_moves_and_genmove_for_either_colour():
    server = make_server()
    assert run(server, "play w E5\nplay w D4\n") == ["=", "="]
    reply = ask(server, "genmove w")
    assert re.fullmatch(r"= [A-HJ][1-9]", reply)
    assert len(server.engine.moves) == 3 and server.engine.to_play == 1


def test_final_score_is_the_area_count():
    server = make_server()
    assert ask(server, "final_score") == "= W+7"
    assert run(server, "play b E5\nfinal_score\n") == ["=", "= B+74"]
    assert run(server, "play w D5\nfinal_score\n") == ["=", "= W+7"]
    assert run(server, "komi 0\nfinal_score\n") == ["=", "= 0"]


def test_final_status_lists_cover_the_stones():
    server = make_server()
    run(server, "play b E5\nplay w C3\n")
    assert ask(server, "final_status_list alive") == "= E5\nC3"  # one chain a line
    run(server, "play b E4\n")
    assert ask(server, "final_status_list alive") == "= E5 E4\nC3"
    assert ask(server, "final_status_list dead") == "="
    assert ask(server, "final_status_list seki") == "="


def test_fixed_handicap_places_stones_and_gives_white_the_move():
    server = make_server()
    assert ask(server, "fixed_handicap 3") == "= C3 G7 C7"
    engine = server.engine
    board = np.asarray(engine.state.board)
    assert sorted(np.flatnonzero(board)) == [20, 24, 56] and engine.to_play == -1
    assert float(engine.state.komi) == 7.0 + 3  # chinese: N points for N stones
    assert ask(server, "fixed_handicap 3") == "? board not empty"
    assert ask(server, "set_free_handicap D4 E5") == "? board not empty"
    assert ask(server, "undo") == "? cannot undo"
    assert ask(server, "clear_board") == "="
    assert ask(server, "set_free_handicap D4 E5 F6") == "="
    assert engine.to_play == -1 and engine.handicap == 3


def test_set_position_places_stones_without_a_history():
    server = make_server()
    engine = server.engine
    assert run(server, "play b E5\nplay w D5\nfixed_handicap 2\n")[-1] == "? board not empty"
    # A ko: White's D5 has one liberty, E5, where Black captures it.
    stones = "b D4 b C5 b D6 w E4 w F5 w E6 w D5"
    assert ask(server, f"set_position {stones}") == "="
    board = np.asarray(engine.state.board)
    expected = {"D4": 1, "C5": 1, "D6": 1, "E4": -1, "F5": -1, "E6": -1, "D5": -1}
    assert {gojax.action_to_gtp(int(p), 9): int(board[p]) for p in np.flatnonzero(board)} == (
        expected
    )
    assert engine.moves == [] and engine.to_play == 1 and engine.handicap == 0
    assert int(engine.state.ko) == -1 and engine.state.captures.tolist() == [0, 0]
    assert ask(server, "undo") == "? cannot undo"
    # Black takes D5 at E5, and then the ko forbids White's retaking at once.
    assert ask(server, "play b E5") == "="
    assert np.asarray(engine.state.board)[gojax.gtp_to_action("D5", 9)] == 0
    assert ask(server, "play w D5") == "? illegal move"
    # The record: the stones as the root's setup, then the move.
    assert ask(server, "printsgf") == (
        "= (;FF[4]GM[1]SZ[9]KM[7]RU[chinese]AP[gojax]AB[dd][ce][df]AW[ed][de][fe][ef]\n;B[ee])"
    )
    # A refused position leaves the game as it was.
    before = np.asarray(engine.state.board).copy()
    assert ask(server, "set_position b A1 w A2 w B1") != "="
    np.testing.assert_array_equal(np.asarray(engine.state.board), before)
    assert len(engine.moves) == 1
    assert ask(server, "set_position") == "=" and not np.asarray(engine.state.board).any()


def test_printsgf_and_loadsgf_round_trip(tmp_path):
    server = make_server()
    engine = server.engine
    moves = "fixed_handicap 2\nplay w E5\nplay b D4\nplay w pass\nplay b F6\n"
    run(server, moves)
    path = tmp_path / "game.sgf"
    assert ask(server, f"printsgf {path}") == "="
    text = ask(server, "printsgf")[2:]
    assert path.read_text() == text + "\n"
    board, komi = np.asarray(engine.state.board), float(engine.state.komi)
    record = sgf.load(path)
    assert record.handicap == 2 and len(record.moves) == 4

    assert run(server, "boardsize 5\nkomi 0.5\nkata-set-rules aga\n") == ["="] * 3
    assert ask(server, f"loadsgf {path}") == "="
    np.testing.assert_array_equal(np.asarray(engine.state.board), board)
    assert float(engine.state.komi) == komi and engine.rules == "chinese"
    assert ask(server, "printsgf")[2:] == text
    assert ask(server, "undo") == "="  # the loaded moves can be taken back
    assert engine.to_play == 1 and len(engine.moves) == 3

    # "loadsgf FILE 3": the position before move 3 (two moves played).
    assert ask(server, f"loadsgf {path} 3") == "="
    assert [m.action for m in engine.moves] == [40, 48]
    assert ask(server, f"loadsgf {path} 1") == "="
    assert engine.moves == [] and engine.to_play == -1


def test_loadsgf_rejects_bad_files(tmp_path):
    server = make_server()
    bad = tmp_path / "bad.sgf"
    bad.write_text("(;SZ[9];B[ee];W[ee])")
    assert ask(server, f"loadsgf {bad}").startswith("? cannot load file")
    bad.write_text("not an sgf")
    assert ask(server, f"loadsgf {bad}").startswith("? cannot load file")
    assert ask(server, f"loadsgf {tmp_path}") == "? cannot load file"


def test_loadsgf_refuses_setup_stones_without_liberties(tmp_path):
    """The SGF setup goes through the check set_position uses (gojax.place_stones)."""
    server = make_server()
    run(server, "play b E5\n")
    bad = tmp_path / "setup.sgf"
    bad.write_text("(;GM[1]FF[4]SZ[9]AB[ab][ba]AW[aa];B[ee])")  # White A9: no liberty
    assert ask(server, f"loadsgf {bad}") == (
        "? cannot load file: illegal setup stones: the white chain at A9 has no liberty"
    )
    assert [m.action for m in server.engine.moves] == [gojax.gtp_to_action("E5", 9)]


def test_printsgf_of_a_game_resumed_after_two_passes_replays_everywhere(tmp_path):
    """printsgf's record of a game that went on after two passes: loadsgf and
    gojax show (gojax._game.state_at) both replay it to the engine's position."""
    from gojax import _game

    server = make_server()
    run(server, "play b E5\nplay w C3\nplay b pass\nplay w pass\nplay b F5\n")
    text = ask(server, "printsgf")[2:]
    assert text.endswith(";B[];W[];B[fe])")
    board = np.asarray(server.engine.state.board)
    np.testing.assert_array_equal(np.asarray(_game.state_at(sgf.parse(text)).board), board)
    path = tmp_path / "resumed.sgf"
    path.write_text(text)
    assert run(server, f"clear_board\nloadsgf {path}\n") == ["=", "="]
    np.testing.assert_array_equal(np.asarray(server.engine.state.board), board)


def test_gojax_policy_labels_every_move_from_half_a_percent():
    """Every move at 0.5% or more gets its label, not only the player's listed few
    (the uniform player lists 10 moves; each of 82 legal moves has 1.2%)."""
    server = make_server()
    labels = [x for row in _gogui_board(ask(server, "gojax-policy"), 9) for x in row]
    assert labels == ["1"] * 81
    run(server, "play b E5\n")
    labels = [x for row in _gogui_board(ask(server, "gojax-policy"), 9) for x in row]
    assert labels.count("1") == 80 and labels[gojax.gtp_to_action("E5", 9)] == '""'


def _random_game(size: int, moves: int, seed: int) -> list[tuple[str, int]]:
    """``moves`` legal moves (captures among them) of a random chinese game: a pass where
    no point is legal, and play goes on after two passes, as in the GTP engine."""
    rng = np.random.default_rng(seed)
    state = gojax.new_game(size, rules="chinese", max_moves=4 * size * size)
    played = []
    for number in range(moves):
        points = np.flatnonzero(np.asarray(gojax.legal_moves(state))[:-1])
        action = int(rng.choice(points)) if points.size else size * size
        played.append(("B" if number % 2 == 0 else "W", action))
        state = gojax.play(state, action)
        if bool(state.terminated):
            state = state.replace(terminated=np.bool_(False), passes=np.int8(0))
    return played


def _same_state(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def test_loadsgf_replays_a_long_game_as_play_does_and_faster(tmp_path):
    moves = _random_game(9, 200, seed=3)
    path = tmp_path / "long.sgf"
    sgf.save(sgf.GameRecord(size=9, komi=7.0, rules="chinese", nodes=[
        sgf.Node(color=c, action=a) for c, a in moves
    ]), path)  # fmt: skip
    loaded = make_server()
    assert ask(loaded, f"loadsgf {path}") == "="  # compiles the replay
    played = make_server()
    start = time.perf_counter()
    run(played, "".join(f"play {c} {gojax.action_to_gtp(a, 9)}\n" for c, a in moves))
    one_by_one = time.perf_counter() - start
    start = time.perf_counter()
    assert ask(loaded, f"loadsgf {path}") == "="
    at_once = time.perf_counter() - start
    assert sum(loaded.engine.state.captures.tolist()) > 0  # captures were replayed
    assert _same_state(loaded.engine.state, played.engine.state)
    assert loaded.engine.moves == played.engine.moves
    for _ in range(3):  # the history undo goes back through is the same
        assert ask(loaded, "undo") == ask(played, "undo") == "="
        assert _same_state(loaded.engine.state, played.engine.state)
    assert ask(loaded, "play b pass") == "="  # the game goes on from the loaded position
    # About ten times faster (0.05 ms a move against 0.5); a third leaves room for noise.
    assert at_once < one_by_one / 3, (at_once, one_by_one)


def test_loadsgf_refuses_a_game_longer_than_its_superko_history(tmp_path):
    """4 x 9 x 9 = 324 moves fit the engine's superko history; one more would restart
    it (prisoners and earlier positions forgotten), so loadsgf refuses the game."""
    server = make_server()
    path = tmp_path / "passes.sgf"
    nodes = "".join(";B[]" if i % 2 == 0 else ";W[]" for i in range(325))
    path.write_text(f"(;GM[1]FF[4]SZ[9]{nodes})")
    assert ask(server, f"loadsgf {path}") == (
        "? cannot load file: 325 moves, more than the 324 (4 x 9 x 9) whose superko "
        "history the engine keeps"
    )
    assert server.engine.moves == []
    assert ask(server, f"loadsgf {path} 325") == "="  # the 324 moves before move 325
    assert len(server.engine.moves) == 324 and int(server.engine.state.move_number) == 324


def test_play_past_the_move_cap_keeps_the_prisoners():
    server = make_server(size=5)  # a cap of 4 x 5 x 5 = 100 moves
    assert run(server, "set_position b A1 w A2\nplay w B1\n") == ["=", "="]  # takes A1
    assert server.engine.state.captures.tolist() == [0, 1]
    run(server, "".join(f"play {'bw'[i % 2]} pass\n" for i in range(99)))
    state = server.engine.state
    assert int(state.move_number) == 100 and bool(state.terminated)
    assert ask(server, "play w C3") == "="  # past the cap: the history starts again
    assert int(server.engine.state.move_number) == 1
    assert server.engine.state.captures.tolist() == [0, 1]


def test_rules_commands_replay_the_game_under_the_new_preset():
    server = make_server()
    run(server, "play b E5\nplay w C3\n")
    assert ask(server, "kata-set-rules tromp-taylor") == "="
    assert server.engine.state.rules.name == "tromp-taylor" and len(server.engine.moves) == 2
    assert (
        ask(server, "kata-get-rules") == '= {"hasButton":false,"ko":"POSITIONAL","scoring":"AREA",'
        '"suicide":true,"tax":"NONE","whiteHandicapBonus":"0"}'
    )
    assert ask(server, 'kata-set-rules {"ko":"SITUATIONAL","suicide":false}') == "="
    assert server.engine.rules == "aga"
    assert ask(server, "kgs-rules new_zealand") == "=" and server.engine.rules == "new-zealand"
    assert rules_from_json({"ko": "simple", "suicide": False}) == "chinese"
    with pytest.raises(ValueError):
        rules_from_json({"scoring": "TERRITORY"})


def test_kata_set_rule_changes_one_field_and_keeps_a_preset():
    server = make_server()  # chinese
    run(server, "play b E5\nplay w C3\n")
    assert ask(server, "kata-set-rule ko POSITIONAL") == "="
    assert server.engine.rules == "chinese-ogs" and len(server.engine.moves) == 2
    # AGA's ko with chinese-ogs's handicap bonus (N, not N-1) is no preset.
    assert ask(server, "kata-set-rule ko situational") == "? rules not supported"
    assert server.engine.rules == "chinese-ogs"  # a refused change changes nothing
    assert ask(server, "kgs-rules new_zealand") == "="
    assert ask(server, "kata-set-rule ko positional") == "="
    assert server.engine.rules == "tromp-taylor" and len(server.engine.moves) == 2
    assert ask(server, "kata-set-rules japanese") == "="
    assert ask(server, "kata-set-rule scoring AREA") == "? rules not supported"
    assert ask(server, "kata-set-rule hasButton false") == "=" and server.engine.rules == "japanese"


def test_cputime_adds_up_the_genmove_time():
    server = make_server()
    assert ask(server, "cputime") == "= 0.000"
    ask(server, "genmove b")
    spent = server.engine.genmove_seconds
    assert spent > 0 and ask(server, "cputime") == f"= {spent:.3f}"
    ask(server, "play w pass")  # the opponent's moves cost nothing
    assert server.engine.genmove_seconds == spent


def _raw_nn_blocks(reply: str) -> list[dict]:
    """``kata-raw-nn``'s reply parsed as any tool would: keys, then their numbers."""
    assert reply.startswith("= ")
    blocks, key = [], None
    for token in reply[2:].split():
        if token == "symmetry":
            blocks.append({})
            key = token
        elif not token[0].isdigit() and token[0] != "-" and token != "NAN":
            key = token
            blocks[-1][key] = []
        elif key == "symmetry":
            blocks[-1]["symmetry"] = int(token)
        else:
            blocks[-1][key].append(float(token))
    return blocks


def test_kata_raw_nn_gives_katagos_own_numbers():
    """``kata-raw-nn 0`` after the moves over GTP equals what KataGo's ``kata-raw-nn 0``
    printed for the reference positions: rules, features, net and format together."""
    import json

    records = [json.loads(line) for line in open(reference_path("katago", "positions.jsonl"))]
    engine = net_engine()
    server = GTPServer(engine, io.StringIO(), version="test")
    try:
        for record in (records[i] for i in (24, 33, 15)):  # 9x9 W, 9x9 after a pass, 13x13 W
            setup = (
                f"boardsize {record['size']}\nkomi {record['komi']}\n"
                f"kata-set-rules {record['rules']}\nclear_board\n"
            )
            moves = "".join(f"play {colour} {vertex}\n" for colour, vertex in record["moves"])
            assert set(run(server, setup + moves)) == {"="}
            (ours,) = _raw_nn_blocks(ask(server, "kata-raw-nn 0"))
            theirs = record["katago"]
            assert ours["symmetry"] == theirs["symmetry"] == 0
            for key in ("whiteWin", "whiteLoss", "noResult"):
                assert ours[key] == [pytest.approx(theirs[key], abs=2e-5)], key
            for key in ("whiteLead", "whiteScoreSelfplay", "varTimeLeft"):
                assert ours[key] == [pytest.approx(theirs[key], abs=3e-3)], key
            assert ours["whiteScoreSelfplaySq"] == [
                pytest.approx(theirs["whiteScoreSelfplaySq"], rel=1e-4)
            ]
            # NAN exactly where KataGo has null (illegal), the rest equal.
            assert [math.isnan(p) for p in ours["policy"]] == [p is None for p in theirs["policy"]]
            ours_policy = [p for p in ours["policy"] if not math.isnan(p)]
            expected = [p for p in theirs["policy"] if p is not None]
            assert ours_policy == pytest.approx(expected, abs=1e-5)
            assert ours["policyPass"] == [pytest.approx(theirs["policyPass"], abs=1e-5)]
            assert ours["whiteOwnership"] == pytest.approx(theirs["whiteOwnership"], abs=1e-4)
    finally:
        run(server, "boardsize 9\nkomi 7\nkata-set-rules chinese\nclear_board\n")


def test_kata_raw_nn_all_reports_the_eight_symmetries_in_one_reply():
    server = fresh_net_server()
    run(server, "play b E5\nplay w C3\nplay b G7\n")
    replies = run(server, "kata-raw-nn all\nkata-raw-nn 5\n")
    assert len(replies) == 2  # no blank line inside the reply
    blocks = _raw_nn_blocks(replies[0])
    assert [b["symmetry"] for b in blocks] == list(range(8))
    (alone,) = _raw_nn_blocks(replies[1])
    assert alone.keys() == blocks[5].keys() and alone["symmetry"] == 5
    for key in alone:  # the same evaluation, batched with the others or alone
        assert alone[key] == pytest.approx(blocks[5][key], abs=1e-5, nan_ok=True), key
    for block in blocks:
        policy = block["policy"]
        assert sum(math.isnan(p) for p in policy) == 3 and len(block["whiteOwnership"]) == 81
        total = sum(p for p in policy if not math.isnan(p)) + block["policyPass"][0]
        assert total == pytest.approx(1.0, abs=1e-4)
        # Each symmetry is a separate evaluation: close to the others, not equal.
        assert block["whiteWin"][0] == pytest.approx(blocks[0]["whiteWin"][0], abs=0.1)
    assert len({b["whiteWin"][0] for b in blocks}) > 1


def _gogui_board(reply: str, size: int) -> list[list[str]]:
    """A GoGui board reply read as GoGui reads it: non-empty lines, top row first."""
    assert reply.startswith("=")
    rows = [line.split() for line in reply[1:].split("\n") if line.strip()]
    assert len(rows) == size and all(len(row) == size for row in rows)
    return rows


def test_gogui_analyze_commands_show_ownership_policy_and_the_line():
    server = fresh_net_server()
    listed = ask(server, "gogui-analyze_commands")[2:].split("\n")
    for entry in listed:  # type/label/command, every command one the engine knows
        kind, label, command = entry.split("/")
        assert kind in {"dboard", "sboard", "gfx", "plist", "hstring"} and label
        assert ask(server, f"known_command {command.split()[0]}") == "= true"
    run(server, "play b E5\nplay w C3\n")
    ownership = _gogui_board(ask(server, "gojax-ownership"), 9)
    values = [[float(x) for x in row] for row in ownership]
    assert all(-1 <= x <= 1 for row in values for x in row)
    assert values[4][4] > 0.5 and values[6][2] < -0.5  # Black's E5 positive, White's C3 not
    policy = _gogui_board(ask(server, "gojax-policy"), 9)
    labels = {
        (r, c): int(x) for r, row in enumerate(policy) for c, x in enumerate(row) if x != '""'
    }
    assert labels and all(0 < p <= 100 for p in labels.values()) and sum(labels.values()) <= 101
    assert (4, 4) not in labels and (6, 2) not in labels  # occupied points get no label
    gfx = ask(server, "gojax-pv_gfx")[2:].split("\n")
    assert re.fullmatch(r"VAR b [A-HJ][1-9]( w [A-HJ][1-9]| w PASS)?.*", gfx[0])
    assert gfx[-1].startswith("TEXT Black to play: win rate ")
    assert ask(make_server(), "gojax-ownership") == "? this player has no ownership"


def test_resignation_after_consecutive_low_winrates():
    server = make_server(resign_threshold=0.6, resign_consecutive=2)  # uniform: win rate 0.5
    assert re.fullmatch(r"= [A-HJ][1-9]", ask(server, "genmove b"))
    assert ask(server, "play w E5") == "="
    assert ask(server, "genmove b") == "= resign"
    assert make_server().engine.resign_threshold is None  # off by default


def test_winning_pass_after_the_opponent_passes():
    server = make_server(komi=0.5)
    run(server, "play b E5\nplay w pass\n")
    assert ask(server, "genmove b") == "= pass"  # Black owns the board already


# ----------------------------------------------------------------------------
# Analysis


def _after_info(server, lines, lines_at_least: int = 1):
    """The first line, then the others once the reply shows ``lines_at_least`` info
    lines (a loaded machine may take a while to make the first analysis)."""
    yield lines[0]
    start = time.monotonic()
    while server.out.getvalue().count("\ninfo ") < lines_at_least:
        assert time.monotonic() - start < 120, server.out.getvalue()
        time.sleep(0.02)
    yield from lines[1:]


def test_kata_analyze_streams_until_the_next_command():
    server = make_server()
    out = server.out
    server.serve(_after_info(server, ["1 kata-analyze 5 ownership true\n", "2 name\n"], 2))
    text = out.getvalue()
    first, second, rest = text.split("\n\n")
    lines = first.split("\n")
    assert lines[0] == "=1" and len(lines) >= 3
    for line in lines[1:]:
        assert line.startswith("info move ")
        ownership = line.split(" ownership ")[1].split()
        assert len(ownership) == 81
        assert re.search(r"winrate 0\.5 .* prior 0\.0\d+ lcb [0-9.]+ .*order 0 pv \S+", line)
    assert second == "=2 gojax" and rest == ""
    time.sleep(0.2)  # the stream stopped for good
    assert out.getvalue() == text


def test_lz_analyze_format_and_blank_line_stops_it():
    server = make_server()
    server.serve(_after_info(server, ["lz-analyze b 5\n", "\n", "name\n"]))
    first, second, _ = server.out.getvalue().split("\n\n")
    lines = first.split("\n")
    assert lines[0] == "=" and len(lines) >= 2
    entry = re.compile(
        r"info move \S+ visits \d+ winrate \d+ prior \d+ lcb \d+ order \d+ pv( \S+)+"
    )
    for line in lines[1:]:
        for part in re.split(r" (?=info )", line):
            assert entry.fullmatch(part), part
    assert second == "= gojax"


def test_analyze_arguments():
    server = make_server()
    assert ask(server, "kata-analyze b 10 frobnicate 3") == "? syntax error"
    assert ask(server, "kata-analyze ownership maybe") == "? syntax error"
    assert ask(server, "lz-analyze 10 interval") == "? syntax error"
    reply = run(server, "kata-analyze w interval 0 maxmoves 3 minmoves 1 rootInfo true\n")
    assert reply == ["="]
    for bad in (
        "avoid b q99 1",
        "avoid x e5 1",
        "avoid b e5 0",
        "avoid b e5",
        "allow b e5 1 avoid w c3 1",
        "avoid b e5 1 allow w c3 1",
        "allow b e5 1 allow w c3 1",
    ):
        assert ask(server, f"kata-analyze b 10 {bad}") == "? syntax error", bad
    reply = run(server, "lz-analyze b 0 avoid b e5,c3 1 avoid w pass 2\n")
    assert reply == ["="]


def listed(reply_line: str) -> list[str]:
    """The moves of one analysis line, in order."""
    return re.findall(r"info move (\S+)", reply_line)


def test_genmove_analyze_obeys_allow_and_avoid():
    server = make_server()
    for _ in range(4):
        reply = ask(server, "lz-genmove_analyze b 1 allow b c3,d4 1").split("\n")
        assert reply[-1] in ("play C3", "play D4") and set(listed(reply[1])) <= {"C3", "D4"}
        run(server, "clear_board\n")
    # Restrictions on the other player leave the mover alone.
    reply = ask(server, "lz-genmove_analyze b 1 allow w c3 1").split("\n")
    assert len(listed(reply[1])) > 2


def test_genmove_analyze_streams_then_plays():
    server = make_server()
    reply = ask(server, "3 lz-genmove_analyze b 1")
    lines = reply.split("\n")
    assert lines[0] == "=3" and lines[1].startswith("info move ")
    assert re.fullmatch(r"play [A-HJ][1-9]", lines[-1])
    assert len(server.engine.moves) == 1
    reply = ask(server, "kata-genmove_analyze 50 ownership true rootInfo true")
    assert " ownership " in reply.split("\n")[1] and reply.split("\n")[-1].startswith("play ")
    # No network, so no short-term error heads: rootInfo ends at its weight.
    assert re.search(r" rootInfo visits 1 .* weight 1 ownership ", reply.split("\n")[1])
    assert "rawStWrError" not in reply


# KataGo's kata-analyze fields holding C++ doubles (printed with a decimal point by
# ``analyze``) and those holding integers.
KATA_FLOAT_FIELDS = (
    "utility winrate scoreMean scoreStdev scoreLead scoreSelfplay prior lcb utilityLcb weight"
).split()
KATA_INT_FIELDS = ("visits", "edgeVisits", "order")


def kata_fields(info: str) -> dict[str, str]:
    """The single-valued fields of one ``info move`` part of a kata-analyze line."""
    tokens = info.split(" pv ")[0].split()[1:]  # after "info"
    return dict(zip(tokens[::2], tokens[1::2], strict=True))


def test_sabaki_analyze_is_kata_analyze_with_every_number_pointed():
    """KataGo's ``analyze``/``genmove_analyze`` (what Sabaki sends): kata-analyze's
    fields, the doubles printed with C++'s showpoint; of the keys only interval, minmoves,
    maxmoves, avoid and allow."""
    server = make_server()
    reply = ask(server, "genmove_analyze b 1 maxmoves 4").split("\n")
    assert reply[0] == "=" and re.fullmatch(r"play [A-HJ][1-9]", reply[-1])
    infos = re.split(r" (?=info )", reply[1])
    assert 1 <= len(infos) <= 4
    for info in infos:
        fields = kata_fields(info)
        assert list(fields)[:2] == ["move", "visits"] and set(KATA_FLOAT_FIELDS) <= set(fields)
        for key in KATA_FLOAT_FIELDS:  # 6 significant digits, trailing zeros kept
            assert re.fullmatch(r"-?(\d\.\d{5}(e[+-]\d+)?|\d+\.\d*)", fields[key]), (key, info)
            assert len(fields[key].lstrip("-").replace(".", "").split("e")[0].lstrip("0")) <= 6
        for key in KATA_INT_FIELDS:
            assert re.fullmatch(r"\d+", fields[key]), (key, info)
        assert float(fields["weight"]) == int(fields["visits"])
    # kata-analyze's own switches are not analyze's (KataGo: a parse failure).
    for switch in ("ownership true", "rootInfo true", "pvVisits true", "movesOwnership true"):
        assert ask(server, f"analyze b 10 {switch}") == "? syntax error", switch
    assert run(server, "analyze w 0 maxmoves 3 minmoves 1 avoid b e5 1\n") == ["="]


def test_pointed_numbers_are_cpp_showpoint():
    from eval.gtp import _fmt, _fmt_point

    cases = {0.5: "0.500000", 12.0: "12.0000", 0.0: "0.00000", -0.25: "-0.250000",
             1e-5: "1.00000e-05", 123456789.0: "1.23457e+08", 0.1234567: "0.123457"}  # fmt: skip
    for value, pointed in cases.items():
        assert _fmt_point(value) == pointed
        if "e" not in pointed:  # kata-analyze's: the same digits, trailing zeros dropped
            assert _fmt(value) == pointed.rstrip("0").rstrip(".")
    assert _fmt(1e-5) == "1e-05" and _fmt(123456789.0) == "1.23457e+08"
    assert _fmt_point(math.nan) == "0.00000"


# ----------------------------------------------------------------------------
# Time control


clock_values = st.floats(0.0, 5000.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["none", "absolute", "canadian", "byoyomi", "fischer"]),
    main=clock_values,
    period=st.floats(0.0, 600.0),
    stones=st.integers(1, 30),
    told=clock_values,
    told_stones=st.integers(0, 30),
    move_number=st.integers(0, 800),
    size=st.integers(2, 19),
    lag=st.floats(0.0, 3.0),
)
def test_time_allocation_never_exceeds_the_time_left(
    kind, main, period, stones, told, told_stones, move_number, size, lag
):
    settings_ = TimeSettings(
        kind, main, period, period_stones=stones, periods=stones, increment=period,
        max_per_move=float(stones),
    )  # fmt: skip
    clock = Clock.start(settings_)
    clock.told(settings_, told, told_stones)
    moves_left = expected_moves_left(size, move_number)
    seconds = allocate_time(settings_, clock, moves_left=moves_left, lag=lag)
    if kind == "none":
        assert seconds is None
        return
    assert seconds is not None and seconds >= 0
    if kind == "fischer":
        # The increment comes only after the move, and no move may take longer than the cap.
        assert seconds <= max(0.0, min(clock.main_left, stones) - lag)
        assert seconds <= clock.main_left / moves_left + period
    elif clock.in_overtime:
        # Canadian: the block's time; byo-yomi: one period (never count on losing one).
        assert seconds <= max(0.0, clock.period_left - lag)
    else:
        # Main time, plus at most the first overtime stone's share of a period.
        extra = 0.0 if kind == "absolute" else period / (stones if kind == "canadian" else 1)
        assert seconds <= max(0.0, clock.main_left + extra - lag)
        assert seconds <= max(clock.main_left / moves_left + extra, 0.0)


def test_time_allocation_examples():
    absolute = TimeSettings.from_gtp(300, 0, 0)
    assert absolute.kind == "absolute"
    assert TimeSettings.from_gtp(300, 30, 0).kind == "none"
    assert TimeSettings.from_gtp(300, 30, 5).kind == "canadian"
    clock = Clock.start(absolute)
    assert allocate_time(absolute, clock, moves_left=30, lag=1) == pytest.approx(10.0)
    clock.told(absolute, 1.5, 0)
    assert allocate_time(absolute, clock, moves_left=30, lag=1) == pytest.approx(0.05)
    clock.told(absolute, 0.5, 0)
    assert allocate_time(absolute, clock, moves_left=30, lag=1) == 0.0
    byoyomi = TimeSettings("byoyomi", 0, 30, periods=3)
    clock = Clock.start(byoyomi)
    assert clock.in_overtime and allocate_time(byoyomi, clock, moves_left=30, lag=1) == 26.0
    clock.spend(byoyomi, 10)  # within the period: it comes back whole
    assert clock.period_left == 30 and clock.periods_left == 3
    clock.spend(byoyomi, 40)
    assert clock.periods_left == 2
    canadian = TimeSettings("canadian", 10, 60, period_stones=10)
    clock = Clock.start(canadian)
    clock.spend(canadian, 15)  # main time runs out within the move: 5 s of the block used
    assert clock.in_overtime and clock.period_left == 55 and clock.stones_left == 9
    fischer = TimeSettings("fischer", 60, increment=10, main_limit=65)
    clock = Clock.start(fischer)
    # 60 s over 30 moves, and the 10 s increment the move gives back.
    assert allocate_time(fischer, clock, moves_left=30, lag=1) == pytest.approx(12.0)
    clock.spend(fischer, 2)  # 58 + 10, cut to the 65 s cap
    assert clock.main_left == 65
    clock.spend(fischer, 70)  # overspent: the clock cannot go below the increment
    assert clock.main_left == 10
    capped = TimeSettings("fischer", 600, increment=5, max_per_move=20)
    assert allocate_time(capped, Clock.start(capped), moves_left=2, lag=1) == pytest.approx(17.0)


def test_kata_time_settings_fischer_reaches_the_clocks():
    server = make_server()
    engine = server.engine
    assert ask(server, "kata-time_settings fischer-capped 600 10 -1 20") == "="
    assert engine.time_settings == TimeSettings(
        "fischer", 600, increment=10, main_limit=math.inf, max_per_move=20
    )
    assert engine.time_for_move(1) == pytest.approx(20 * 0.9 - engine.lag)  # the per-move cap
    assert ask(server, "time_left b 3 0") == "="
    assert engine.time_for_move(1) == pytest.approx(3 * 0.9 - engine.lag)  # the clock
    assert re.fullmatch(r"= [A-HJ][1-9]", ask(server, "genmove b"))
    assert engine.clocks[1].main_left > 10  # the increment, after the move


def test_genmove_with_no_time_left_still_answers_in_time():
    server = make_server()
    run(server, "time_settings 10 0 0\ntime_left b 0.2 0\n")
    assert server.engine.time_for_move(1) == 0.0
    start = time.monotonic()
    assert re.fullmatch(r"= [A-HJ][1-9]", ask(server, "genmove b"))
    assert time.monotonic() - start < 2.0


# ----------------------------------------------------------------------------
# Fuzzing: every line gets one well-formed reply, nothing hangs


WORDS = [
    "b", "w", "black", "white", "B", "x", "D4", "E5", "pass", "PASS", "A1", "J9", "Z9", "I5",
    "D44", "0", "1", "2", "3", "5", "9", "-1", "20", "100", "3.5", "-7", "1e309", "nan", "inf",
    "true", "false", "ownership", "interval", "maxmoves", "chinese", "tromp-taylor", "japanese",
    "absolute", "byoyomi", "canadian", "none", "alive", "dead", "seki", '{"ko":"SIMPLE"}',
    "{", "#", "\t", "\r", "=", "?", "no-such-file.sgf",
]  # fmt: skip


def _command_names() -> list[str]:
    return sorted(set(make_server().commands) - {"quit"}) + ["frobnicate"]


printable = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\n"),
    max_size=40,
)
command_lines = st.builds(
    lambda ident, name, args: " ".join(([ident] if ident else []) + [name] + args),
    st.sampled_from(["", "1", "42", "007"]),
    st.sampled_from(_command_names()),
    st.lists(st.sampled_from(WORDS), max_size=4),
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(st.one_of(command_lines, printable), min_size=1, max_size=8))
def test_fuzz_every_line_gets_one_well_formed_reply(lines):
    server = make_server()
    text = "".join(line + "\n" for line in lines)
    errors = []
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # printsgf FILE writes where it is told
        try:
            worker = threading.Thread(
                target=lambda: _serve_catching(server, text, errors), daemon=True
            )
            worker.start()
            worker.join(timeout=60)
        finally:
            os.chdir(cwd)
    assert not worker.is_alive(), f"hung on {lines!r}"
    assert not errors, errors
    output = server.out.getvalue()
    expected = 0
    for line in text.split("\n"):
        stripped = preprocess(line)
        if stripped:
            expected += 1
            if stripped.split()[0 if not stripped.split()[0].isdigit() else -1] == "quit":
                break
    assert output.endswith("\n\n") or expected == 0
    replies = output[:-2].split("\n\n") if output else []
    assert len(replies) == expected, (lines, output)
    for reply in replies:
        assert REPLY.match(reply), (lines, reply)


def _serve_catching(server, text, errors):
    try:
        server.serve(io.StringIO(text))
    except BaseException as err:  # the server must never raise
        errors.append(repr(err))


# ----------------------------------------------------------------------------
# With the KataGo network


def test_network_genmove_and_analysis():
    server = fresh_net_server()
    assert ask(server, "genmove b") == "= E5"  # the reference net's favourite 9x9 opening
    reply = ask(server, "kata-genmove_analyze w 1 ownership true")
    info, play = reply.split("\n")[1:]
    assert play.startswith("play ")
    entries = re.split(r" (?=info |ownership )", info)
    ownership = [float(x) for x in entries[-1].split()[1:]]
    assert len(ownership) == 81 and all(-1 <= x <= 1 for x in ownership)
    priors = [float(re.search(r" prior (\S+)", e).group(1)) for e in entries[:-1]]
    assert priors == sorted(priors, reverse=True) and 0.2 < sum(priors) <= 1.0001
    assert entries[0].split()[2] == play.split()[1]
    winrate = float(re.search(r" winrate (\S+)", entries[0]).group(1))
    assert 0.0 < winrate < 1.0


def test_network_genmove_avoids_its_favourite():
    server = fresh_net_server()
    reply = ask(server, "lz-genmove_analyze b 1 avoid b e5 1").split("\n")
    assert reply[-1].startswith("play ") and reply[-1] != "play E5"
    assert "E5" not in listed(reply[1]) and listed(reply[1])[0] == reply[-1].split()[1]


def test_network_final_status_calls_a_lone_invader_dead():
    server = fresh_net_server()
    black = "C3 C4 C5 C6 C7 D3 D7 E3 E7 F3 F7 G3 G4 G5 G6 G7".split()
    moves = "".join(f"play b {v}\n" for v in black) + "play w E5\n"
    assert set(run(server, moves)) == {"="}
    assert ask(server, "final_status_list dead") == "= E5"
    alive = ask(server, "final_status_list alive")[2:].split()
    assert sorted(alive) == sorted(black)


def test_network_final_score_removes_the_dead_stones_final_status_names():
    server = fresh_net_server()
    black = "C3 C4 C5 C6 C7 D3 D7 E3 E7 F3 F7 G3 G4 G5 G6 G7".split()
    run(server, "".join(f"play b {v}\n" for v in black) + "play w E5\n")
    # On the board: Black's 16 stones and 56 outside points against E5, komi 7.
    # E5 dead: all 81 points are Black's.
    assert ask(server, "final_score") == "= B+74"
    # Territory: 65 points and E5 as a prisoner.
    assert run(server, "kata-set-rules japanese\nfinal_score\n") == ["=", "= B+59"]
    # Tromp-Taylor counts a game ended by two passes as it stands, before as anticipated.
    assert run(server, "kata-set-rules tromp-taylor\nfinal_score\n") == ["=", "= B+74"]
    assert run(server, "play b pass\nplay w pass\nfinal_score\n") == ["=", "=", "= B+64"]
    assert ask(server, "final_status_list dead") == "="
    assert run(server, "kata-set-rules chinese\nfinal_score\n") == ["=", "= B+74"]
    assert ask(server, "final_status_list dead") == "= E5"


def test_network_cleanup_captures_the_dead_invader_before_passing():
    """KGS's cleanup phase: where genmove passes (the count with E5 dead wins),
    kgs-genmove_cleanup fills E5's liberties until it is captured, then passes."""
    server = fresh_net_server()
    black = "C3 C4 C5 C6 C7 D3 D7 E3 E7 F3 F7 G3 G4 G5 G6 G7".split()
    run(server, "".join(f"play b {v}\n" for v in black) + "play w E5\nplay w pass\n")
    assert ask(server, "genmove b") == "= pass"
    run(server, "undo\n")
    played = []
    while len(played) < 6:
        move = ask(server, "kgs-genmove_cleanup b")[2:]
        played.append(move)
        if move == "pass":
            break
        assert ask(server, "play w pass") == "="
    # The four liberties of E5, the last one capturing it, then a pass.
    assert sorted(played[:4]) == ["D5", "E4", "E6", "F5"] and played[4:] == ["pass"]
    assert server.engine.state.captures.tolist() == [1, 0]
    assert not (np.asarray(server.engine.state.board) == -1).any()
    assert ask(server, "final_score") == "= B+74"


def test_network_cleanup_keeps_to_the_moves_left_to_it():
    server = fresh_net_server()
    black = "C3 C4 C5 C6 C7 D3 D7 E3 E7 F3 F7 G3 G4 G5 G6 G7 D5 E6".split()
    run(server, "".join(f"play b {v}\n" for v in black) + "play w E5\nplay w pass\n")
    # The search passes here (E5 is as good as captured); E4 kept out, F5 is what is left.
    avoid = np.zeros((2, 82), np.int32)
    avoid[0, gojax.gtp_to_action("E4", 9)] = 1
    action, analysis = server.engine.genmove(gojax.BLACK, avoid=avoid, cleanup=True)
    assert analysis.best.action == 81 and gojax.action_to_gtp(action, 9) == "F5"


def test_cleanup_never_resigns():
    engine = uniform_engine()
    engine.resign_threshold = 1.0  # every position would be a resignation
    engine.resign_consecutive = 1
    action, _ = engine.genmove(gojax.BLACK, cleanup=True)
    assert action != RESIGN and engine.moves[-1].action == action


def test_network_final_score_gives_katago_engines_winners_where_the_board_did_not():
    """The recorded chinese match that KataGo's own engine recounted (``gojax recount``):
    every game whose board count named another winner than KataGo's final_score."""
    from eval.match import read_match
    from eval.recount import read_recounts
    from gojax.sgf import result_winner

    folder = REPO / "results" / "katago_search" / "9x9-puct-v64-vs-katago-v64-t0"
    match = read_match(folder)
    assert (match.config.size, match.config.komi, match.config.rules) == (9, 7.0, "chinese")
    records = {game.game: game.sgf for game in match.games}
    changed = [
        r for r in read_recounts(folder) if result_winner(r.result) != result_winner(r.recount)
    ]
    assert len(changed) == 14
    server = fresh_net_server()
    for recount in changed:
        run(server, "clear_board\n")
        for colour, action in sgf.load(folder / records[recount.game]).moves:
            server.engine.play(1 if colour == "B" else -1, action)
        counted = ask(server, "final_score")[2:]
        assert result_winner(counted) == result_winner(recount.recount), recount


def test_dead_chains_follow_katago_thresholds():
    # One row: a black chain (0, 1), a black stone (3), a white chain (5, 6), a white stone (8).
    board = np.array([1, 1, 0, 1, 0, -1, -1, 0, -1])
    chain = np.array([0, 0, 9, 3, 9, 5, 5, 9, 8])

    def dead(ownership):
        return np.flatnonzero(dead_chains(board, chain, np.array(ownership, float))).tolist()

    assert dead([0.9, 0.9, 0, 0.9, 0, -0.9, -0.9, 0, -0.9]) == []
    # Mean for its own colour 0.2 is not above 0.2: dead, its whole chain.
    assert dead([0.3, 0.1, 0, 0.9, 0, -0.9, -0.9, 0, -0.21]) == [0, 1]
    # One stone at -0.6 or worse kills a chain whose mean is fine.
    assert dead([0.9, 0.9, 0, 0.9, 0, 0.6, -1.0, 0, -0.9]) == [5, 6]
    assert dead([0.9, 0.9, 0, -0.2, 0, -0.9, -0.9, 0, 0.9]) == [3, 8]
    assert not dead_chains(np.zeros(9, int), np.full(9, 9), np.zeros(9)).any()


def test_network_free_handicap_and_resign():
    server = fresh_net_server()
    assert ask(server, "place_free_handicap 2") == "= C3 G7"
    run(server, "clear_board\n")
    server.engine.resign_threshold = 0.99
    server.engine.resign_consecutive = 1
    assert ask(server, "genmove b") == "= resign"
    assert server.engine.moves == []


@pytest.mark.slow
def test_search_player_plays_and_reuses_its_tree():
    from eval.players import SearchPlayer
    from gojax.katago_model import load_model

    model = load_model(reference_path("katago", MODEL))
    player = SearchPlayer(model, visits=16)
    engine = Engine(player, size=9, komi=7.0, rules="chinese")
    server = GTPServer(engine, io.StringIO())
    command = "kata-genmove_analyze b 1 pvVisits true ownership true ownershipStdev true"
    info = ask(server, command).split("\n")[1]
    entries = re.split(r" (?=info |ownership |ownershipStdev )", info)
    assert entries[-2].startswith("ownership ") and len(entries[-2].split()) == 1 + 81
    spread = [float(x) for x in entries[-1].split()[1:]]
    assert entries[-1].startswith("ownershipStdev ") and len(spread) == 81
    assert min(spread) >= 0 and max(spread) > 0  # 16 evaluations disagree somewhere
    entries = entries[:-2]
    # The empty board is symmetric: the moves listed for a searched one are left out.
    assert any(" isSymmetryOf " in e for e in entries)
    entries = [e for e in entries if " isSymmetryOf " not in e]
    visits = [int(re.search(r" visits (\d+)", e).group(1)) for e in entries]
    assert sum(visits) == 16 and visits[0] == max(visits)
    pv = entries[0].split(" pv ")[1].split(" pvVisits ")[0].split()
    assert len(pv) >= 2
    for entry, n in zip(entries, visits, strict=True):  # KataGo's pvVisits: each edge's visits
        line = entry.split(" pv ")[1].split(" pvVisits ")
        along = [int(v) for v in line[1].split()]
        assert len(along) == len(line[0].split()) and along[0] == n
        assert along == sorted(along, reverse=True) and along[-1] >= 1
    first_tree = player._tree
    assert ask(server, f"play w {pv[1]}") == "="
    assert re.fullmatch(r"= [A-HJ][1-9]|= pass", ask(server, "genmove b"))
    assert player._tree is not first_tree
    # Moves kept out: the search goes to the allowed ones only, and its tree is not kept.
    reply = ask(server, "kata-genmove_analyze w 1 allow w c3,g7,pass 1").split("\n")
    assert set(listed(reply[1])) <= {"C3", "G7", "pass"} and reply[-1] != "play resign"
    visits = [int(v) for v in re.findall(r" visits (\d+)", reply[1])]
    assert sum(visits) == 16 and player._tree is None


def test_kata_search_chooses_a_move_and_leaves_it_to_the_controller():
    from eval.players import UCTPlayer

    engine = Engine(UCTPlayer(visits=8), size=5, komi=0.5, rules="chinese")
    server = GTPServer(engine, io.StringIO(), version="test")
    move = ask(server, "kata-search b")[2:]
    assert re.fullmatch(r"[A-E][1-5]|pass", move) and engine.moves == []
    assert engine.player._tree is not None  # kept for the controller's play
    assert ask(server, f"play b {move}") == "="
    # The next search goes on from the subtree below the played move.
    assert int(engine.player._start_tree(engine.state).node_visits[0, 0]) >= 1
    reply = ask(server, "kata-search_analyze w 1").split("\n")
    assert reply[0] == "=" and reply[1].startswith("info move ") and reply[-1].startswith("play ")
    assert len(engine.moves) == 1 and engine.to_play == -1  # still White's turn
    assert ask(server, "kata-search") == "? syntax error"


def test_kata_get_models_describes_the_network():
    assert ask(make_server(), "kata-get-models") == "= []"  # uniform moves: no network
    (info,) = json.loads(ask(fresh_net_server(), "kata-get-models")[2:])
    assert info == {"name": MODEL, "internalName": info["internalName"], "maxBatchSize": 1,
                    "usesHumanSLProfile": False, "version": 8, "usingFP16": "false"}  # fmt: skip
    assert info["internalName"]


def test_pondering_grows_one_search_and_genmove_plays_from_it():
    """``lz-analyze``/``kata-analyze`` ponder: the policy at once, then one search growing
    part by part to ``ponder_visits``, then that; a genmove after it starts from the
    pondered tree."""
    import argparse

    import jax

    from eval.gtp import make_engine
    from eval.players import PONDER_PARTS, UCTPlayer

    assert UCTPlayer(visits=4).ponder_visits == 256  # 16 moves' worth, at least 256
    assert UCTPlayer(visits=4, ponder_visits=2).ponder_visits == 5  # at least one move's
    flags = gtp_flags("--player", "uct", "--visits", "4", "--ponder-visits", "48", "--size", "5")
    engine = make_engine(argparse.Namespace(**flags | {"komi": 0.5, "rules": "chinese"}))
    player = engine.player
    assert player.ponder_visits == 48
    engine.play(gojax.BLACK, gojax.gtp_to_action("C3", 5))
    stream = engine.ponder()
    visits = [next(stream).visits for _ in range(PONDER_PARTS + 3)]
    assert visits[0] == 1  # the policy, before any search
    grown = visits[1 : visits.index(player.ponder_visits) + 1]
    assert len(grown) >= 3 and grown == sorted(set(grown))  # deeper and deeper
    assert visits[-3:] == [player.ponder_visits] * 3  # then as deep as it goes
    assert int(player._tree.node_visits[0, 0]) == player.ponder_visits
    analysis = player.analyze(engine.state, visits=4, key=jax.random.key(0))
    assert analysis.visits == player.ponder_visits  # no fewer visits than the pondered tree


def test_gumbel_candidates_are_a_quarter_of_the_visits():
    from eval.players import auto_considered

    visits = [1, 2, 7, 8, 16, 32, 64, 65, 800]
    assert [auto_considered(v) for v in visits] == [2, 2, 2, 2, 4, 8, 16, 16, 16]


@pytest.mark.slow
def test_gumbel_search_player_visits_distinct_moves_and_starts_fresh():
    import argparse

    from eval.gtp import make_engine

    argv = ["--model", str(reference_path("katago", MODEL)), "--player", "search"]
    argv += ["--visits", "4", "--search", "gumbel", "--gumbel-scale", "1", "--symmetry", "0"]
    argv += ["--size", "9", "--komi", "7", "--rules", "chinese"]
    assert gtp_flags(*argv)["gumbel_considered"] is None  # a quarter of the visits
    flags = gtp_flags(*argv, "--gumbel-considered", "16")
    engine = make_engine(argparse.Namespace(**flags))
    player = engine.player
    assert player.config.kind == "gumbel" and player.name.startswith("gumbel search(")
    server = GTPServer(engine, io.StringIO())
    for colour in "bwb":
        reply = ask(server, f"kata-genmove_analyze {colour} 1").split("\n")
        entries = re.split(r" (?=info )", reply[1])
        entries = [e for e in entries if " isSymmetryOf " not in e]  # the searched moves
        visits = [int(re.search(r" visits (\d+)", e).group(1)) for e in entries]
        # Sequential halving's first round: 4 visits go to 4 sampled moves, one each; the
        # move played is the best of them, not necessarily the prior's favourite.
        assert visits == [1, 1, 1, 1], reply
        assert reply[-1] == f"play {entries[0].split()[2]}"
        assert player._tree is None  # Gumbel never continues a tree
    with pytest.raises(ValueError, match="search must be one of"):
        type(player)(player.model, visits=4, search="uct")

    # Without noise the searched moves are the network's favourites: the same every time.
    flags["gumbel_scale"] = 0.0
    engine = make_engine(argparse.Namespace(**flags))
    server = GTPServer(engine, io.StringIO())
    replies = []
    for _ in range(2):
        run(server, "clear_board\nplay b E5\nplay w C4\nplay b G3\n")
        reply = ask(server, "kata-genmove_analyze w 1").split("\n")
        replies.append((sorted(listed(reply[1])), reply[-1]))
        run(server, "undo\n")
    assert replies[0] == replies[1]
    by_prior = engine.player.evaluate(engine.state).moves
    favourites = [gojax.action_to_gtp(m.action, 9) for m in by_prior[:4]]
    assert replies[0][0] == sorted(favourites), [(m.action, m.prior) for m in by_prior[:6]]

    # By default a quarter of the visits, at least two: 4 visits are two for each of the
    # two favourites, searched one ply deeper.
    flags["gumbel_considered"] = None
    engine = make_engine(argparse.Namespace(**flags))
    assert engine.player.config.max_num_considered_actions == 2
    server = GTPServer(engine, io.StringIO())
    run(server, "play b E5\nplay w C4\nplay b G3\n")
    reply = ask(server, "kata-genmove_analyze w 1").split("\n")
    assert sorted(listed(reply[1])) == sorted(favourites[:2])
    assert [int(v) for v in re.findall(r" visits (\d+)", reply[1])] == [2, 2]


# ----------------------------------------------------------------------------
# The command line, end to end


def test_gojax_gtp_subprocess_session():
    model = reference_path("katago", MODEL)
    session = "boardsize 9\nclear_board\ngenmove b\nplay w C3\ngenmove b\nfinal_score\nquit\n"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "eval.cli", "gtp", "--model", str(model), "--size", "9"],
        input=session,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    replies = done.stdout[:-2].split("\n\n")
    assert replies[:2] == ["=", "="]
    assert re.fullmatch(r"= [A-HJ][1-9]", replies[2]) and replies[3] == "="
    assert re.fullmatch(r"= [A-HJ][1-9]", replies[4])
    assert re.fullmatch(r"= (B\+|W\+)[0-9.]+|= 0", replies[5])
    assert replies[6] == "=" and len(replies) == 7
    assert "GTP ready" in done.stderr


def test_gojax_gtp_bad_model_exits_2(tmp_path):
    bad = tmp_path / "broken.bin.gz"
    bad.write_bytes(b"not gzip")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for model in (bad, tmp_path / "missing.bin.gz"):
        done = subprocess.run(
            [sys.executable, "-m", "eval.cli", "gtp", "--model", str(model)],
            input="",
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and "error" in done.stderr


@pytest.mark.slow
def test_search_with_alphagos_mixed_leaf_value():
    """With a komi of 100 every random game is lost by Black: lambda 1 values every leaf
    by rollouts alone (Black's win rate exactly 0), lambda 0 by the network alone (a random
    net, not sure of anything); the flag reaches the player from the command line."""
    import jax

    from eval.cli import build_parser
    from eval.players import SearchPlayer
    from eval.trained_model import TrainedModel
    from train import model as model_lib

    spec = model_lib.ModelSpec("alphago_tiny")
    variables = model_lib.init_variables(spec, jax.random.PRNGKey(0), size=5)
    model = TrainedModel("random", spec.preset, variables, "alphago", (5,), step=0)
    state = gojax.new_game(5, komi=100.0, rules="chinese")
    key = jax.random.PRNGKey(1)
    rates = {}
    for lam in (0.0, 1.0):
        player = SearchPlayer(model, visits=8, rollout_lambda=lam, rollouts=2)
        rates[lam] = player.analyze(state, visits=8, key=key).winrate
    assert rates[1.0] == 0.0 and 0.2 < rates[0.0] < 0.8
    assert "lambda 1 x 2 rollouts" in player.name
    with pytest.raises(ValueError, match="rollout_lambda must be in"):
        SearchPlayer(model, rollout_lambda=1.5)
    args = build_parser().parse_args(["gtp", "--model", "x", "--rollout-lambda", "0.5"])
    assert args.rollout_lambda == 0.5 and args.rollouts == 1
    # The rollouts played by a fast rollout policy: still every one lost by Black.
    from gojax import rollout_policy

    weights = rollout_policy.zero_weights()._replace(last=jax.numpy.arange(6.0))
    fast = SearchPlayer(model, visits=8, rollout_lambda=1.0, rollout_weights=weights)
    assert "of the fast policy" in fast.name
    assert fast.analyze(state, visits=8, key=key).winrate == 0.0
    with pytest.raises(ValueError, match="needs rollout_lambda > 0"):
        SearchPlayer(model, rollout_weights=weights)
