"""The analysis engine's replay cache: a resumed game is the replayed game, bit for bit.

``ReplayCache`` alone needs no network; the engine tests build engines on the
reference KataGo net but only replay (``_replay_chunk``), apart from one
session that compares whole replies.
"""

from __future__ import annotations

import functools
import io
import json

import jax
import numpy as np
import pytest
from reference import reference_path

from eval.analysis import AnalysisEngine
from eval.analysis_query import Query, parse_query
from eval.replay_cache import ReplayCache, moves_key
from gojax._coords import action_to_gtp
from gojax._random_play import play_random_games
from gojax.katago_model import load_model

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"

# ----------------------------------------------------------------------------
# The cache alone


def test_longest_kept_prefix_wins_and_respects_the_limit():
    cache = ReplayCache(8)
    moves = moves_key(np.array([1, -1, 1, -1]), np.array([3, 4, 5, 6]))
    other = moves_key(np.array([1, -1, 1]), np.array([3, 4, 7]))
    cache.put("g", moves[:4], "after 1")
    cache.put("g", moves[:12], "after 3")
    cache.put("g", other, "another game's 3")
    cache.put("h", moves, "another setup's 4")
    assert cache.longest("g", moves, most=4) == (3, "after 3")
    assert cache.longest("g", moves, most=2) == (1, "after 1")
    assert cache.longest("g", moves, most=0) == (0, None)
    assert cache.longest("g", other, most=3) == (3, "another game's 3")
    assert cache.longest("g", moves, most=99) == (3, "after 3")  # limited by the moves too
    assert cache.longest("nothing", moves, most=4) == (0, None)
    assert cache.hits == 4


def test_least_recently_used_states_go_first():
    cache = ReplayCache(2)
    key = moves_key(np.array([1, -1, 1]), np.array([0, 1, 2]))
    cache.put("g", key[:4], 1)
    cache.put("g", key[:8], 2)
    assert cache.longest("g", key, most=1) == (1, 1)  # used: now the newest
    cache.put("g", key, 3)  # drops the one after 2 moves
    assert len(cache) == 2
    assert cache.longest("g", key, most=2) == (1, 1)
    assert cache.longest("g", key, most=3) == (3, 3)
    cache.put("g", key, 4)  # the same key again: replaced, not added
    assert len(cache) == 2 and cache.longest("g", key, most=3) == (3, 4)
    cache.clear()
    assert len(cache) == 0 and cache.longest("g", key, most=3) == (0, None)


def test_a_cache_of_no_states_keeps_nothing():
    cache = ReplayCache(0)
    cache.put("g", b"", "state")
    assert len(cache) == 0 and cache.longest("g", b"", most=0) == (0, None)
    with pytest.raises(ValueError, match="capacity"):
        ReplayCache(-1)


def test_move_keys_are_prefixes_of_longer_games():
    colours, actions = np.array([1, -1, -1, 1]), np.array([80, 81, 0, 360])
    whole = moves_key(colours, actions)
    assert all(whole.startswith(moves_key(colours[:k], actions[:k])) for k in range(5))
    assert moves_key(colours[:2], np.array([80, 0])) != whole[:8]


# ----------------------------------------------------------------------------
# The engine: resumed games against replayed ones


@functools.cache
def model():
    return load_model(reference_path("katago", MODEL))


def engine(replay_cache: int) -> AnalysisEngine:
    return AnalysisEngine(model(), symmetry=0, visits=1, batch_size=4, replay_cache=replay_cache)


@functools.cache
def random_game() -> list[list[str]]:
    """A random 5x5 game to its two passes (captures, kos, superko bans), then a move that
    resumes it and a move by the player not to move (which forgets the history)."""
    result = play_random_games(5, 1, rules="tromp-taylor", max_moves=400, seed=7)
    actions = [int(a) for a in result.actions[0] if a >= 0]
    moves = [["BW"[i % 2], action_to_gtp(a, 5)] for i, a in enumerate(actions)]
    board = result.final_boards[0]
    assert moves[-2:] == [[moves[-2][0], "pass"], [moves[-1][0], "pass"]]
    assert len(actions) > 40 and (board == 0).sum() >= 2
    resume = "BW"[len(moves) % 2]
    moves.append([resume, "pass"])
    moves.append([resume, "pass"])  # out of turn
    return moves


