"""The classical UCT player over GTP: rollout MCTS with no network."""

from __future__ import annotations

import io
import re

import pytest
from test_gtp import ask, run

from eval.engine import Engine
from eval.gtp import GTPServer
from eval.players import UCTPlayer

# Black to move; White's three stones in the middle have one liberty, E4.
CAPTURE = ["b B5", "b C5", "b D5", "b A4", "b B3", "b C3", "b D3", "w B4", "w C4", "w D4"]


def server(visits: int = 64) -> GTPServer:
    engine = Engine(UCTPlayer(visits=visits), size=5, komi=0.5, rules="chinese")
    return GTPServer(engine, io.StringIO(), version="test")


def test_uct_captures_the_group_in_atari():
    gtp = server(visits=128)
    assert ask(gtp, "komi 20.5") == "="  # Black wins only by taking all 25 points
    assert run(gtp, "".join(f"play {m}\n" for m in CAPTURE)) == ["="] * len(CAPTURE)
    # E4 captures at once; E5 takes White's last escape (E4 would then be self-atari).
    first = ask(gtp, "genmove b")
    assert first in ("= E4", "= E5")
    if first == "= E5":
        assert ask(gtp, "genmove b") == "= E4"
    board = ask(gtp, "showboard")
    rows = [line for line in board.splitlines() if re.match(r"^=? *[1-5] ", line)]
    assert len(rows) == 5 and not any("O" in row for row in rows)  # White's stones are gone


def test_uct_analysis_lists_visited_moves_with_uniform_priors():
    gtp = server(visits=32)
    replies = run(gtp, "kata-genmove_analyze b\n")
    assert replies and replies[-1].splitlines()[-1].startswith("play ")
    infos = re.findall(r"info move (\S+) visits (\d+)(.*?)(?= info |$)", replies[-1])
    # The empty board is symmetric: one move of each set searched, the others listed too.
    assert any(" isSymmetryOf " in rest for *_, rest in infos)
    infos = [(m, v) for m, v, rest in infos if " isSymmetryOf " not in rest]
    assert infos and sum(int(v) for _, v in infos) <= 32
    # No eye filling and no pass on an empty board: the sensible move set.
    assert all(move != "pass" for move, _ in infos)


@pytest.mark.slow
def test_uct_with_a_fast_rollout_policy_over_gtp(tmp_path):
    import argparse

    import jax.numpy as jnp

    from eval.gtp import make_engine
    from gojax import rollout_policy

    weights = rollout_policy.zero_weights()._replace(last=jnp.asarray([4.0, 2, 1, 0, 0, 0]))
    engine = Engine(UCTPlayer(visits=8, rollout_weights=weights), size=5, komi=0.5)
    assert "fast policy" in engine.player.name
    gtp = GTPServer(engine, io.StringIO(), version="test")
    assert re.fullmatch(r"= [A-E][1-5]", ask(gtp, "genmove b"))
    path = tmp_path / "policy.npz"
    rollout_policy.save(path, weights)
    args = argparse.Namespace(
        player="policy", rollout_policy=str(path), model=None, checkpoint=None
    )
    with pytest.raises(ValueError, match="--rollout-policy plays rollouts"):
        make_engine(args)


def test_short_of_time_the_search_stops_at_the_visits_that_fit():
    """With less time than a whole search needs, the move comes from the search cut short
    at the root visits the time allows (not from the raw policy), and with time for
    fewer than two visits from the policy."""
    import time

    import jax

    engine = Engine(UCTPlayer(visits=32), size=5, komi=0.5, rules="chinese")  # warms up
    player = engine.player
    kind = player._kind(engine.state)
    assert kind in player._seconds  # measured by the warm-up
    player._seconds[kind] = 100.0  # pretend a whole search takes 100 s: the clock decides
    needed = 100.0 * player.time_factor

    def visits_with(seconds: float) -> int:
        player.new_game()  # no kept tree: the visits are this search's
        deadline = time.monotonic() + seconds
        key = jax.random.key(0)
        return player.analyze(engine.state, visits=32, key=key, deadline=deadline).visits

    assert visits_with(needed / 2) in (15, 16)  # 33 root visits at most, half the time
    assert visits_with(needed / 8) in (3, 4)
    assert visits_with(needed / 100) == 1  # the policy: one evaluation
    assert visits_with(2 * needed) == 33  # time enough: the whole search
