"""KataGo's runtime parameters over GTP (``eval.gtp_params``): which are honoured for which
player, their values, and that setting them changes the search that plays."""

from __future__ import annotations

import argparse
import functools
import io
import json
import math
import re
import time

import pytest
from reference import reference_path
from test_gtp import MODEL, ask, gtp_flags, make_server

from eval import gtp_params
from eval.engine import KATAGO_RESIGN_WINRATE, Engine
from eval.gtp import GTPServer, make_engine
from eval.players import PONDER_PARTS, SearchPlayer, UCTPlayer


def uct_server(visits: int = 8) -> GTPServer:
    engine = Engine(UCTPlayer(visits=visits), size=5, komi=0.5, rules="chinese")
    return GTPServer(engine, io.StringIO(), version="test")


@functools.cache
def reference_model():
    from gojax.katago_model import load_model

    return load_model(reference_path("katago", MODEL))


def katago_server(visits: int = 8) -> GTPServer:
    player = SearchPlayer(reference_model(), visits=visits, search="katago", symmetry=0)
    engine = Engine(player, size=5, komi=0.5, rules="chinese")
    return GTPServer(engine, io.StringIO(), version="test")


def searched(reply: str) -> dict[str, int]:
    """The visits of each move searched in a ``kata-genmove_analyze`` reply's info line
    (not the moves listed as equivalent to one at a symmetric position)."""
    info = reply.split("\n")[1]
    return {
        m: int(v)
        for m, v, rest in re.findall(r"info move (\S+) visits (\d+)(.*?)(?= info |$)", info)
        if " isSymmetryOf " not in rest
    }


def test_the_parameters_a_player_honours():
    plain = make_server()  # uniform random moves: nothing to search
    assert ask(plain, "kata-list-params") == "= allowResignation delayMoveScale delayMoveMax"
    assert ask(plain, "kata-get-params") == (
        '= {"allowResignation":false,"delayMoveScale":0.0,"delayMoveMax":1000000.0}'
    )
    uct = uct_server()
    assert ask(uct, "kata-list-params").split()[1:] == [
        "allowResignation",
        "delayMoveScale",
        "delayMoveMax",
        "maxVisits",
        "maxTime",
        "maxVisitsPondering",
        "maxTimePondering",
        "useLcbForSelection",
        "chosenMoveTemperature",
        "chosenMoveTemperatureEarly",
        "ponderingEnabled",
        "rootSymmetryPruning",
    ]
    params = json.loads(ask(uct, "kata-get-params")[2:])
    assert params == {
        "allowResignation": False,
        "delayMoveScale": 0.0,  # KataGo's: no delay
        "delayMoveMax": 1e6,
        "maxVisits": 9,  # root visits: 8 simulations and the root's own
        "maxTime": 1e20,  # KataGo's "no limit"
        "maxVisitsPondering": 256,  # 16 moves' worth, at least 256
        "maxTimePondering": 1e20,
        "useLcbForSelection": False,
        "chosenMoveTemperature": 0.0,  # the best move
        "chosenMoveTemperatureEarly": 0.0,
        "ponderingEnabled": False,  # KataGo's default
        "rootSymmetryPruning": True,  # KataGo's GTP default
    }
    assert ask(uct, "kata-get-param maxTime") == "= 1e+20"
    for server in (plain, uct):
        assert (
            ask(server, "kata-get-param numSearchThreads")
            == "? Invalid parameter: numSearchThreads"
        )
        assert (
            ask(server, "kata-get-param") == "? Expected one argument for kata-get-param but got ''"
        )
    assert ask(plain, "kata-get-param maxVisits") == "? Invalid parameter: maxVisits"
    reply = ask(plain, "kata-set-param maxVisits 10")
    assert reply == (
        "? Could not set params: Unrecognized or non-overridable parameter in kata-set-params: "
        "maxVisits"
    )
    listed = ask(plain, "list_commands")[2:].split("\n")
    for name in ("kata-list-params", "kata-get-param", "kata-get-params", "kata-set-param"):
        assert name in listed


def test_move_delay_follows_katagos_distribution():
    """``delayMoveScale``: Gamma(2) waits of mean ``0.5 * scale / (prior + 0.1)``, cut at
    ``delayMoveMax``; nothing when either is 0."""
    import numpy as np

    from eval.engine import move_delay

    rng = np.random.default_rng(0)
    for prior in (0.0, 0.4, 0.9):
        waits = [move_delay(prior, 2.0, 1e6, rng) for _ in range(4000)]
        assert np.mean(waits) == pytest.approx(1.0 / (prior + 0.1), rel=0.05)
        assert np.var(waits) == pytest.approx(np.mean(waits) ** 2 / 2, rel=0.15)  # Gamma(2)
    assert max(move_delay(0.0, 2.0, 0.25, rng) for _ in range(200)) == 0.25
    assert move_delay(0.5, 0.0, 10.0, rng) == move_delay(0.5, 3.0, 0.0, rng) == 0.0


