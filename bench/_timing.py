"""Timing shared by the benchmark scripts."""

from __future__ import annotations

import time

import jax


def best_time(fn, *args, repeats: int) -> float:
    """Best wall time of ``fn(*args)`` over ``repeats`` runs, after one compile run."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best
