"""Analysis engine throughput: a batch of queries against one query at a time, same run.

Each query is a position of a KataGo self-play game (the reference SGF games,
cut at a random move), analysed by ``eval.analysis.AnalysisEngine`` with the
reference KataGo net (g170 b6c96) at 1 visit (the network alone) and at 64
visits (PUCT search), symmetry random as in KataGo. Two ways to ask:

* batched: all ``--queries`` lines handed to the engine at once, as ``gojax
  analysis`` reads them when a client writes queries without waiting (the
  engine replays, searches and evaluates them in batches of ``--batch-size``);
* one at a time: one line, wait for the reply, the next line (a client that
  waits, or a GTP-style engine); ``--single`` queries estimate its rate;
* move by move: one game, one query per move with the whole move list so far,
  each waiting for the reply (a GUI or KaTrain following a game), with the
  engine's replay cache (``--replay-cache``, the default: each query replays
  only its new move) and without it (each replays the whole game).

The first two ways ask for unrelated positions, with the replay cache off
(each query replays its game from the start). A last table (``--no-ownership``
leaves it out) times the batched queries again asking for KataGo's searched
ownership (``includeOwnership``, the mean over the tree, which makes the search
carry a map per node) and for everything (its stdev and every move's), against
the same queries asking for none. Another (``--no-stream`` leaves it out)
times the batched queries as a stream of stdin sees them: every search then
runs in parts of about half a second (so that a ``terminate`` can stop it),
against at once.

Both are timed after compilation (a first run of the same shapes); positions
are counted per second of wall time, host work (parsing, replies as JSON)
included. The last line is JSON.

    python bench/analysis.py                         # 1000 queries, 9x9, 1 and 64 visits
    python bench/analysis.py --size 19 --queries 256 --visits 1 --batch-size 16 256
    python bench/analysis.py --smoke                 # seconds, for CI
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for eval

import gojax  # noqa: E402
from eval.analysis import AnalysisEngine  # noqa: E402
from gojax import sgf  # noqa: E402
from gojax.atomic import write_atomic
from gojax.katago_model import load_model  # noqa: E402

REFERENCE = Path(
    os.environ.get("GOJAX_REFERENCE", Path(__file__).resolve().parents[2] / "shared" / "reference")
)
MODEL = REFERENCE / "katago" / "g170-b6c96-s175395328-d26788732.bin.gz"


def query_lines(
    size: int, count: int, visits: int, seed: int, extra: dict | None = None
) -> list[str]:
    """``count`` queries: positions cut at a random move from the reference games (KataGo
    self-play, ``sgf/katago-9x9`` or ``katago-19x19``), one position each, with the
    fields of ``extra`` added to each."""
    folder = REFERENCE / "sgf" / f"katago-{size}x{size}"
    records = [sgf.load(path) for path in sorted(folder.glob("*.sgf"))]
    if not records:
        raise SystemExit(f"no reference games in {folder}: set GOJAX_REFERENCE")
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(count):
        record = records[i % len(records)]
        cut = int(rng.integers(1, len(record.moves) + 1))
        moves = [[colour, gojax.action_to_gtp(a, size)] for colour, a in record.moves[:cut]]
        lines.append(
            json.dumps(
                {
                    "id": f"q{i}",
                    "moves": moves,
                    "rules": "tromp-taylor",
                    "komi": record.komi,
                    "boardXSize": size,
                    "boardYSize": size,
                    "maxVisits": visits,
                }
                | (extra or {})
            )
        )
    return lines


def check(replies: list[dict], count: int) -> None:
    bad = [r for r in replies if "error" in r or "moveInfos" not in r]
    if bad or len(replies) != count:
        raise SystemExit(f"unexpected replies: {bad[:2]} ({len(replies)} for {count} queries)")


def batched_seconds(engine: AnalysisEngine, lines: list[str], incoming=None) -> float:
    """Seconds to answer all ``lines`` handed over at once, warm (a first pass compiles
    every shape the timed one meets: batch sizes, replay segments); with ``incoming``
    as a stream (``serve``) answers them: every reply emitted as made, the reader
    looked at between parts."""
    emitted: list[dict] = []
    stream = () if incoming is None else (emitted.append, incoming)
    engine.handle(lines, *stream)
    emitted.clear()
    start = time.perf_counter()
    replies = engine.handle(lines, *stream) + emitted
    seconds = time.perf_counter() - start
    check(replies, len(lines))
    return seconds


def single_seconds(engine: AnalysisEngine, lines: list[str], count: int) -> float:
    """Seconds per query when each waits for the previous one's reply, warm."""
    for line in lines[:count]:  # compiles the single-query shapes
        engine.handle([line])
    start = time.perf_counter()
    for line in lines[:count]:
        check(engine.handle([line]), 1)
    return (time.perf_counter() - start) / count


