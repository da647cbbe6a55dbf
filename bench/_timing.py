"""Timing shared by the benchmark scripts."""

from __future__ import annotations

import time

import jax


def best_time(fn, *args, repeats: int, warmup_s: float = 0.3) -> float:
    """Best wall time of ``fn(*args)`` over ``repeats`` runs, after one compile run and
    ``warmup_s`` seconds of untimed runs.

    The warm-up matters for short calls on a CPU: after an idle spell (a compile,
    a pause) XLA's worker threads and the cores take tens of milliseconds to come
    back to speed, and a b6c96 batch-1 pass timed straight away ran at 60% of its
    steady rate.
    """
    return best_times({"call": (fn, args)}, repeats=repeats, warmup_s=warmup_s)["call"]


def best_times(calls: dict, *, repeats: int, warmup_s: float = 0.3) -> dict:
    """:func:`best_time` of several calls, timed in turn within each repeat.

    ``calls`` maps a name to ``(fn, args)``. Interleaving puts every call under
    the same machine conditions (a shared host's load drifts over seconds), so
    ratios between them are steadier than those of back-to-back best times.
    """
    for fn, args in calls.values():
        jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        for fn, args in calls.values():
            jax.block_until_ready(fn(*args))
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, (fn, args) in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[name] = min(best[name], time.perf_counter() - start)
    return best