def test_genmove_waits_the_delay_set_within_the_clocks_share():
    """``kata-set-param delayMoveScale``: every ``genmove`` waits a delay drawn for its
    move's prior, at most ``delayMoveMax``, never past the clock's share for the move."""
    server = make_server()
    engine = server.engine
    waits = []
    engine._wait = lambda seconds, stop: waits.append(seconds)
    assert ask(server, "genmove b").startswith("= ")
    assert waits == []  # KataGo's default: no delay
    assert ask(server, 'kata-set-params {"delayMoveScale": 100, "delayMoveMax": 0.5}') == "="
    assert ask(server, "kata-get-param delayMoveScale") == "= 100.0"
    for colour in "wbw":
        assert ask(server, f"genmove {colour}").startswith("= ")
    assert waits == [0.5] * 3  # a mean of 50 s or more, cut at delayMoveMax
    assert ask(server, "time_settings 0 5 1") == "="  # five seconds a move
    assert ask(server, "kata-set-param delayMoveMax 30") == "="
    assert ask(server, "genmove b").startswith("= ")
    assert len(waits) == 4 and 0 < waits[-1] < 5  # the clock's share, less the move's time
    message = "Could not set params: delayMoveScale must be a number from 0 to 10000, not '-1'"
    assert ask(server, "kata-set-param delayMoveScale -1") == f"? {message}"


def test_max_visits_sets_the_search_budget():
    server = uct_server(visits=8)
    player = server.engine.player
    assert sum(searched(ask(server, "kata-genmove_analyze b")).values()) == 8
    assert ask(server, "kata-set-param maxVisits 17") == "="
    assert ask(server, "kata-get-param maxVisits") == "= 17"
    assert player.config.num_simulations == 16 and player.name == "uct(16 playouts)"
    assert not math.isinf(player._seconds[player._kind(server.engine.state)])  # timed again
    assert sum(searched(ask(server, "kata-genmove_analyze w")).values()) == 16
    # 1: the player's first choice alone (the rollout policy's, for UCT), no search.
    assert ask(server, "kata-set-param maxVisits 1") == "="
    assert sum(searched(ask(server, "kata-genmove_analyze b")).values()) == 1
    assert player.name == "uct(0 playouts)"
    # Bad values name what is wrong, and change nothing.
    for command, message in (
        ("kata-set-param maxVisits 0", "maxVisits must be an integer from 1 to 65536, not '0'"),
        ("kata-set-param maxVisits lots", "maxVisits must be an integer from 1 to 65536"),
        ("kata-set-param maxVisits", "maxVisits must be an integer from 1 to 65536, not ''"),
        ("kata-set-param maxTime -1", "maxTime must be a number from 0 to 1e+20, not '-1'"),
        ("kata-set-param useLcbForSelection maybe", "useLcbForSelection must be true or false"),
        ("kata-set-params [1]", "Argument to kata-set-params must be a json object"),
        ("kata-set-params {", "Argument to kata-set-params must be a json object"),
    ):
        reply = ask(server, command)
        assert reply.startswith("? Could not set params: ") and message in reply, (command, reply)
    # All or nothing: a bad key stops the good one with it.
    reply = ask(server, 'kata-set-params {"maxVisits": 5, "numSearchThreads": 4}')
    assert reply.endswith("non-overridable parameter in kata-set-params: numSearchThreads")
    assert ask(server, "kata-get-param maxVisits") == "= 1"
    assert ask(server, 'kata-set-params {"maxVisits": 5, "useLcbForSelection": true}') == "="
    assert (player.visits, player.config.lcb_selection) == (4, True)
    assert player.name == "uct(4 playouts, LCB move)"


def test_max_time_caps_every_genmove_and_no_limit_lifts_it():
    server = uct_server(visits=8)
    engine = server.engine
    assert engine.time_for_move(1) is None  # no clock: no limit
    assert ask(server, "kata-set-param maxTime 2.5") == "="
    assert engine.time_for_move(1) == 2.5
    assert ask(server, "time_settings 1 0 0") == "="  # 1 s on the clock: the clock rules
    assert engine.time_for_move(1) < 1
    assert ask(server, "kata-set-param maxTime 0") == "="
    # No time at all: the move comes from the rollout policy, without a search.
    assert sum(searched(ask(server, "kata-genmove_analyze b")).values()) == 1
    assert ask(server, "kata-set-param maxTime 1e20") == "="
    assert ask(server, "time_settings 0 1 0") == "="  # GTP: byo-yomi without stones, no limit
    assert engine.time_for_move(1) is None
    assert ask(server, "kata-get-param maxTime") == "= 1e+20"


