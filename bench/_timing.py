"""Timing shared by the benchmark scripts."""

from __future__ import annotations

import os
import platform
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


def best_times(calls: dict, *, repeats: int, warmup_s: float = 0.3, min_s: float = 0.0) -> dict:
    """:func:`best_time` of several calls, timed in turn within each repeat.

    ``calls`` maps a name to ``(fn, args)``. Interleaving puts every call under
    the same machine conditions (a shared host's load drifts over seconds), so
    ratios between them are steadier than those of back-to-back best times.
    ``min_s``: keep repeating until the calls have run that many seconds too.
    """
    return {name: min(times) for name, times in call_times(calls, repeats, warmup_s, min_s).items()}


def call_times(calls: dict, repeats: int, warmup_s: float = 0.3, min_s: float = 0.0) -> dict:
    """Every timed run of :func:`best_times` (seconds, a list for each name)."""
    for fn, args in calls.values():
        jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        for fn, args in calls.values():
            jax.block_until_ready(fn(*args))
    times = {name: [] for name in calls}
    start = time.perf_counter()
    while len(times[next(iter(calls))]) < repeats or time.perf_counter() - start < min_s:
        for name, (fn, args) in calls.items():
            begin = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - begin)
    return times


def cpu_name() -> str:
    """The CPU model, its family/model numbers and the cores the process sees.

    The numbers matter where the name does not: the project's 2-core machines all
    call themselves "AMD EPYC", yet a float32 matmul runs at ~200 GFLOP/s on
    some (family 25, Zen 4: 512-bit FMAs done in two halves) and 400-490 on
    others, and a network's fraction of that rate moves with it.
    """
    name, ids = platform.processor() or platform.machine(), {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model") and key not in ids:
                    ids[key] = value.strip()
                if len(ids) == 3:
                    break
    except OSError:
        pass
    name = ids.get("model name", name)
    if "cpu family" in ids:
        name += f" (family {ids['cpu family']}, model {ids.get('model', '?')})"
    return f"{name}, {os.cpu_count()} cores"
