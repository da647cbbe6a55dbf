"""KaTrain end to end: ``gojax analysis`` driven by KaTrain's own engine code, unchanged.

KaTrain (PyPI ``katrain``) starts its "local" engine as ``<katago> analysis -model M
-config C -override-config homeDataDir=...``, with its bundled analysis config, and sends
each position with ``maxTime`` (8 s by default) and ``reportDuringSearchEvery``; its
continuous analysis asks for 10,000,000 visits and is stopped with ``terminate``. Here
its ``KataGoEngine`` is pointed at the ``gojax`` executable with the reference g170 net,
headless (Kivy without a window), and its own ``GameNode`` code parses the replies. The
engine compiles ahead what KaTrain's config implies (19x19 and 9x9), so the first query
of each size after the ready line gets its visits within ``maxTime`` instead of spending
it compiling. Skipped where ``katrain`` cannot be imported (``pip install -e '.[katrain]'``).
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from reference import REPO, reference_path

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"
VISITS = 64  # KaTrain's max_visits here: every reply must bring 90% of them
MAX_TIME = 8.0  # KaTrain's default max_time, sent as overrideSettings.maxTime
READY_TIMEOUT = 900  # the warm-up compiles two boards: minutes on a busy 2-core CPU


def _import_katrain():
    """KaTrain's engine and game-tree modules, headless: Kivy without a window, without
    reading pytest's arguments, logging to the console or files or taking over stderr,
    its settings folder in a temporary folder rather than the user's home."""
    os.environ.update(KIVY_NO_WINDOW="1", KIVY_NO_ARGS="1", KIVY_NO_CONSOLELOG="1")
    os.environ.update(KIVY_NO_FILELOG="1", KIVY_LOG_MODE="PYTHON")  # stderr left alone
    if "KIVY_HOME" not in os.environ:
        os.environ["KIVY_HOME"] = tempfile.mkdtemp(prefix="gojax-kivy-")
        atexit.register(shutil.rmtree, os.environ["KIVY_HOME"], ignore_errors=True)
    try:  # KaTrain and its own dependencies (Kivy, pysgf), as it imports them
        import pysgf
        from katrain.core import engine, game_node
    except ImportError as err:  # not installed, or Kivy without its libraries here
        pytest.skip(f"KaTrain cannot be imported ({err}): pip install -e '.[katrain]'")
    return engine, game_node, pysgf


class _App:
    """What KaTrain's engine asks of its app: ``log(message, level)`` (the engine's
    stderr lines among them), and a call for its error popups."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.errors: list[tuple] = []
        self.lock = threading.Lock()

    def log(self, message, level=None) -> None:
        with self.lock:
            self.lines.append(str(message))

    def __call__(self, *popup) -> None:
        self.errors.append(popup)

    def said(self, text: str) -> list[str]:
        with self.lock:
            return [line for line in self.lines if text in line]


def _gojax_executable(folder: Path) -> str:
    """The ``gojax`` command of this environment (its entry point beside the Python that
    runs the tests), else a script that runs the repository's command line."""
    installed = Path(sys.executable).with_name("gojax")
    if installed.is_file():
        return str(installed)
    script = folder / "gojax"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m eval.cli "$@"\n')
    script.chmod(0o755)
    return str(script)