def test_move_temperature_draws_the_move_from_the_visits():
    server = uct_server(visits=16)
    player = server.engine.player
    assert ask(server, "play b c3") == "="
    # Hot early (move 1 of 5x5: nearly the early value), cold late.
    settings = '{"chosenMoveTemperatureEarly": 5, "chosenMoveTemperature": 0}'
    assert ask(server, f"kata-set-params {settings}") == "="
    assert (player.config.move_temperature, player.config.move_temperature_early) == (0.0, 5.0)
    moves = {ask(server, "kata-search w") for _ in range(10)}
    assert len(moves) > 1, moves  # the best move every time at temperature 0
    assert ask(server, "kata-get-param chosenMoveTemperatureEarly") == "= 5.0"
    # Early set alone: the late one is the temperature the player plays at now, 0.
    server = uct_server(visits=16)
    assert ask(server, "kata-set-param chosenMoveTemperatureEarly 0.5") == "="
    config = server.engine.player.config
    assert (config.move_temperature, config.move_temperature_early) == (0.0, 0.5)
    reply = ask(server, "kata-set-param chosenMoveTemperature 6")
    assert reply.endswith("chosenMoveTemperature must be a number from 0 to 5, not '6'")


def test_pondering_limits_bound_the_analysis_search():
    server = uct_server(visits=4)
    engine = server.engine
    assert ask(server, "kata-set-param maxVisitsPondering 30") == "="
    assert ask(server, "kata-get-param maxVisitsPondering") == "= 30"
    visits = [a.visits for a, _ in zip(engine.ponder(), range(24), strict=False)]
    assert visits[-1] == 30 and max(visits) == 30  # grown to it, no further
    # Never below a move's search (a pondered tree is what genmove goes on from).
    assert ask(server, "kata-set-param maxVisitsPondering 2") == "="
    assert ask(server, "kata-get-param maxVisitsPondering") == "= 5"
    assert ask(server, "kata-set-param maxVisitsPondering 60") == "="

    def reported() -> list[int]:  # the root visits of the last analysis reply's lines
        reply = server.out.getvalue().split("\n\n")[-3]
        return [int(v) for v in re.findall(r"rootInfo visits (\d+)", reply)]

    def analyse(until_grown: bool):
        yield "1 kata-analyze b 5 rootInfo true\n"
        start = time.monotonic()  # until the search grew (compiled too), else a second
        while time.monotonic() - start < (60 if until_grown else 1):
            if until_grown and "rootInfo visits 60 " in server.out.getvalue():
                break
            time.sleep(0.05)
        yield "2 name\n"

    server.serve(analyse(until_grown=True))
    assert max(reported()) == 60
    # No time to grow: the analysis stays the first look (the rollouts' here).
    assert ask(server, "kata-set-param maxTimePondering 0") == "="
    assert engine.max_ponder_time == 0.0
    server.serve(analyse(until_grown=False))
    assert len(reported()) >= 3 and set(reported()) == {1}, reported()
    assert ask(server, "kata-set-param maxTimePondering 1e20") == "="
    assert math.isinf(engine.max_ponder_time)


def test_allow_resignation_turns_resigning_on_and_off():
    server = make_server()
    engine = server.engine
    assert ask(server, "kata-set-param allowResignation true") == "="
    assert engine.resign_threshold == KATAGO_RESIGN_WINRATE  # none given: KataGo's
    assert ask(server, "kata-set-param allowResignation false") == "="
    assert engine.resign_threshold is None
    assert ask(server, "kata-get-param allowResignation") == "= false"
    engine.resign_threshold = 0.3  # as --resign-threshold 0.3 gives
    assert ask(server, 'kata-set-params {"allowResignation": false}') == "="
    assert ask(server, "kata-set-param allowResignation TRUE") == "="
    assert engine.resign_threshold == 0.3


