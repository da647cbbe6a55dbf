"""A sweep's summaries: the results table and files, the ratings, the plots.

``write_summaries`` writes ``results.csv``, ``results.json``, ``ratings.txt`` and the
plots (win rate against simulations, Elo against training step and against
compute) from the finished cells' rows; ``_ratings`` fits the Bradley-Terry
ratings of the pool. Kept apart from ``eval.sweep`` (which re-exports these names)
because the reports redraw the same plots from recorded results.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

from gojax.atomic import write_atomic

CSV_FIELDS = (
    "cell",
    "step",
    "kind",
    "simulations",
    "c_puct",
    "rollout_lambda",
    "agent",
    "opponent",
    "opponent_name",
    "games",
    "wins",
    "draws",
    "losses",
    "win_rate",
    "ci95_lo",
    "ci95_hi",
    "win_rate_as_black",
    "win_rate_as_white",
    "mean_length",
    "resignations",
    "seconds",
    "games_per_second",
)


def _ratings(rows: list[dict[str, Any]], config) -> dict | None:
    """Bradley-Terry ratings of every agent and opponent in ``rows``, or None if not rateable."""
    from eval.ratings import PairCounts, fit_ratings

    # A checkpoint against itself with the same search says nothing about ratings.
    rated = [r for r in rows if r["agent"] != r["opponent_name"]]
    if not rated:
        return None
    counts = [
        PairCounts(r["agent"], r["opponent_name"], r["wins"], r["draws"], r["losses"])
        for r in rated
    ]
    names = {r["agent"] for r in rated} | {r["opponent_name"] for r in rated}
    anchor = config.ratings.anchor
    anchor = anchor if anchor in names else rated[0]["opponent_name"]
    try:
        return fit_ratings(counts, anchor=anchor, anchor_elo=config.ratings.anchor_elo)
    except ValueError:
        return None  # e.g. disjoint pools: the cells still stand on their own


def write_summaries(
    workdir: Path,
    rows: list[dict[str, Any]],
    ratings,
    *,
    plots: bool,
    compute: dict[int, dict[str, Any]] | None = None,
) -> None:
    """``results.csv``, ``results.json``, ``ratings.txt`` and the plots (all atomic).

    ``compute``: each step's training counters (``train.continuation.checkpoint_counters``);
    where they hold self-play games and CPU seconds, ``elo_vs_compute.png`` too."""
    from eval.ratings import plot_ratings, ratings_table

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row[k] for k in CSV_FIELDS})
    write_atomic(workdir / "results.csv", buffer.getvalue())
    payload = {
        "cells": rows,
        "ratings": None
        if ratings is None
        else {k: dataclasses.asdict(v) for k, v in ratings.items()},
        **({"compute": {str(k): v for k, v in compute.items()}} if compute else {}),
    }
    write_atomic(workdir / "results.json", json.dumps(payload, indent=2) + "\n")
    if ratings is not None:
        write_atomic(workdir / "ratings.txt", ratings_table(ratings) + "\n")
    if not plots or not rows:
        return
    plot_win_rates(rows, workdir / "win_rate_vs_simulations.png")
    if ratings is not None:
        plot_ratings(ratings, workdir / "ratings.png", title="Sweep ratings (95% intervals)")
        if len({r["step"] for r in rows}) > 1:
            plot_elo_vs_step(rows, ratings, workdir / "elo_vs_step.png")
        counted = {s: c for s, c in (compute or {}).items() if "cpu_seconds" in c and "games" in c}
        if len(counted) > 1:
            plot_elo_vs_compute(rows, ratings, counted, workdir / "elo_vs_compute.png")


def plot_win_rates(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    opponents = list(dict.fromkeys(r["opponent"] for r in rows))
    fig, axes = plt.subplots(
        1, len(opponents), figsize=(4.5 * len(opponents), 3.8), squeeze=False, sharey=True
    )
    for ax, opponent in zip(axes[0], opponents, strict=True):
        series: dict[tuple, list[dict]] = {}
        for r in rows:
            if r["opponent"] == opponent:
                key = (r["step"], r["kind"], r["c_puct"], r.get("rollout_lambda", 0.0))
                series.setdefault(key, []).append(r)
        for (step, kind, c_puct, lam), points in series.items():
            points.sort(key=lambda r: r["simulations"])
            x = [r["simulations"] for r in points]
            y = [r["win_rate"] for r in points]
            err = [
                [r["win_rate"] - r["ci95_lo"] for r in points],
                [r["ci95_hi"] - r["win_rate"] for r in points],
            ]
            label = f"step {step}, {kind}, c {c_puct:g}" + (f", λ {lam:g}" if lam else "")
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ticks = sorted({r["simulations"] for r in rows})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(0, 1)
        ax.set_title(f"vs {opponent}")
        ax.set_xlabel("simulations")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0][0].set_ylabel("win rate (95% interval)")
    fig.tight_layout()
    save_figure(fig, path)


def plot_elo_vs_step(rows: list[dict[str, Any]], ratings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    series: dict[tuple, dict[int, Any]] = {}
    for r in rows:
        rating = ratings.get(r["agent"])
        if rating is not None:
            key = (r["kind"], r["simulations"], r["c_puct"], r.get("rollout_lambda", 0.0))
            series.setdefault(key, {})[r["step"]] = rating
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (kind, sims, c_puct, lam), by_step in series.items():
        steps = sorted(by_step)
        elo = [by_step[s].elo for s in steps]
        err = [
            [by_step[s].elo - by_step[s].lo for s in steps],
            [by_step[s].hi - by_step[s].elo for s in steps],
        ]
        label = f"{kind} {sims} sims, c {c_puct:g}" + (f", λ {lam:g}" if lam else "")
        ax.errorbar(steps, elo, yerr=err, marker="o", capsize=3, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel("Elo (95% interval)")
    ax.set_title("Strength over training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)


def plot_elo_vs_compute(
    rows: list[dict[str, Any]], ratings, compute: dict[int, dict[str, Any]], path: Path
) -> None:
    """Elo of the run's nets against the compute behind them: self-play games (left) and
    CPU-hours (right), the fixed opponents' ratings as dashed levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    series: dict[tuple, dict[int, Any]] = {}
    for r in rows:
        rating = ratings.get(r["agent"])
        if rating is not None and r["step"] in compute:
            key = (r["kind"], r["simulations"], r["c_puct"], r.get("rollout_lambda", 0.0))
            series.setdefault(key, {})[r["step"]] = rating
    agents = {r["agent"] for r in rows}
    anchors = {
        r["opponent_name"]: ratings[r["opponent_name"]]
        for r in rows
        if r["opponent_name"] in ratings and r["opponent_name"] not in agents
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, (field, scale, label) in zip(
        axes,
        (("games", 1.0, "self-play games"), ("cpu_seconds", 1 / 3600, "CPU-hours")),
        strict=True,
    ):
        for (kind, sims, c_puct, lam), by_step in series.items():
            steps = sorted(by_step)
            x = [float(compute[s][field]) * scale for s in steps]
            err = [
                [by_step[s].elo - by_step[s].lo for s in steps],
                [by_step[s].hi - by_step[s].elo for s in steps],
            ]
            name = f"{kind} {sims} sims, c {c_puct:g}" + (f", λ {lam:g}" if lam else "")
            ax.errorbar(
                x, [by_step[s].elo for s in steps], yerr=err, marker="o", capsize=3, label=name
            )
        for i, (name, rating) in enumerate(sorted(anchors.items(), key=lambda kv: kv[1].elo)):
            ax.axhline(rating.elo, ls="--", lw=1, color=f"C{(i + 3) % 10}", label=name)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Elo (95% interval)")
    axes[0].legend(fontsize="small")
    fig.suptitle("Strength against the compute behind it")
    fig.tight_layout()
    save_figure(fig, path)


def format_results(rows: list[dict[str, Any]]) -> str:
    """The cells as a table: agent, opponent, games, win rate and its 95% interval."""
    width = max([5] + [len(r["agent"]) for r in rows])
    owidth = max([8] + [len(r["opponent_name"]) for r in rows])
    lines = [f"{'agent':<{width}}  {'opponent':<{owidth}}  {'games':>5}  {'win rate':>8}  95% CI"]
    for r in rows:
        lines.append(
            f"{r['agent']:<{width}}  {r['opponent_name']:<{owidth}}  {r['games']:>5}  "
            f"{r['win_rate']:>8.3f}  [{r['ci95_lo']:.3f}, {r['ci95_hi']:.3f}]"
        )
    return "\n".join(lines)
