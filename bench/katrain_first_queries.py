"""KaTrain's first queries: ``gojax analysis`` started and asked by KaTrain's own engine code.

KaTrain's ``KataGoEngine`` (PyPI ``katrain``, headless) starts gojax through its "local"
back end, as it starts KataGo: ``gojax analysis -model M -config
<KaTrain's analysis_config.cfg> -override-config homeDataDir=...``. From that config
gojax compiles ahead KaTrain's boards (19x19 and 9x9, japanese rules, the config's 500
visits) before its ready line. Then, as a user opening a game would, KaTrain asks for one
19x19 position and one 9x9 position (``--visits``, ``maxTime`` ``--max-time``, ownership,
policy, a report a second), each the first of its size; with ``--ponder``, its
continuous analysis of a 19x19 position (10,000,000 visits, a report every 0.25 s) until
the first report, then stopped; with ``--more``, the first queries of kinds the warm-up
did not name (each on a position of its own, so that no network cache answers it):
other rules (19x19 chinese, 9x9 aga), a move refined without ownership (KaTrain's
``next_move`` queries), 10 positions of a game asked at once (a game loaded), 1,000
visits (twice the config's ``maxVisits``).

Each start is timed from KaTrain starting the process to gojax's ready line. The first
start finds the persistent compilation cache (``GOJAX_CACHE``) empty ("cold"), the
next ones filled by the first ("warm"). ``--no-warm-up`` adds ``gojaxWarmUp = none`` to
KaTrain's config: the first queries then compile their programs inside their ``maxTime``,
as before gojax compiled ahead. The last line is JSON.

    python bench/katrain_first_queries.py            # a cold and a warm start
    python bench/katrain_first_queries.py --ponder --more --json results/bench_katrain.json
    python bench/katrain_first_queries.py --no-warm-up --starts 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("GOJAX_REFERENCE", REPO.parent / "shared" / "reference"))
MODEL = REFERENCE / "katago" / "g170-b6c96-s175395328-d26788732.bin.gz"
POSITIONS = {  # KaTrain's first queries: a few moves into a game
    19: ["Q16", "D4", "Q3", "D16", "R5", "C10"],
    9: ["E5", "C4", "G4", "D6"],
}


class App:
    """What KaTrain's engine asks of its app: a log (gojax's stderr lines among it)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def log(self, message, level=None) -> None:
        with self.lock:
            self.lines.append(str(message))

    def __call__(self, *popup) -> None:  # an error popup
        self.log(f"popup: {popup}")

    def said(self, text: str) -> list[str]:
        with self.lock:
            return [line for line in self.lines if text in line]


def wait(condition, timeout: float, what: str, app: App) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            tail = "\n".join(app.lines[-10:])
            raise SystemExit(f"{what}: not within {timeout:.0f} s; KaTrain's log ends:\n{tail}")
        time.sleep(0.01)
    return time.monotonic() - start


def one_start(args: argparse.Namespace, label: str, modules) -> dict:
    """Start gojax through KaTrain, ask its first queries, stop it: the row of this start."""
    engine_module, game_node, pysgf = modules
    app = App()
    config = {
        "backend": "local",
        "katago": args.gojax,
        "model": args.model,
        "config": args.config,
        "max_visits": args.visits,
        "fast_visits": args.visits,
        "max_time": args.max_time,
        "wide_root_noise": 0.04,
        "_enable_ownership": True,
        "allow_recovery": False,
    }
    engine = engine_module.KataGoEngine(app, config)
    try:
        startup = wait(lambda: app.said("; ready"), 3600, "gojax's ready line", app)
        compiled = re.search(r"compiled in (\d+) s", app.said("; ready")[0])
        row = {"start": label, "startup_s": round(startup, 1)}
        row["warm_up_s"] = int(compiled.group(1)) if compiled else None

        def position(size: int, moves: list[str], rules: str = "japanese"):
            node = game_node.GameNode(properties={"SZ": size, "KM": 6.5, "RU": rules})
            for i, vertex in enumerate(moves):
                move = pysgf.Move.from_gtp(vertex, player="BW"[i % 2])
                node = game_node.GameNode(parent=node, move=move)
            return node

        for size, moves in POSITIONS.items():
            node = position(size, moves)
            node.analyze(engine)
            seconds = wait(lambda n=node: n.analysis_complete, 600, f"{size}x{size}", app)
            row[f"visits_{size}"] = node.root_visits
            row[f"seconds_{size}"] = round(seconds, 2)
        if args.more:
            row.update(more_queries(engine, position, app))
        if args.ponder:
            node = position(19, POSITIONS[19][:-1])
            node.analyze(engine, ponder=True, time_limit=False, priority=100)
            seconds = wait(lambda: node.analysis_exists, 3600, "a ponder report", app)
            row["ponder_first_report_s"] = round(seconds, 1)
            engine.stop_pondering()
            wait(engine.is_idle, 600, "the ponder's end", app)
        return row
    finally:
        engine.shutdown(finish=False)