def test_katago_search_constants_are_set_and_play():
    server = katago_server(visits=24)
    player = server.engine.player
    params = json.loads(ask(server, "kata-get-params")[2:])
    assert {
        k: params[k] for k in ("cpuctExploration", "fpuReductionMax", "rootFpuReductionMax")
    } == {
        "cpuctExploration": 1.0,
        "fpuReductionMax": 0.2,
        "rootFpuReductionMax": 0.1,  # no root noise in play: KataGo's 0.1
    }
    assert (params["staticScoreUtilityFactor"], params["dynamicScoreUtilityFactor"]) == (0.1, 0.3)
    assert params["maxVisits"] == 25 and list(params) == list(gtp_params.PARAMS)  # every one
    for move in ("b c3", "w d3", "b b2"):  # a position where the net hesitates
        assert ask(server, f"play {move}") == "="
    wide = searched(ask(server, "kata-genmove_analyze w"))
    assert ask(server, "undo") == "="
    reply = ask(server, 'kata-set-params {"rootFpuReductionMax": 2, "cpuctUtilityStdevScale": "0"}')
    assert reply == "="
    assert (player.config.root_fpu_reduction, player.config.cpuct_utility_stdev_scale) == (2.0, 0.0)
    assert ask(server, "kata-get-param rootFpuReductionMax") == "= 2.0"
    narrow = searched(ask(server, "kata-genmove_analyze w"))
    # An unvisited root move is valued far below its parent: the visits stay on fewer moves.
    assert len(narrow) < len(wide), (narrow, wide)
    assert sum(narrow.values()) == sum(wide.values()) == 24
    # What is set already changes nothing: the tree is kept, the search not compiled again.
    kept = player._tree
    assert kept is not None
    assert ask(server, "kata-set-param rootFpuReductionMax 2") == "="
    assert player._tree is kept
    reply = ask(server, "kata-set-param cpuctUtilityStdevScale 1.5")
    message = "cpuctUtilityStdevScale must be a number from 0 to 1, not '1.5'"
    assert reply == f"? Could not set params: {message}"
    assert player.config.cpuct_utility_stdev_scale == 0.0 and player._tree is kept
    # The score utility off: the name says so.
    off = '{"staticScoreUtilityFactor": 0, "dynamicScoreUtilityFactor": 0}'
    assert ask(server, f"kata-set-params {off}") == "="
    assert player.name.endswith("24 visits, value only)") and not player.config.weighs_scores


def test_wide_root_noise_spreads_the_analysis_and_not_the_moves():
    """KataGo's GTP searches its analyses (lz-analyze, kata-analyze) with
    analysisWideRootNoise, 0.04 by default, and its moves with wideRootNoise, 0."""
    server = katago_server(visits=8)
    engine, player = server.engine, server.engine.player
    assert ask(server, "kata-get-param analysisWideRootNoise") == "= 0.04"
    assert ask(server, "kata-get-param wideRootNoise") == "= 0.0"
    for move in ("b c3", "w d3", "b b2"):  # a position where the net hesitates
        assert ask(server, f"play {move}") == "="
    used = []  # the wide root noise of every search run
    search = player._search

    def recorded(*args, **kw):  # (variables, states, key, config, ...) or config=
        used.append(kw.get("config", args[3] if len(args) > 3 else None).wide_root_noise)
        return search(*args, **kw)

    player._search = recorded

    def analysed_moves() -> int:  # root moves with a visit after a 40-visit analysis
        player.new_game()  # from scratch
        *_, last = (a for a, _ in zip(engine.ponder(), range(12), strict=False))
        assert last.visits == 40
        return sum(1 for m in last.moves if m.visits > 0)

    assert (
        ask(server, 'kata-set-params {"maxVisitsPondering": 40, "rootFpuReductionMax": 2}') == "="
    )
    assert ask(server, "kata-set-param analysisWideRootNoise 0") == "="
    narrow = analysed_moves()
    assert set(used) == {0.0}
    assert ask(server, "kata-set-param analysisWideRootNoise 1.5") == "="
    wide = analysed_moves()
    assert wide > narrow, (wide, narrow)
    assert set(used) == {0.0, 1.5}
    used.clear()
    ask(server, "kata-genmove_analyze w")
    assert set(used) == {0.0}  # the move's own search: wideRootNoise
    assert ask(server, "kata-set-param wideRootNoise 0.3") == "="
    assert player.config.wide_root_noise == 0.3
    reply = ask(server, "kata-set-param analysisWideRootNoise 6")
    assert reply.endswith("analysisWideRootNoise must be a number from 0 to 5, not '6'")
    assert player.analysis_wide_root_noise == 1.5


