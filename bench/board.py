"""Board throughput: random-legal-move playouts, gojax against pgx, in one run.

Method (pgx's own): every game of a vmapped batch picks a uniformly random
legal move (``jax.random.categorical`` over log of the legal mask; with
``--sampler index`` both engines draw the same distribution from one random
number per game, which takes the sampler's cost, ~1.7 ms a step at 19x19
B=256 on a CPU, out of both sides), plays it,
and starts over from the initial position when it ends, so the batch always
plays full games. The whole loop of ``steps`` moves is one jitted scan; a
step is one move in one game, so steps/s = batch × moves / seconds.

Both engines reset from a precomputed initial state, and both compute their
legal mask every step (pgx inside ``step``, gojax in ``legal_moves``). gojax
is compared under ``chinese`` (simple ko, suicide forbidden: what pgx's legal
mask enforces) and also reported under ``tromp-taylor`` (positional superko
in the mask, which pgx only checks after the fact).

    python bench/board.py            # the full table (a few minutes on 2 CPU cores)
    python bench/board.py --smoke    # tiny sizes, seconds

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import gojax
from gojax.atomic import write_atomic


def _nbytes(tree) -> int:
    return int(sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(tree)))


def _batched(state, batch: int):
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), state)


def _reset_where(done, fresh, state):
    return jax.tree.map(
        lambda f, s: jnp.where(done.reshape(done.shape + (1,) * (s.ndim - 1)), f, s), fresh, state
    )


def _categorical(key, legal):
    """pgx's own sampler: a categorical over the log of the legal mask (B x A random draws)."""
    return jax.random.categorical(key, jnp.log(legal.astype(jnp.float32)), axis=-1)


def _index(key, legal):
    """The same distribution from one uniform draw per game: the k-th legal move."""
    count = jnp.sum(legal, axis=-1)
    k = jnp.floor(jax.random.uniform(key, count.shape) * count).astype(jnp.int32)
    return jnp.argmax(jnp.cumsum(legal, axis=-1) > k[:, None], axis=-1)


SAMPLERS = {"categorical": _categorical, "index": _index}
_random_actions = _categorical


def gojax_engine(size: int, rules: str, batch: int):
    single = gojax.new_game(size, rules=rules)
    fresh = _batched(single, batch)

    def step(state, key):
        legal = jax.vmap(gojax.legal_moves)(state)
        state = jax.vmap(gojax.play)(state, _random_actions(key, legal))
        return _reset_where(state.terminated, fresh, state)

    return fresh, step, _nbytes(single)


def pgx_engine(size: int, batch: int):
    import pgx

    env = pgx.make(f"go_{size}x{size}")
    single = env.init(jax.random.key(0))
    fresh = _batched(single, batch)

    def step(state, key):
        state = jax.vmap(env.step)(state, _random_actions(key, state.legal_action_mask))
        return _reset_where(state.terminated, fresh, state)

    return fresh, step, _nbytes(single)


def steps_per_second(fresh, step, batch: int, moves: int, repeats: int) -> float:
    @jax.jit
    def run(state, key):
        return jax.lax.scan(lambda s, k: (step(s, k), None), state, jax.random.split(key, moves))[0]

    state = jax.block_until_ready(run(fresh, jax.random.key(1)))  # compile, and leave the opening
    best = float("inf")
    for repeat in range(repeats):
        start = time.perf_counter()
        state = jax.block_until_ready(run(state, jax.random.key(2 + repeat)))
        best = min(best, time.perf_counter() - start)
    return batch * moves / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny batches, a few seconds")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is kept")
    parser.add_argument("--no-pgx", action="store_true", help="skip the pgx comparison")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument(
        "--sampler",
        choices=sorted(SAMPLERS),
        default="categorical",
        help="how both engines draw the uniformly random legal move: pgx's categorical "
        "(B x A random numbers per step) or index (one per game); same distribution",
    )
    args = parser.parse_args()
    global _random_actions
    _random_actions = SAMPLERS[args.sampler]

    if args.smoke:
        grid = [(9, 1, 16), (9, 64, 16), (19, 8, 8)]
    else:
        grid = [
            (9, 1, 1024),
            (9, 64, 256),
            (9, 1024, 64),
            (19, 1, 512),
            (19, 64, 128),
            (19, 256, 48),
        ]
    use_pgx = not args.no_pgx
    if use_pgx:
        try:
            import pgx  # noqa: F401
        except ImportError:
            print("pgx is not installed (pip install pgx): reporting gojax alone")
            use_pgx = False

    device = jax.devices()[0]
    print(
        f"gojax board benchmark: {device.platform} {device.device_kind}, "
        f"{platform.processor()}; sampler {args.sampler}"
    )
    header = (
        f"{'board':>6} {'B':>5} | {'chinese':>12} {'tromp-taylor':>13} "
        f"{'pgx':>11} | {'chinese/pgx':>11} {'t-t/pgx':>8}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for size, batch, moves in grid:
        row = {"size": size, "batch": batch, "moves": moves}
        for rules in ("chinese", "tromp-taylor"):
            fresh, step, nbytes = gojax_engine(size, rules, batch)
            row[rules] = steps_per_second(fresh, step, batch, moves, args.repeats)
            row[f"bytes_{rules}"] = nbytes
        if use_pgx:
            fresh, step, nbytes = pgx_engine(size, batch)
            row["pgx"] = steps_per_second(fresh, step, batch, moves, args.repeats)
            row["bytes_pgx"] = nbytes
            row["ratio_chinese"] = row["chinese"] / row["pgx"]
            row["ratio_tromp_taylor"] = row["tromp-taylor"] / row["pgx"]
        rows.append(row)
        pgx_text = f"{row['pgx']:>11,.0f}" if use_pgx else f"{'-':>11}"
        ratio_text = (
            f"{row['ratio_chinese']:>10.1f}x {row['ratio_tromp_taylor']:>7.1f}x"
            if use_pgx
            else f"{'-':>11} {'-':>8}"
        )
        print(
            f"{size:>4}x{size:<1} {batch:>5} | {row['chinese']:>12,.0f} "
            f"{row['tromp-taylor']:>13,.0f} {pgx_text} | {ratio_text}",
            flush=True,
        )
    print("(steps/s: one move in one game; best of", args.repeats, "runs)")
    print()
    print("bytes per state:")
    for size in sorted({size for size, _, _ in grid}):
        row = next(r for r in rows if r["size"] == size)
        pgx_bytes = f", pgx {row['bytes_pgx']:,}" if use_pgx else ""
        print(
            f"  {size}x{size}: gojax chinese {row['bytes_chinese']:,}, "
            f"tromp-taylor {row['bytes_tromp-taylor']:,}{pgx_bytes}"
        )
    summary = {
        "benchmark": "board",
        "device": f"{device.platform}:{device.device_kind}",
        "jax": jax.__version__,
        "sampler": args.sampler,
        "rows": rows,
    }
    line = json.dumps(summary)
    if args.json:
        write_atomic(args.json, line + "\n")
    print(line)


if __name__ == "__main__":
    main()