def game_lines(size: int, count: int, visits: int) -> list[str]:
    """``count`` queries following one reference game move by move from its middle:
    the moves up to ``n``, for ``count`` successive ``n``."""
    folder = REFERENCE / "sgf" / f"katago-{size}x{size}"
    record = max(
        (sgf.load(path) for path in sorted(folder.glob("*.sgf"))), key=lambda r: len(r.moves)
    )
    moves = [[colour, gojax.action_to_gtp(a, size)] for colour, a in record.moves]
    first = max(1, len(moves) // 2 - count // 2)
    common = {"rules": "tromp-taylor", "komi": record.komi, "maxVisits": visits}
    return [
        json.dumps(
            common | {"id": f"m{n}", "moves": moves[:n], "boardXSize": size, "boardYSize": size}
        )
        for n in range(first, first + count)
    ]


def stepping_seconds(engine: AnalysisEngine, lines: list[str]) -> float:
    """Seconds per query of a game followed move by move (each waits for its reply), warm;
    the engine's replay cache starts empty."""
    for line in lines:  # compiles the shapes of a whole replay and of one more move
        engine.handle([line])
    engine.handle([json.dumps({"id": "clear", "action": "clear_cache"})])
    start = time.perf_counter()
    for line in lines:
        check(engine.handle([line]), 1)
    return (time.perf_counter() - start) / len(lines)


# What a query asks for ownership, from the lightest to the heaviest: KataGo's searched
# ownership is a mean over the tree, so asking for it makes the search carry a [P] map per
# node, and asking for each move's makes the nodes' maps go to the host.
OWNERSHIP_ASKS = {
    "none": {},
    "includeOwnership": {"includeOwnership": True},
    "+Stdev, moves": {
        "includeOwnership": True,
        "includeOwnershipStdev": True,
        "includeMovesOwnership": True,
        "includeMovesOwnershipStdev": True,
    },
}


def ownership_rows(engine: AnalysisEngine, args: argparse.Namespace) -> list[dict]:
    """Batched positions/s of the same queries asking for no ownership, for the tree's
    ownership, and for everything (stdevs, every move's): the cost of the tree mean."""
    print()
    print(f"ownership asked for, batched ({args.queries} positions, batch {engine.batch_size})")
    names = list(OWNERSHIP_ASKS)
    header = f"{'visits':>6}  " + "  ".join(f"{n:>16}" for n in names) + f"  {'ratio':>6}"
    print(header)
    print("-" * len(header))
    out = []
    for visits in args.visits:
        # "none" repeats a query set of the first table, timed again here so that the
        # three columns share the machine's state and their ratio means something.
        rates = {
            name: args.queries
            / batched_seconds(engine, query_lines(args.size, args.queries, visits, visits, ask))
            for name, ask in OWNERSHIP_ASKS.items()
        }
        ratio = rates[names[-1]] / rates["none"]
        out.append(
            {
                "size": args.size,
                "visits": visits,
                "batch_size": engine.batch_size,
                "queries": args.queries,
                "positions_per_second": {n: round(r, 2) for n, r in rates.items()},
                "ratio": round(ratio, 2),
            }
        )
        cells = "  ".join(f"{rates[n]:>16.1f}" for n in names)
        print(f"{visits:>6}  {cells}  {ratio:>5.2f}x", flush=True)
    return out


class _NothingArrives:
    """A stream's reader (``AnalysisEngine.handle``'s ``incoming``) that has no line
    ready: the engine searches in parts to look for terminates, and finds none."""

    live = True  # lines may arrive: the engine looks for them between parts

    def take_ready(self) -> list[str]:
        return []

    def give_back(self, lines: list[str]) -> None:
        assert not lines


def stream_rows(engine: AnalysisEngine, args: argparse.Namespace) -> list[dict]:
    """Batched positions/s of the same queries searched at once and as read from a
    stream (in parts, looking for terminates between them): the cost of the parts."""
    print()
    print(f"read from a stream, batched ({args.queries} positions, batch {engine.batch_size})")
    header = f"{'visits':>6}  {'at once':>9}  {'in parts':>9}  {'ratio':>6}"
    print(header)
    print("-" * len(header))
    out = []
    for visits in [v for v in args.visits if v > 1]:  # one visit: no search to part
        lines = query_lines(args.size, args.queries, visits, seed=visits)
        whole = args.queries / batched_seconds(engine, lines)
        parted = args.queries / batched_seconds(engine, lines, _NothingArrives())
        ratio = parted / whole
        out.append(
            {
                "size": args.size,
                "visits": visits,
                "batch_size": engine.batch_size,
                "queries": args.queries,
                "at_once_positions_per_second": round(whole, 2),
                "in_parts_positions_per_second": round(parted, 2),
                "ratio": round(ratio, 2),
            }
        )
        print(f"{visits:>6}  {whole:>9.1f}  {parted:>9.1f}  {ratio:>5.2f}x", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--single", type=int, default=16, help="queries asked one at a time")
    parser.add_argument("--size", type=int, choices=(9, 19), default=9)
    parser.add_argument("--visits", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--batch-size", type=int, nargs="+", default=[256], help="one row each")
    parser.add_argument("--symmetry", default="random", help="0..7, random or average")
    parser.add_argument("--model", default=str(MODEL))
    parser.add_argument(
        "--ownership",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time queries asking for ownership (batched, the largest batch size)",
    )
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the batched queries as read from a stream (searches in parts)",
    )
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.queries, args.single, args.visits, args.batch_size = 16, 2, [1, 4], [8]
    symmetry = int(args.symmetry) if args.symmetry.isdigit() else args.symmetry
    model = load_model(args.model)
    engines = {
        b: AnalysisEngine(model, batch_size=b, symmetry=symmetry, replay_cache=0)
        for b in args.batch_size
    }

    device = jax.devices()[0].device_kind
    print(f"{model.name} on {device} ({platform.processor() or 'cpu'}), symmetry {symmetry}")
    print(
        f"{args.queries} positions from {args.size}x{args.size} KataGo games; "
        f"{args.single} asked one at a time"
    )
    header = (
        f"{'visits':>6}  {'batch':>5}  {'batched pos/s':>13}  {'one at a time':>13}  {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for visits in args.visits:
        lines = query_lines(args.size, args.queries, visits, seed=visits)
        single_rate = 1.0 / single_seconds(engines[args.batch_size[0]], lines, args.single)
        for batch, engine in engines.items():
            rate = args.queries / batched_seconds(engine, lines)
            ratio = rate / single_rate
            rows.append(
                {
                    "size": args.size,
                    "visits": visits,
                    "batch_size": batch,
                    "queries": args.queries,
                    "batched_positions_per_second": round(rate, 2),
                    "single_positions_per_second": round(single_rate, 2),
                    "ratio": round(ratio, 2),
                }
            )
            print(
                f"{visits:>6}  {batch:>5}  {rate:>13.1f}  {single_rate:>13.1f}  {ratio:>5.1f}x",
                flush=True,
            )
    print()
    header = f"{'visits':>6}  {'move by move, cached':>20}  {'replaying':>9}  {'ratio':>6}"
    print(f"one {args.size}x{args.size} game followed move by move ({args.single * 2} queries)")
    print(header)
    print("-" * len(header))
    stepping = []
    for visits in args.visits:
        lines = game_lines(args.size, args.single * 2, visits)
        rates = {}
        for cache in (1024, 0):
            engine = AnalysisEngine(model, batch_size=1, symmetry=symmetry, replay_cache=cache)
            rates[cache] = 1.0 / stepping_seconds(engine, lines)
        ratio = rates[1024] / rates[0]
        stepping.append(
            {
                "size": args.size,
                "visits": visits,
                "queries": len(lines),
                "cached_positions_per_second": round(rates[1024], 2),
                "replaying_positions_per_second": round(rates[0], 2),
                "ratio": round(ratio, 2),
            }
        )
        print(f"{visits:>6}  {rates[1024]:>20.1f}  {rates[0]:>9.1f}  {ratio:>5.2f}x", flush=True)
    ownership = ownership_rows(engines[args.batch_size[-1]], args) if args.ownership else []
    streamed = stream_rows(engines[args.batch_size[-1]], args) if args.stream else []
    line = json.dumps(
        {
            "device": device,
            "symmetry": symmetry,
            "rows": rows,
            "move_by_move": stepping,
            "ownership": ownership,
            "stream": streamed,
        }
    )
    if args.json:
        write_atomic(args.json, line + "\n")
    print(line)


if __name__ == "__main__":
    main()