def test_root_policy_temperature_is_set_as_katago_keeps_it():
    player = SearchPlayer(reference_model(), visits=8, search="puct", symmetry=0)
    server = GTPServer(Engine(player, size=5, komi=0.5, rules="chinese"), io.StringIO())

    def top_prior() -> float:
        reply = ask(server, "kata-search_analyze b")
        return max(float(p) for p in re.findall(r" prior (\S+)", reply))

    names = ask(server, "kata-list-params").split()[1:]
    assert {"rootPolicyTemperature", "rootPolicyTemperatureEarly"} <= set(names)
    assert ask(server, "kata-get-param rootPolicyTemperatureEarly") == "= 1.0"
    plain = top_prior()
    # Unset, the early temperature follows the late one, as KataGo's config loads it.
    assert ask(server, "kata-set-param rootPolicyTemperature 100") == "="
    assert ask(server, "kata-get-param rootPolicyTemperatureEarly") == "= 100.0"
    hot = top_prior()  # the prior searched with, and reported, is the tempered one
    assert hot < plain / 2, (hot, plain)
    # Set, it stays where it was set, even equal to the late one at the time.
    assert ask(server, "kata-set-param rootPolicyTemperatureEarly 100") == "="
    assert ask(server, "kata-set-param rootPolicyTemperature 1") == "="
    assert (player.config.root_policy_temperature, player.config.root_policy_temperature_early) == (
        1.0,
        100.0,
    )
    assert top_prior() == pytest.approx(hot, abs=1e-3)  # move 0: the early temperature
    reply = ask(server, "kata-set-param rootPolicyTemperature 0")
    message = "rootPolicyTemperature must be a number from 0.01 to 100, not '0'"
    assert reply == f"? Could not set params: {message}"


def test_analysis_hides_the_moves_before_the_position_as_katago():
    """KataGo's ``analysisIgnorePreRootHistory`` (true): the network of ``lz-analyze`` and
    ``kata-analyze`` sees the analysed position with no past move; false shows the game."""
    import numpy as np

    from eval.players import PolicyPlayer
    from gojax.katago_features import forget_history

    player = PolicyPlayer(reference_model(), symmetry=0)
    server = GTPServer(Engine(player, size=9, komi=7.0, rules="chinese"), io.StringIO())
    engine = server.engine
    for move in ("b e5", "w c3", "b g7", "w c7", "b g3", "w e3"):
        assert ask(server, f"play {move}") == "="
    assert "analysisIgnorePreRootHistory" in ask(server, "kata-list-params").split()
    assert ask(server, "kata-get-param analysisIgnorePreRootHistory") == "= true"

    def priors(analysis) -> dict[int, float]:
        return {m.action: m.prior for m in analysis.moves}

    hidden = player.evaluate(forget_history(engine.state))
    shown = player.evaluate(engine.state)
    # The history matters to this net here, so the test tells the two apart.
    assert abs(hidden.winrate - shown.winrate) > 1e-4, (hidden.winrate, shown.winrate)
    analysis = next(engine.ponder())
    assert analysis.winrate == pytest.approx(hidden.winrate, abs=1e-6)
    assert priors(analysis) == pytest.approx(priors(hidden), abs=1e-6)
    np.testing.assert_allclose(analysis.ownership, hidden.ownership, atol=1e-6)
    assert ask(server, 'kata-set-params {"analysisIgnorePreRootHistory": false}') == "="
    assert ask(server, "kata-get-param analysisIgnorePreRootHistory") == "= false"
    analysis = next(engine.ponder())
    assert analysis.winrate == pytest.approx(shown.winrate, abs=1e-6)
    assert priors(analysis) == pytest.approx(priors(shown), abs=1e-6)
    reply = ask(server, "kata-set-param analysisIgnorePreRootHistory yes")
    assert reply.endswith("analysisIgnorePreRootHistory must be true or false, not 'yes'")
    assert engine.analysis_ignore_pre_root_history is False
    # Without a network there is nothing to hide.
    assert "analysisIgnorePreRootHistory" not in ask(uct_server(), "kata-list-params")


@pytest.mark.parametrize("hide", [True, False])
def test_a_move_goes_on_from_the_pondered_tree_only_if_it_saw_the_game(hide):
    """A tree pondered on the position with its history hidden was searched with other
    inputs than a move's: ``genmove`` starts afresh (as KataGo's GTP engine, switching
    between analysing and moving); with the history shown it goes on from it."""
    server = katago_server(visits=8)
    engine, player = server.engine, server.engine.player
    for move in ("b c3", "w d3"):
        assert ask(server, f"play {move}") == "="
    settings = {"maxVisitsPondering": 40, "analysisIgnorePreRootHistory": hide}
    assert ask(server, f"kata-set-params {json.dumps(settings)}") == "="
    *_, last = (a for a, _ in zip(engine.ponder(), range(12), strict=False))
    assert last.visits == 40
    assert (int(player._root.recent_moves[0]) == -1) == hide  # the root searched
    visits = sum(searched(ask(server, "kata-genmove_analyze b")).values())
    assert visits == (8 if hide else 39), visits  # a move's search, or the pondered tree's


