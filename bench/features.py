"""Input encodings of the three net families, positions per second, in one run.

    python bench/features.py            # 9x9 and 19x19, 64 positions a call (~1 min, 2 cores)
    python bench/features.py --smoke    # 9x9, 8 positions, a smoke run

Positions come from random games (``bench/net.py``'s: legal moves, no pass
while a move exists), half the board's points played. Each encoder is the one
the learner and self-play use (``train.model.encode``): AlphaGo Zero's 17
planes, AlphaGo's 48 + 1 planes (with their ladder searches) and KataGo's
22 + 19 features (with theirs); the ratio column is against KataGo's
features, timed in the same run.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from bench._timing import best_times, cpu_name  # noqa: E402
from bench.net import random_positions  # noqa: E402
from gojax._xla_flags import fast_cpu_compiles  # noqa: E402
from train import model as model_lib  # noqa: E402

ENCODERS = (("agz", "agz_tiny"), ("alphago", "alphago_tiny"), ("katago", "tiny"))


def run(sizes, count: int, repeats: int) -> list[dict]:
    rows = []
    for size in sizes:
        states = random_positions(size, count, size * size // 2, seed=size)
        calls = {}
        for encoder, preset in ENCODERS:
            spec = model_lib.ModelSpec(preset)
            calls[encoder] = (jax.jit(functools.partial(model_lib.encode, spec)), (states,))
        seconds = best_times(calls, repeats=repeats)
        for encoder, _ in ENCODERS:
            rows.append(
                {
                    "size": size,
                    "batch": count,
                    "encoder": encoder,
                    "positions_per_s": count / seconds[encoder],
                    "vs_katago": seconds["katago"] / seconds[encoder],
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--smoke", action="store_true", help="9x9, 8 positions, compiled at XLA level 0"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed calls; the best is kept")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    if args.smoke:
        fast_cpu_compiles(os.environ)  # before the first computation starts XLA
    sizes, count = ((9,), 8) if args.smoke else ((9, 19), 64)
    rows = run(sizes, count, max(1, args.repeats))
    print(f"# input encodings, {cpu_name()}, jax {jax.__version__}, {jax.default_backend()}")
    print(f"{'size':>5} {'batch':>5} {'encoder':>8} {'positions/s':>12} {'x KataGo':>9}")
    for r in rows:
        print(
            f"{r['size']:>5} {r['batch']:>5} {r['encoder']:>8} {r['positions_per_s']:>12.0f} "
            f"{r['vs_katago']:>9.2f}"
        )
    summary = {"benchmark": "features", "cpu": cpu_name(), "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    print(json.dumps(summary))  # the last line: the summary, for scripts
    return 0


if __name__ == "__main__":
    sys.exit(main())
