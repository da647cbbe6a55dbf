"""A game reviewed forward, then backward, by the GTP engine: the network cache's speed-up.

A reviewer steps through a game and back (Lizzie, KaTrain, Sabaki). Going back, each
position was already searched on the way forward, and its tree's positions evaluated;
the network cache (``SearchPlayer(nn_cache=)``, ``gojax gtp --nn-cache``, KataGo's
``nnCacheSizePowerOfTwo``) gives them back without the network. For the first
reference KataGo game of each size (``sgf/katago-<N>x<N>`` under ``$GOJAX_REFERENCE``),
the engine with the reference net (g170 b6c96, KataGo's PUCT, random symmetry, as
``gojax gtp``) searches ``--visits`` at each of its first ``--moves`` positions going
forward (the tree kept from move to move, as in a game), then at each going back
(``undo``: a fresh tree each time): seconds each way, their ratio, and the cache's hits
on the way back. The same review without the cache is the baseline. Compiling is done
before the clock starts (the engine warms up as ``gojax gtp`` does). The last line is
JSON.

    python bench/review.py                        # 9x9 and 19x19, 100 moves, 64 visits
    python bench/review.py --sizes 9 --moves 20   # a shorter one
    python bench/review.py --smoke                # seconds: proves the script
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
from _timing import cpu_name  # bench/_timing.py (scripts run with bench/ on the path)

from eval.engine import Engine
from eval.players import SearchPlayer
from gojax import sgf
from gojax.atomic import write_atomic
from gojax.katago_model import load_model

REFERENCE = Path(
    os.environ.get("GOJAX_REFERENCE", Path(__file__).resolve().parents[2] / "shared" / "reference")
)
MODEL = REFERENCE / "katago" / "g170-b6c96-s175395328-d26788732.bin.gz"


def game_moves(size: int, count: int) -> list[tuple[int, int]]:
    """``(colour, action)`` of the first ``count`` moves of the first reference game of
    ``size`` (fewer if it ends, or one player moves twice, first)."""
    folder = REFERENCE / "sgf" / f"katago-{size}x{size}"
    paths = sorted(folder.glob("*.sgf"))
    if not paths:
        raise SystemExit(f"no reference games in {folder}: set GOJAX_REFERENCE")
    moves = []
    for colour, action in sgf.load(paths[0]).moves[:count]:
        number = 1 if colour == "B" else -1
        if moves and moves[-1][0] == number:
            break
        moves.append((number, action))
    return moves


def review(model, size: int, moves, visits: int, nn_cache: int) -> dict:
    """Seconds forward and backward through ``moves`` at ``visits``, and cache counts."""
    player = SearchPlayer(model, search="katago", visits=visits, nn_cache=nn_cache)
    engine = Engine(player, size=size, komi=7.0, rules="chinese", visits=visits)

    def there_and_back(moves) -> tuple[float, float, dict | None]:
        start = time.perf_counter()
        for colour, action in moves:
            engine.analyze(colour)
            engine.play(colour, action)
        middle = time.perf_counter()
        ahead = player.cache_stats()  # outside the clocks: a device read
        turn = time.perf_counter()
        for colour, _ in reversed(moves):
            engine.undo()
            engine.analyze(colour)
        return middle - start, time.perf_counter() - turn, ahead

    there_and_back(moves[:2])  # compiles what a review runs (a kept tree, undo, ...)
    player.clear_cache()  # the rehearsal's positions are not to be found again
    engine.clear()
    forward, backward, ahead = there_and_back(moves)
    after = player.cache_stats()
    row = {
        "size": size,
        "moves": len(moves),
        "visits": visits,
        "nn_cache": nn_cache,
        "forward_s": forward,
        "backward_s": backward,
        "forward_over_backward": forward / backward,
    }
    if after is not None:
        row["forward_hit_rate"] = ahead["hits"] / max(ahead["lookups"], 1)
        back = after["lookups"] - ahead["lookups"]
        row["backward_hit_rate"] = (after["hits"] - ahead["hits"]) / max(back, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[9, 19])
    parser.add_argument("--moves", type=int, default=100)
    parser.add_argument("--visits", type=int, default=64)
    parser.add_argument("--nn-cache", type=int, default=15, help="the table's size, log2")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument("--smoke", action="store_true", help="tiny game and visits")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.moves, args.visits, args.nn_cache = [9], 4, 4, 8
    if not MODEL.exists():
        raise SystemExit(f"reference net not found at {MODEL}: set GOJAX_REFERENCE")
    model = load_model(MODEL)
    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), {platform.node()}")
    print(f"cpu: {cpu_name()}")
    rows = []
    for size in args.sizes:
        moves = game_moves(size, args.moves)
        for nn_cache in (args.nn_cache, 0):
            print(f"  {size}x{size}, nn cache {nn_cache}: reviewing ...", flush=True)
            rows.append(review(model, size, moves, args.visits, nn_cache))
    print(
        f"{'size':>5} {'moves':>5} {'visits':>6} {'cache':>5} {'forward s':>9} "
        f"{'backward s':>10} {'fwd/bwd':>7} {'hits back':>9}"
    )
    for row in rows:
        hits = row.get("backward_hit_rate")
        print(
            f"{row['size']:5d} {row['moves']:5d} {row['visits']:6d} {row['nn_cache']:5d} "
            f"{row['forward_s']:9.2f} {row['backward_s']:10.2f} "
            f"{row['forward_over_backward']:7.2f} {'-' if hits is None else f'{hits:.0%}':>9}"
        )
    summary = {"bench": "review", "rows": rows}
    if args.json:
        write_atomic(Path(args.json), json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
