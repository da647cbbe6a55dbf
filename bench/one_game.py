"""One game's search at K leaves per step (virtual loss) against the network alone.

A GTP engine or an analysis of one position searches one tree: one leaf per step
evaluates the network at batch 1, where it runs far below its rate at larger
batches. ``SearchConfig.leaf_batch = K`` descends the tree K times per step under
virtual loss and evaluates the K leaves in one call (``gojax._virtual_loss``).

For a 19x19 and a 9x9 position (a reference KataGo self-play game cut at move
``--move``; ``sgf/katago-19x19`` / ``katago-9x9`` under ``$GOJAX_REFERENCE``, default
``../shared/reference``), with the reference KataGo net (g170 b6c96), random symmetry
as KataGo: the search's visits/s at each K (``--kind``, default KataGo's PUCT, no root
noise), the net alone at batch 1 and at batch K (the same evaluator on K copies of the
position), and the ratio of the search's visits/s to the net's evaluations/s at batch
K: the share of the batched net's rate the search keeps (1 would be a search loop that
costs nothing and a virtual loss that never drops a descent). With ``--katago PATH``,
KataGo's own engine beside it: same net, position, rules, komi and visits,
``--katago-threads`` search threads (``bench/_katago_gtp.py``), and the ratio of our
best K's visits/s to KataGo's. All timed in one run, interleaved
(``bench/_timing.py``), after compiling; the best of ``--repeats``. The last line is
JSON.

    python bench/one_game.py                     # 19x19 and 9x9, K = 1 4 8 16 32
    python bench/one_game.py --katago ./katago   # and KataGo's engine, 2 threads
    python bench/one_game.py --sizes 9 --visits 800 --leaf-batches 1 8
    python bench/one_game.py --smoke             # tiny visits: proves the script
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from _katago_gtp import KataGoGTP
from _timing import best_times, cpu_name  # bench/_timing.py (scripts run with bench/ on the path)

import gojax
from gojax import sgf
from gojax.atomic import write_atomic
from gojax.katago_model import load_model
from gojax.search import SearchConfig, katago_evaluator, search

REFERENCE = Path(
    os.environ.get("GOJAX_REFERENCE", Path(__file__).resolve().parents[2] / "shared" / "reference")
)
MODEL = REFERENCE / "katago" / "g170-b6c96-s175395328-d26788732.bin.gz"


def game_position(size: int, move: int) -> tuple[gojax.GoState, list[tuple[str, int]], float]:
    """The first reference game of ``size``, after ``move`` moves (fewer if it ends first):
    ``[1]`` states (Tromp-Taylor rules, the game's komi), the moves played and the komi."""
    folder = REFERENCE / "sgf" / f"katago-{size}x{size}"
    paths = sorted(folder.glob("*.sgf"))
    if not paths:
        raise SystemExit(f"no reference games in {folder}: set GOJAX_REFERENCE")
    record = sgf.load(paths[0])
    state = gojax.new_game(size, komi=record.komi, rules="tromp-taylor")
    play = jax.jit(gojax.play)
    played = []
    for colour, action in record.moves[:move]:
        if (colour == "B") != (int(state.to_play) == gojax.BLACK):
            break  # two moves in a row by one player: stop before it
        state = play(state, action)
        played.append((colour, action))
    return jax.tree.map(lambda x: x[None], state), played, record.komi


def measure(model, size: int, args) -> tuple[list[dict], dict | None]:
    """One row per K: the search's visits/s and the net alone at batch 1 and K; and
    KataGo's engine on the same search (None without ``--katago``)."""
    states, played, komi = game_position(size, args.move)
    net = model.module(dtype=jnp.float32)
    version, variables = model.output_spec, model.variables
    visits = args.visits[size]

    @functools.partial(jax.jit, static_argnames="config")
    def searched(variables, states, key, config):
        evaluator = katago_evaluator((net, variables, version))
        return search(evaluator, states, key, config).root_value

    @jax.jit
    def net_alone(variables, states, key):
        return katago_evaluator((net, variables, version))(states, key)[1]

    def copies(n):
        return jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), states)

    key = jax.random.key(0)
    calls = {"net 1": (net_alone, (variables, copies(1), key))}
    for k in args.leaf_batches:
        config = SearchConfig(
            kind=args.kind,
            num_simulations=visits,
            leaf_batch=k,
            virtual_loss=args.virtual_loss,
            dirichlet_fraction=0.0,
            temperature_moves=0,
        )
        calls[f"search {k}"] = (
            functools.partial(searched, config=config),
            (variables, states, key),
        )
        calls.setdefault(f"net {k}", (net_alone, (variables, copies(k), key)))
    katago = None
    if args.katago:
        katago = KataGoGTP(args.katago, MODEL, visits=visits, threads=args.katago_threads)
        colour = katago.set_position(size, komi, played)
        calls["katago"] = (katago.search, (colour,))
    print(f"  {size}x{size}: compiling and timing {len(calls)} programs ...", flush=True)
    try:
        t = best_times(calls, repeats=args.repeats)
    finally:
        if katago:
            katago.close()
    rows = []
    for k in args.leaf_batches:
        search_rate = visits / t[f"search {k}"]
        net_rate = k / t[f"net {k}"]
        rows.append(
            {
                "size": size,
                "move": int(states.move_number[0]),
                "visits": visits,
                "leaf_batch": k,
                "search_visits_per_s": search_rate,
                "net_evals_per_s_batch_1": 1 / t["net 1"],
                "net_evals_per_s_batch_k": net_rate,
                "search_over_net_k": search_rate / net_rate,
            }
        )
    base = rows[0]["search_visits_per_s"]
    for row in rows:
        row["speedup_over_first"] = row["search_visits_per_s"] / base
    if katago is None:
        return rows, None
    best = max(rows, key=lambda row: row["search_visits_per_s"])
    peer = {
        "size": size,
        "visits": visits,
        "engine": katago.version,
        "threads": katago.threads,
        "katago_visits_per_s": visits / t["katago"],
        "best_leaf_batch": best["leaf_batch"],
        "ours_visits_per_s": best["search_visits_per_s"],
    }
    peer["ours_over_katago"] = peer["ours_visits_per_s"] / peer["katago_visits_per_s"]
    return rows, peer