def test_the_analysis_after_a_move_goes_on_below_it_with_the_root_shown_as_katago():
    """With the moves before an analysed position hidden, the analysis after a move starts
    from the analysed subtree below that move, as KataGo's: its visits kept, its root
    re-evaluated as it is now shown (the network's prior of the position with no past,
    not the one it had as a child, shown the move)."""
    import numpy as np

    from eval.engine import _forget_history

    server = katago_server(visits=8)
    engine, player = server.engine, server.engine.player
    assert ask(server, "play b c3") == "="
    # The centre point leaves a symmetric board, whose moves would be listed with the
    # prior of the move searched for them: compare each move's own.
    settings = '{"maxVisitsPondering": 64, "rootSymmetryPruning": false}'
    assert ask(server, f"kata-set-params {settings}") == "="
    *_, last = (a for a, _ in zip(engine.ponder(), range(12), strict=False))
    assert last.visits == 64
    best = last.moves[0]
    assert best.visits > 8  # premise: a subtree worth keeping
    assert ask(server, f"play w {'ABCDE'[best.action % 5]}{5 - best.action // 5}") == "="
    stream = engine.ponder()
    next(stream)  # the network's first look
    first = next(stream)
    step = max(9, 64 // PONDER_PARTS)  # a move's visits, or a part of the ponder's
    assert first.visits == min(64, best.visits + step), (first.visits, best.visits)
    shown = player.evaluate(_forget_history(engine.state))
    seen = player.evaluate(engine.state)  # with the game's last moves
    prior = {m.action: m.prior for m in shown.moves}
    assert any(abs(prior[m.action] - m.prior) > 1e-4 for m in seen.moves)  # premise
    for move in first.moves:
        if move.action in prior:
            assert move.prior == pytest.approx(prior[move.action], abs=1e-5)
    assert np.isfinite(first.winrate) and first.moves[0].visits > 0


@pytest.mark.parametrize("search", ["puct", "gumbel"])
def test_katago_only_parameters_are_refused_for_other_searches(search):
    player = SearchPlayer(reference_model(), visits=8, search=search, symmetry=0)
    server = GTPServer(Engine(player, size=5, komi=0.5, rules="chinese"), io.StringIO())
    reply = ask(server, "kata-set-param fpuReductionMax 0.1")
    assert reply.endswith("non-overridable parameter in kata-set-params: fpuReductionMax")
    names = ask(server, "kata-list-params").split()[1:]
    assert ("useLcbForSelection" in names) == (search == "puct")
    assert ("rootPolicyTemperature" in names) == (search == "puct")
    assert not {"wideRootNoise", "analysisWideRootNoise"} & set(names)
    if search == "gumbel":  # its root moves follow the budget unless they were given
        assert ask(server, "kata-set-param maxVisits 33") == "="
        assert player.config.max_num_considered_actions == 8


def test_override_config_sets_parameters_at_start_and_warms_up_once(monkeypatch):
    warmups = []
    original = UCTPlayer.warmup
    monkeypatch.setattr(UCTPlayer, "warmup", lambda self, s: warmups.append(original(self, s)))
    settings = "maxVisits=9, maxTime=3,allowResignation=true"
    flags = gtp_flags(
        "--player", "uct", "--visits", "4", "--size", "5", "--override-config", settings
    )
    engine = make_engine(argparse.Namespace(**flags))
    assert engine.player.visits == 8 and engine.player.name == "uct(8 playouts)"
    assert engine.max_time == 3.0 and engine.resign_threshold == KATAGO_RESIGN_WINRATE
    assert len(warmups) == 1  # the search as set, not the one of --visits first
    for text, message in (
        ("numSearchThreads=4", "non-overridable parameter in kata-set-params: numSearchThreads"),
        ("maxVisits", "'maxVisits' is not NAME=VALUE"),
        ("maxVisits=0", "maxVisits must be an integer from 1 to 65536, not '0'"),
    ):
        flags = gtp_flags("--player", "uct", "--size", "5", "--override-config", text)
        with pytest.raises(ValueError, match=message):
            make_engine(argparse.Namespace(**flags))


def test_kata_analyze_reports_katagos_utility_and_score_spread():
    """With KataGo's search the utility is the value plus the score utility (at most 0.4
    off it), ``utilityLcb`` its bound and ``lcb`` the win rate less that bound's radius
    scaled to the win-rate scale and the value's share (KataGo's); ``scoreSelfplay`` and
    ``scoreStdev`` are each move's own, the search's means, not the root's evaluation."""
    server = katago_server(visits=16)
    for move in ("b c3", "w d3"):
        assert ask(server, f"play {move}") == "="
    line = ask(server, "kata-search_analyze b rootInfo true").split("\n")[-2]
    fields = "visits edgeVisits utility winrate scoreMean scoreStdev scoreLead scoreSelfplay"
    pattern = " ".join(f"{f} (\\S+)" for f in fields.split())
    infos = [
        dict(zip(fields.split(), map(float, m), strict=True))
        | {k: float(v) for k, v in re.findall(r"(lcb|utilityLcb|prior) (\S+)", info)}
        for info in re.findall(r"info move \S+ (.*?)(?= info | rootInfo )", line)
        for m in [re.match(pattern, info).groups()]
    ]
    visited = [m for m in infos if m["visits"] > 0]
    assert len(visited) >= 2
    gaps = [m["utility"] - (2 * m["winrate"] - 1) for m in visited]
    assert all(abs(g) < 0.4 for g in gaps) and any(abs(g) > 1e-3 for g in gaps)
    radius = 1.0 + 0.1 + 0.3  # the value's and the score utility's weights (KataGo's)
    for m in visited:
        assert m["utilityLcb"] < m["utility"]
        hacked = m["winrate"] - (m["utility"] - m["utilityLcb"]) / (2 * radius)
        assert m["lcb"] == pytest.approx(max(0.0, hacked), abs=1e-5)
    assert len({m["scoreStdev"] for m in visited}) > 1  # each move's own spread
    root = re.search(r"rootInfo visits (\d+) utility (\S+) winrate (\S+)", line).groups()
    assert int(root[0]) == 17 and abs(float(root[1]) - (2 * float(root[2]) - 1)) < 0.4
    # The root evaluation's short-term heads after the weight, as KataGo prints them: this
    # g170 net has none, which KataGo reports as -1 (the win-loss error halved).
    assert re.search(
        r" weight 17 rawStWrError -0\.5 rawStScoreError -1 rawVarTimeLeft -1$", line
    ), line
    # Without the score utility, the utility is the value alone.
    player = SearchPlayer(
        reference_model(), visits=16, search="katago", symmetry=0, score_utility=False
    )
    plain = GTPServer(Engine(player, size=5, komi=0.5, rules="chinese"), io.StringIO())
    line = ask(plain, "kata-search_analyze b").split("\n")[-2]
    for info in re.findall(r"info move \S+ (.*?)(?= info |$)", line):
        utility, winrate = map(float, re.search(r"utility (\S+) winrate (\S+)", info).groups())
        assert utility == pytest.approx(2 * winrate - 1, abs=1e-5)


def test_kata_analyze_lists_every_move_a_searched_one_stands_for_as_katago():
    """At a symmetric position (the empty board) one move of each set of equivalent moves
    is searched (``rootSymmetryPruning``, KataGo's default) and every move of the set is
    listed with its numbers, ``isSymmetryOf`` it, its principal variation and subtree
    ownership carried over by the symmetry; ``rootSymmetryPruning false`` searches all."""
    import numpy as np

    from gojax import action_to_gtp, gtp_to_action
    from gojax._root_symmetry import transform_actions, transform_point_values

    player = SearchPlayer(reference_model(), visits=48, search="katago", symmetry=0)
    server = GTPServer(Engine(player, size=9, komi=7, rules="chinese"), io.StringIO())

    def infos(reply: str) -> list[dict]:
        line = reply.split("\n")[-2]
        out = []
        for info in re.findall(r"info (.*?)(?= info |$)", line):
            source = re.search(r"isSymmetryOf (\S+)", info)
            out.append(
                {
                    "move": re.search(r"move (\S+)", info)[1],
                    "visits": int(re.search(r"visits (\d+)", info)[1]),
                    "winrate": re.search(r"winrate (\S+)", info)[1],
                    "of": source and source[1],
                    "order": int(re.search(r" order (\d+)", info)[1]),
                    "pv": tuple(re.search(r" pv (.*?)(?= movesOwnership|$)", info)[1].split()),
                    "own": np.array(info.split(" movesOwnership ")[1].split(), float),
                }
            )
        return out

    listed = infos(ask(server, "kata-search_analyze b movesOwnership true"))
    assert [i["order"] for i in listed] == list(range(len(listed)))
    assert len({i["move"] for i in listed}) == len(listed)
    searched = {i["move"]: i for i in listed if i["of"] is None}
    copies = [i for i in listed if i["of"] is not None]
    assert copies and sum(i["visits"] for i in searched.values()) == 48
    for copy in copies:
        source = searched[copy["of"]]
        assert (copy["visits"], copy["winrate"]) == (source["visits"], source["winrate"])
        pv = [gtp_to_action(v, 9) for v in source["pv"]]
        carried = [
            s
            for s in range(8)
            if tuple(action_to_gtp(a, 9) for a in transform_actions(tuple(pv), 9, s)) == copy["pv"]
            and np.allclose(transform_point_values(source["own"], 9, s), copy["own"], atol=1e-5)
        ]
        assert carried, copy["move"]
    best = gtp_to_action(listed[0]["move"], 9)
    assert best % 9 >= 4 and best // 9 <= 4  # Black's searched moves: the upper right
    assert ask(server, "kata-set-param rootSymmetryPruning false") == "="
    plain = infos(ask(server, "kata-search_analyze b movesOwnership true"))
    assert all(i["of"] is None for i in plain) and sum(i["visits"] for i in plain) == 48


def test_kata_analyze_reports_each_moves_ownership_as_katago():
    """``movesOwnership``: the mean ownership of the evaluations below each move, so that
    the visits-weighted moves' means and the root's own evaluation make the root's
    ``ownership`` (KataGo's tree average); with the other keys KataGo's GTP accepts."""
    import numpy as np

    server = katago_server(visits=8)
    engine, player = server.engine, server.engine.player
    for move in ("b c3", "w d3"):
        assert ask(server, f"play {move}") == "="
    before = engine.state
    keys = (
        "movesOwnership true movesOwnershipStdev true pvVisits true pvEdgeVisits true "
        "noResultValue true rootInfo true ownership true"
    )
    reply = ask(server, f"kata-search_analyze b {keys}")
    line = reply.split("\n")[-2]
    infos = re.findall(r"info (.*?)(?= info | rootInfo )", line)
    root_visits = int(re.search(r"rootInfo visits (\d+) .* weight (\d+)", line)[1])
    assert root_visits == 9
    root = np.array(line.split(" ownership ")[1].split(), float)
    assert root.shape == (25,)
    weighted = np.zeros(25)
    for info in infos:
        if " isSymmetryOf " in info:  # listed for a searched move (after C3, D3: a mirror)
            continue
        visits = int(re.search(r"visits (\d+) edgeVisits (\d+)", info)[1])
        assert re.search(r" weight (\d+) ", info)[1] == str(visits)
        pv_visits = re.search(r" pvVisits ([\d ]+?) pvEdgeVisits ([\d ]+?) movesOwnership", info)
        assert pv_visits[1] == pv_visits[2]
        assert 0.0 <= float(re.search(r"noResultValue (\S+)", info)[1]) <= 1.0
        means = np.array(
            info.split(" movesOwnership ")[1].split(" movesOwnershipStdev ")[0].split(), float
        )
        stdevs = np.array(info.split(" movesOwnershipStdev ")[1].split(), float)
        assert means.shape == stdevs.shape == (25,)
        assert np.all(np.abs(means) <= 1) and np.all(stdevs >= 0)
        if visits == 1:
            assert np.all(stdevs == 0)  # one evaluation has no spread
        weighted += visits * means
    searched_infos = [i for i in infos if " isSymmetryOf " not in i]
    assert sum(int(re.search(r"visits (\d+)", i)[1]) for i in searched_infos) == 8
    own = player.evaluate(before).ownership  # the root's own evaluation, mover's view
    np.testing.assert_allclose(9 * root - weighted, own, atol=2e-4)
    # The network alone has no subtree below a move: the key prints nothing.
    from eval.players import PolicyPlayer

    policy = Engine(PolicyPlayer(reference_model(), symmetry=0), size=5, komi=0.5, rules="chinese")
    reply = ask(GTPServer(policy, io.StringIO()), "kata-genmove_analyze b movesOwnership true")
    assert "movesOwnership" not in reply and "info move" in reply


def test_an_analysis_evaluates_the_rows_its_listed_moves_need():
    """The network call beside a search (the root and the positions after its listed
    moves) evaluates the first of 0, 4, 8 or 16 after-move rows that holds the listed
    moves, passes after them; a listed move's row is the same whatever the padding."""
    import jax
    import numpy as np

    import gojax

    player = SearchPlayer(reference_model(), visits=8, search="katago", symmetry=0)
    state = gojax.new_game(9, komi=7.0)
    run = player._evaluate
    sizes = []

    def counted(variables, state, actions, key):
        sizes.append(int(actions.shape[0]))
        return run(variables, state, actions, key)

    player._evaluate = counted
    key = jax.random.key(0)
    for listed, rows in ((0, 0), (1, 4), (4, 4), (5, 8), (9, 16), (16, 16)):
        out = player._evaluations(state, list(range(10, 10 + listed)), key)
        assert sizes[-1] == rows and out["policy"].shape[0] == 1 + rows
    few = player._evaluations(state, [10, 20, 30], key)
    padded = player._evaluations(state, [10, 20, 30] + [state.num_actions - 1] * 13, key)
    assert sizes[-2:] == [4, 16]
    for name in ("white_lead", "no_result", "white_score_selfplay", "score_stdev", "policy"):
        np.testing.assert_allclose(few[name][:4], padded[name][:4], atol=1e-4, err_msg=name)
