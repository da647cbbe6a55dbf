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
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best