def table(rows: list[dict]) -> str:
    """``measure``'s rows as a text table, a line per size and K."""
    lines = [
        f"{'size':>5} {'visits':>6} {'K':>3} {'search v/s':>11} {'x K=first':>9} "
        f"{'net@1 ev/s':>11} {'net@K ev/s':>11} {'search/net@K':>12}"
    ]
    for row in rows:
        lines.append(
            f"{row['size']:5d} {row['visits']:6d} {row['leaf_batch']:3d} "
            f"{row['search_visits_per_s']:11.1f} {row['speedup_over_first']:9.2f} "
            f"{row['net_evals_per_s_batch_1']:11.1f} {row['net_evals_per_s_batch_k']:11.1f} "
            f"{row['search_over_net_k']:12.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[19, 9])
    parser.add_argument("--leaf-batches", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    parser.add_argument(
        "--visits", type=int, help="visits per search (default 128 on 19x19, 256 on 9x9)"
    )
    parser.add_argument(
        "--move", type=int, default=40, help="moves of the game before the position"
    )
    parser.add_argument("--kind", default="katago", choices=["katago", "puct", "gumbel"])
    parser.add_argument("--virtual-loss", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--katago", help="a KataGo executable to time beside ours (GTP)")
    parser.add_argument("--katago-threads", type=int, default=2, help="its numSearchThreads")
    parser.add_argument("--json", help="also write the JSON summary to this file")
    parser.add_argument("--smoke", action="store_true", help="tiny visits, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.leaf_batches, args.repeats = [9], [1, 4], 1
        args.visits = 8
    args.visits = {size: args.visits or (128 if size == 19 else 256) for size in args.sizes}
    if not MODEL.exists():
        raise SystemExit(f"reference net not found at {MODEL}: set GOJAX_REFERENCE")
    model = load_model(MODEL)
    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), {platform.node()}")
    print(f"cpu: {cpu_name()}")
    print(f"{args.kind} search of one game, b6c96, virtual loss {args.virtual_loss}")
    rows, peers = [], []
    for size in args.sizes:
        size_rows, peer = measure(model, size, args)
        rows.extend(size_rows)
        peers.extend([peer] if peer else [])
    print(table(rows))
    for peer in peers:
        print(
            f"{peer['size']}x{peer['size']} {peer['visits']} visits: KataGo {peer['engine']} "
            f"{peer['threads']} threads {peer['katago_visits_per_s']:.1f} v/s; ours at "
            f"K={peer['best_leaf_batch']} {peer['ours_visits_per_s']:.1f} v/s: "
            f"{peer['ours_over_katago']:.2f}x KataGo"
        )
    summary = {"bench": "one_game", "kind": args.kind, "rows": rows}
    if peers:
        summary["katago"] = peers
    if args.json:
        write_atomic(Path(args.json), json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
