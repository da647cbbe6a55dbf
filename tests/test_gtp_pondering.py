"""GTP pondering (KataGo's ``ponderingEnabled``): the engine searches on the
opponent's time, after each command until the next line arrives, and the next
``genmove`` goes on from that tree."""

from __future__ import annotations

import time

from test_gtp import ask, make_server
from test_gtp_params import katago_server, searched, uct_server


def root_visits(player) -> int:
    return 0 if player._tree is None else int(player._tree.node_visits[0, 0])


def wait_until(condition, seconds: float = 120.0) -> None:
    start = time.monotonic()
    while not condition() and time.monotonic() - start < seconds:
        time.sleep(0.05)


def test_pondering_is_a_parameter_of_the_searches_that_keep_a_tree():
    server = katago_server()
    assert ask(server, "kata-get-param ponderingEnabled") == "= false"  # KataGo's default
    assert "ponderingEnabled" in ask(server, "kata-list-params").split()
    assert "ponderingEnabled" in ask(uct_server(), "kata-list-params").split()
    reply = ask(make_server(), "kata-set-param ponderingEnabled true")  # nothing to search
    assert reply.endswith("non-overridable parameter in kata-set-params: ponderingEnabled")
    reply = ask(server, "kata-set-param ponderingEnabled 1")
    assert reply.endswith("ponderingEnabled must be true or false, not '1'")
    assert server.engine.pondering is False


def test_the_engine_thinks_on_the_opponents_time_and_plays_from_that_tree():
    server = katago_server(visits=8)
    engine, player = server.engine, server.engine.player
    settings = '{"ponderingEnabled": true, "maxVisitsPondering": 60}'
    assert ask(server, f"kata-set-params {settings}") == "="
    assert ask(server, "kata-get-param ponderingEnabled") == "= true"

    def session():
        yield "play b c3\n"
        # White to play: the engine grows its tree of this position meanwhile.
        wait_until(lambda: root_visits(player) >= 60)
        yield "1 kata-genmove_analyze w\n"

    server.serve(session())
    assert server._ponder is None  # stopped at the end of the input
    reply = server.out.getvalue().split("\n\n")[-2]
    assert reply.startswith("=1\n")
    # The move's search went on from the pondered tree: its 59 visits below the root,
    # where a move's own search has 8.
    assert sum(searched(reply).values()) == 59, reply
    assert len(engine.moves) == 2


def test_a_command_stops_the_pondering_and_is_answered():
    """A search pondered toward a budget it would take minutes to reach stops when the
    next line comes, which is answered; without ``ponderingEnabled`` nothing is
    searched between commands."""
    server = katago_server(visits=8)
    player = server.engine.player
    server.serve(iter(["play b c3\n", "\n"]))
    assert player._tree is None  # pondering off: no search since the last move
    settings = '{"ponderingEnabled": true, "maxVisitsPondering": 65536}'
    assert ask(server, f"kata-set-params {settings}") == "="

    def session():
        yield "play w d3\n"
        wait_until(lambda: root_visits(player) > 20)
        yield "2 name\n"

    server.serve(session())
    assert server.out.getvalue().split("\n\n")[-2].startswith("=2 ")
    assert server._ponder is None
    assert 20 < root_visits(player) < 65536, root_visits(player)
    assert int(player._root.move_number) == 2  # the position after the last move
