"""KataGo's cancellable searches over GTP (``kata-search_cancellable``,
``kata-search_analyze_cancellable``): a search that answers when it is done, or as soon
as any input line arrives (a blank one too, or the end of the input), with the move it
has found so far; the move is never played."""

from __future__ import annotations

import io
import re
import time

from test_gtp import ask, run

from eval.engine import Engine
from eval.gtp import GTPServer
from eval.players import UCTPlayer


def uct_server(visits: int) -> GTPServer:
    # Not warmed: the search is untimed (no clock), and a large budget would take long.
    engine = Engine(UCTPlayer(visits=visits), size=5, komi=0.5, rules="chinese", warm=False)
    return GTPServer(engine, io.StringIO(), version="test")


def answered_lines(server: GTPServer, lines: list[str]):
    """Each line once the reply to the one before is complete: nothing cancels."""
    for line in lines:
        written = len(server.out.getvalue())
        yield line
        while not server.out.getvalue()[written:].endswith("\n\n"):
            time.sleep(0.01)


def lines_after(lines: list[str], pauses: list[float]):
    """Input that arrives over time, as a controller's does."""
    for line, pause in zip(lines, pauses, strict=True):
        time.sleep(pause)
        yield line


def visits_and_move(reply: str) -> tuple[int, str]:
    """The root visits of a ``kata-search_analyze ... rootInfo true`` reply, and its move."""
    info, move = reply.split("\n")[1:]
    (visits,) = re.findall(r"rootInfo visits (\d+)", info)
    return int(visits), move.removeprefix("play ")


def test_a_search_left_alone_is_the_whole_search_and_plays_nothing():
    server = uct_server(visits=24)
    commands = [
        "1 kata-search_analyze_cancellable b rootInfo true\n",
        "2 kata-search_cancellable w\n",
    ]
    server.serve(answered_lines(server, commands))
    first, second, rest = server.out.getvalue().split("\n\n")
    assert first.startswith("=1\ninfo move ") and rest == ""
    visits, move = visits_and_move(first)
    # Root visits: 24 simulations and the root's own.
    assert visits == 25 and re.fullmatch(r"[A-E][1-5]|pass", move), first
    assert re.fullmatch(r"=2 ([A-E][1-5]|pass)", second), second
    assert server.engine.moves == []  # neither move was played


def test_any_line_stops_the_search_with_the_move_it_has():
    budget = 20_000
    server = uct_server(visits=budget)
    lines = ["1 kata-search_analyze_cancellable b rootInfo true\n", "\n", "2 name\n"]
    server.serve(lines_after(lines, [0.0, 2.0, 0.0]))
    first, second, rest = server.out.getvalue().split("\n\n")
    visits, move = visits_and_move(first)
    assert 1 < visits < budget + 1, visits  # stopped after a part, with what it had
    assert re.fullmatch(r"[A-E][1-5]|pass", move), first
    assert second == "=2 gojax" and rest == ""  # the next command is answered after it
    # The end of the input stops it too, and its reply still comes.
    (reply,) = run(server, "3 kata-search_cancellable w\n")
    assert re.fullmatch(r"=3 ([A-E][1-5]|pass)", reply), reply
    assert server.engine.moves == []


def test_bad_arguments_are_answered_at_once():
    server = uct_server(visits=8)
    assert ask(server, "kata-search_cancellable").startswith("? ")
    assert ask(server, "kata-search_cancellable purple").startswith("? ")
    assert ask(server, "kata-search_analyze_cancellable b frobnicate 3") == "? syntax error"
    listed = ask(server, "list_commands")[2:].split("\n")
    assert {"kata-search_cancellable", "kata-search_analyze_cancellable"} <= set(listed)