def _wait(condition, timeout: float, what: str, app: _App) -> float:
    """Seconds until ``condition()``; fails naming ``what`` and the engine's last lines."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            tail = "\n".join(app.lines[-15:])
            pytest.fail(f"{what}: not within {timeout:.0f} s; KaTrain's log ends:\n{tail}")
        time.sleep(0.02)
    return time.monotonic() - start


def _start(tmp_path: Path):
    """KaTrain's engine, its "local" back end starting gojax, and KaTrain's modules."""
    engine_module, game_node, pysgf = _import_katrain()
    app = _App()
    config = {
        "backend": "local",
        "katago": _gojax_executable(tmp_path),
        "model": str(reference_path("katago", MODEL)),
        "config": "katrain/KataGo/analysis_config.cfg",  # KaTrain's own, as it ships
        "max_visits": VISITS,
        "fast_visits": 16,
        "max_time": MAX_TIME,
        "wide_root_noise": 0.04,
        "_enable_ownership": True,
        "allow_recovery": False,
    }
    return engine_module.KataGoEngine(app, config), app, (game_node, pysgf)


def _position(modules, size: int, moves: list[str], komi: float = 6.5, rules: str = "japanese"):
    """A KaTrain game node: the game of ``moves`` (GTP vertices, Black first)."""
    game_node, pysgf = modules
    node = game_node.GameNode(properties={"SZ": size, "KM": komi, "RU": rules})
    for i, vertex in enumerate(moves):
        move = pysgf.Move.from_gtp(vertex, player="BW"[i % 2])
        node = game_node.GameNode(parent=node, move=move)
    return node


def test_katrain_drives_gojax_analysis(tmp_path):
    """One engine for every check (a second would compile everything again): started by
    KaTrain's local back end; the first query of each board size after the ready line;
    pondering until stopped."""
    engine, app, modules = _start(tmp_path)
    try:
        seconds = _wait(lambda: app.said("; ready"), READY_TIMEOUT, "gojax's ready line", app)
        print(f"gojax analysis ready in {seconds:.1f} s", file=sys.stderr)
        _check_command_line(engine, app)
        for size, moves in ((19, ["Q16", "D4", "Q3", "D16", "R5", "C10"]),
                            (9, ["E5", "C4", "G4", "D6"])):  # fmt: skip
            _check_first_query(engine, app, _position(modules, size, moves), size, moves)
        _check_other_first_queries(engine, app, modules)
        _check_pondering(engine, app, _position(modules, 9, ["E5", "C4", "G4"]))
        assert engine.check_alive() and not app.errors
    finally:
        engine.shutdown(finish=False)


def _check_command_line(engine, app: _App) -> None:
    """The local back end's command: KataGo's, single dashes, KaTrain's bundled config;
    gojax read the config and compiled ahead the boards it implies."""
    exe, *argv = engine.command
    assert Path(exe).name == "gojax"
    assert argv[:3] == ["analysis", "-model", str(reference_path("katago", MODEL))]
    assert argv[3] == "-config" and argv[4].endswith(os.path.join("KataGo", "analysis_config.cfg"))
    assert argv[5:] == ["-override-config", f"homeDataDir={os.path.expanduser('~/.katrain')}"]
    (ignored,) = app.said(": ignored ")
    assert "numSearchThreads" in ignored and "homeDataDir" in ignored
    (warm,) = app.said("compiling the search of up to 500 visits")  # the config's maxVisits
    assert "19x19 japanese, 9x9 japanese (from the KataGo config" in warm
    (ready,) = app.said("; ready")
    assert "katago search (wide root noise 0.04), 500 visits by default" in ready


def _check_first_query(engine, app: _App, node, size: int, moves: list[str]) -> None:
    """KaTrain's analysis of a position (its max_visits, maxTime 8, ownership, policy,
    a report a second), the first of its board size after the ready line: at least 90%
    of its visits (a compile inside maxTime leaves a handful), parsed by KaTrain's game
    tree."""
    node.analyze(engine)
    seconds = _wait(lambda: node.analysis_complete, 120, f"the {size}x{size} analysis", app)
    print(f"{size}x{size}: {node.root_visits} visits in {seconds:.2f} s", file=sys.stderr)
    assert node.root_visits >= 0.9 * VISITS, (node.root_visits, seconds)
    # KaTrain's candidate moves with their points lost, the ownership and policy maps of
    # the board, win rate and score (from Black's side).
    candidates = node.candidate_moves
    assert candidates and candidates[0]["order"] == 0
    for move in candidates:
        assert move["move"] not in moves and math.isfinite(move["pointsLost"])
    assert sum(move["visits"] for move in candidates) <= node.root_visits
    assert len(node.ownership) == size * size and len(node.policy) == size * size + 1
    assert 0.0 <= node.winrate <= 1.0 and math.isfinite(node.score)


def _check_other_first_queries(engine, app: _App, modules) -> None:
    """The first queries of kinds the warm-up (19x19 and 9x9, japanese) did not name, on
    positions not seen before (no network cache): other rules, a move refined as KaTrain
    refines one (no ownership), a loaded game's positions asked at once. Each gets 90% of
    its visits within maxTime: none compiles a search of its own."""
    moves = ["R16", "C4", "Q4", "D17", "C14", "R10", "K10"]
    for size, rules in ((19, "chinese"), (9, "aga"), (19, "tromp-taylor")):
        node = _position(modules, size, moves[:3] if size == 19 else ["C3", "G7"], rules=rules)
        node.analyze(engine)
        _wait(lambda n=node: n.analysis_complete, 120, f"a {rules} analysis", app)
        assert node.root_visits >= 0.9 * VISITS, (rules, node.root_visits)
    refined, replies = _position(modules, 19, moves[:5]), []
    engine.request_analysis(
        refined.parent,
        callback=lambda result, partial: None if partial else replies.append(result),
        next_move=refined.move,  # KaTrain's query then asks for no ownership
    )
    _wait(lambda: bool(replies), 120, "a refined move", app)
    assert replies[0]["rootInfo"]["visits"] >= 0.9 * VISITS and "ownership" not in replies[0]
    game = [_position(modules, 19, moves[:i]) for i in range(1, 7)]
    for node in game:
        node.analyze(engine)
    _wait(lambda: all(n.analysis_complete for n in game), 120, "a game's positions", app)
    assert min(n.root_visits for n in game) >= 0.9 * VISITS


def _check_pondering(engine, app: _App, node) -> None:
    """KaTrain's continuous analysis (10,000,000 visits, a report every 0.25 s, no
    maxTime): reports with ever more visits until KaTrain stops it; the final reply then
    comes within a part of the search, with the visits reached."""
    replies: list[tuple[bool, int]] = []
    keep = node.set_analysis

    def record(analysis, refine_move, additional_moves, region, partial_result):
        replies.append((partial_result, analysis["rootInfo"]["visits"]))
        keep(analysis, refine_move, additional_moves, region, partial_result)

    node.set_analysis = record  # KaTrain's callback calls it through the node
    node.analyze(engine, ponder=True, time_limit=False, priority=100)  # its "ponder" mode
    # The first ponder of a board size compiles its tree (65,536 nodes) before reporting.
    _wait(lambda: len(replies) >= 4, 600, "four reports while pondering", app)
    engine.stop_pondering()
    stopped = time.monotonic()
    _wait(engine.is_idle, 60, "the final reply after the terminate", app)
    assert time.monotonic() - stopped < 30
    reports = [visits for partial, visits in replies if partial]
    finals = [visits for partial, visits in replies if not partial]
    assert len(reports) >= 4 and all(a < b for a, b in zip(reports, reports[1:], strict=False))
    assert len(finals) == 1 and reports[-1] <= finals[0] < 10_000_000
    assert node.analysis_complete and node.root_visits == finals[0]