# Moves of the --more queries' positions: none met before (the network cache is empty).
OTHER_19 = ["R16", "C4", "Q4", "D17", "C14", "R10", "K10", "K4", "F3", "O17"]


def more_queries(engine, position, app: App) -> dict:
    """The first queries of kinds the warm-up did not name (the module's docstring):
    visits and seconds of each, by KaTrain's engine code."""
    row = {}

    def timed(name: str, nodes: list, ask, done=None, visits=None) -> None:
        """Ask ``ask(node)`` of each node, wait until ``done()`` (default: each node's
        analysis complete); its seconds and ``visits()`` (default: the fewest a node got)."""
        start = time.monotonic()
        for node in nodes:
            ask(node)
        wait(done or (lambda: all(n.analysis_complete for n in nodes)), 600, name, app)
        row[f"{name}_s"] = round(time.monotonic() - start, 2)
        row[f"{name}_visits"] = visits() if visits else min(n.root_visits for n in nodes)

    for name, size, moves, rules in (
        ("chinese_19", 19, OTHER_19[:3], "chinese"),
        ("aga_9", 9, ["C3", "G7", "E5"], "aga"),
    ):
        timed(name, [position(size, moves, rules)], lambda n: n.analyze(engine))
    # A move refined, as KaTrain asks for one: the move played, no ownership.
    refined = position(19, OTHER_19[:5])
    replies: list[dict] = []

    def refine(node) -> None:
        def keep(result, partial):
            if not partial:
                replies.append(result)

        engine.request_analysis(node.parent, callback=keep, next_move=node.move)

    timed(
        "no_ownership_19",
        [refined],
        refine,
        done=lambda: bool(replies),
        visits=lambda: replies[0]["rootInfo"]["visits"],
    )
    game = [position(19, OTHER_19[:i]) for i in range(5, 11)]
    game += [position(19, ["D4", *OTHER_19[1:i]]) for i in range(3, 7)]
    timed("game_19", game, lambda n: n.analyze(engine))
    more = [position(19, ["Q16", "D16", "Q3"])]
    timed("visits_1000_19", more, lambda n: n.analyze(engine, visits=1000))
    return row


def run_starts(args: argparse.Namespace, home: str) -> tuple[str, list[dict]]:
    """KaTrain's version and a row a start, KaTrain's and gojax's files in ``home``."""
    # Headless Kivy, its settings in ``home``; gojax's compilation cache empty for the
    # first start (KaTrain's engine starts gojax with this environment).
    os.environ.update(KIVY_NO_WINDOW="1", KIVY_NO_ARGS="1", KIVY_NO_CONSOLELOG="1")
    os.environ.update(KIVY_NO_FILELOG="1", KIVY_LOG_MODE="PYTHON", KIVY_HOME=home)
    os.environ["GOJAX_CACHE"] = os.path.join(home, "xla")
    try:
        import pysgf  # KaTrain's own SGF moves
        from katrain.core import engine, game_node
        from katrain.core.constants import VERSION
        from katrain.core.utils import find_package_resource
    except ImportError as err:
        raise SystemExit(f"KaTrain is not installed ({err}): pip install -e '.[katrain]'") from None
    if args.no_warm_up:
        args.config = os.path.join(home, "no_warm_up.cfg")
        shipped = find_package_resource(args.config_shipped)
        Path(args.config).write_text(f"@include {shipped}\ngojaxWarmUp = none\n")
    rows = []
    for start in range(args.starts):
        row = one_start(args, "cold" if start == 0 else "warm", (engine, game_node, pysgf))
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        rows.append(row)
    return VERSION, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--visits", type=int, default=64, help="KaTrain's max_visits")
    parser.add_argument("--max-time", type=float, default=8.0, help="KaTrain's max_time")
    parser.add_argument("--starts", type=int, default=2, help="the first cold, the others warm")
    parser.add_argument("--ponder", action="store_true", help="also a 19x19 ponder's first report")
    parser.add_argument("--more", action="store_true", help="other rules, ownership, batches")
    parser.add_argument("--model", default=str(MODEL))
    parser.add_argument(
        "--gojax",
        default=shutil.which("gojax") or str(Path(sys.executable).with_name("gojax")),
        help="the gojax command KaTrain starts (default: the one on PATH)",
    )
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="KaTrain's config with gojaxWarmUp = none: the first queries compile",
    )
    parser.add_argument("--json", help="also write the JSON summary to this file")
    args = parser.parse_args()
    args.config_shipped = "katrain/KataGo/analysis_config.cfg"  # KaTrain's own config
    args.config = args.config_shipped
    if not Path(args.gojax).is_file():
        raise SystemExit(f"no gojax command at {args.gojax}: pip install -e . or pass --gojax")
    home = tempfile.mkdtemp(prefix="bench-katrain-")
    try:
        version, rows = run_starts(args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    summary = {
        "katrain": version,
        "visits": args.visits,
        "max_time": args.max_time,
        "warm_up": not args.no_warm_up,
        "starts": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