def parsed(moves: list, turns: list[int] | None = None, ident: str = "q") -> Query:
    request = {"id": ident, "moves": moves, "rules": "tromp-taylor", "komi": 7.5}
    request |= {"boardXSize": 5, "boardYSize": 5}
    if turns is not None:
        request["analyzeTurns"] = turns
    query, _ = parse_query(request, visits=1, report_as="BLACK")
    return query


def replayed(eng: AnalysisEngine, queries: list[Query]) -> tuple[list, list]:
    """Per query its kept positions (numpy GoStates, by turn) or its error reply."""
    kept, failures, firsts = eng._replay_chunk(queries, 5, "tromp-taylor", queries[0].max_moves)
    kept = jax.device_get(kept)
    states = [
        [jax.tree.map(lambda x, i=first + k: x[i], kept) for k in range(len(q.turns))]
        for q, first in zip(queries, firsts, strict=True)
    ]
    return states, failures


def assert_same_states(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_game_analysed_move_by_move_resumes_the_last_replay():
    moves = random_game()
    cached, plain = engine(64), engine(0)
    for n in range(len(moves) + 1):
        query = parsed(moves[:n])
        (ours,), failures = replayed(cached, [query])
        (theirs,), expected = replayed(plain, [query])
        assert failures == expected == [None], n
        assert_same_states(ours, theirs)
    # Every query after the first resumes, but where the move cap grows with the game.
    caps = [parsed(moves[:n]).max_moves for n in range(len(moves) + 1)]
    assert (
        cached._replays.hits == sum(a == b for a, b in zip(caps[:-1], caps[1:], strict=True)) > 60
    )
    assert plain._replays.hits == 0 and len(plain._replays) == 0


def test_a_batch_mixes_resumed_and_new_games():
    moves = random_game()
    cached, plain = engine(64), engine(0)
    replayed(cached, [parsed(moves[:10]), parsed(moves[:30])])
    queries = [
        parsed(moves[:33], ident="extends 30"),
        parsed(moves[:20], turns=[5, 20], ident="turn 5 is before both"),
        parsed(moves[:12], turns=[11, 12], ident="extends 10"),
        parsed(moves[:3] + [["W", "pass"]], ident="another game"),
    ]
    hits = cached._replays.hits
    ours, failures = replayed(cached, queries)
    theirs, expected = replayed(plain, queries)
    assert cached._replays.hits == hits + 2
    assert failures == expected == [None] * 4
    for a, b in zip(ours, theirs, strict=True):
        assert_same_states(a, b)


def test_an_illegal_move_after_a_resumed_game_names_its_own_turn():
    moves = random_game()
    cached = engine(64)
    replayed(cached, [parsed(moves[:20])])
    state = replayed(cached, [parsed(moves[:20])])[0][0][0]
    occupied = action_to_gtp(int(np.flatnonzero(state.board)[0]), 5)
    colour = "BW"[int(state.to_play) == -1]
    query = parsed(moves[:20] + [[colour, occupied]])
    _, failures = replayed(cached, [query])
    assert failures == [{"error": f"Illegal move 20: {occupied}", "field": "moves", "id": "q"}]
    assert len(cached._replays) == 1  # the failed game is not kept


def session(eng: AnalysisEngine, lines: list[str]) -> list[dict]:
    stdout = io.StringIO()
    eng.serve(io.StringIO("".join(line + "\n" for line in lines)), stdout)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


def test_replies_are_the_same_with_and_without_the_cache_and_clear_cache_empties_it():
    moves = random_game()[:24]
    request = {"rules": "tromp-taylor", "komi": 7.5, "boardXSize": 5, "boardYSize": 5}
    lines = [
        json.dumps(request | {"id": f"m{n}", "moves": moves[:n], "includeOwnership": True})
        for n in range(18, 25)
    ]
    cached, plain = engine(64), engine(0)
    ours = [reply for line in lines for reply in session(cached, [line])]
    theirs = [reply for line in lines for reply in session(plain, [line])]
    assert ours == theirs and len(ours) == 7
    assert cached._replays.hits == 6 and len(cached._replays) == 7
    cleared = session(cached, [json.dumps({"id": "c", "action": "clear_cache"})])
    assert cleared == [{"id": "c", "action": "clear_cache"}] and len(cached._replays) == 0


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_replay_cache_size_is_a_usage_error(value, capsys):
    from eval.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["analysis", "--model", "net.bin.gz", "--replay-cache", value])
    assert stop.value.code == 2
    assert "--replay-cache: must be an integer >= 0" in capsys.readouterr().err
