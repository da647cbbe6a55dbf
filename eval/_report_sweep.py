"""``gojax report`` for sweeps (``<name>/results.json``): the cells' win rates, the
Bradley-Terry ratings, a comparison of runs' nets under each search, and the plots
``gojax sweep`` draws.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval._report_markdown import _percent, format_number, markdown_table
from eval._report_results import Rendered, ResultEntry, _read_json


def _sweep_markdown(rows: list[dict[str, Any]], ratings) -> str:
    if any(str(r["opponent"]).startswith("run:") for r in rows):
        return _run_comparison_markdown(rows, ratings)
    headers = ["agent", "opponent", "games", "wins", "draws", "losses", "win rate (95% CI)"]
    headers += ["as Black", "as White"]
    body = [
        [
            r["agent"],
            r["opponent_name"],
            str(r["games"]),
            format_number(r["wins"]),
            format_number(r["draws"]),
            format_number(r["losses"]),
            _win_rate_text(r),
            format_number(r.get("win_rate_as_black")),
            format_number(r.get("win_rate_as_white")),
        ]
        for r in rows
    ]
    parts = [markdown_table(headers, body, right=[False, False] + [True] * 7)]
    if ratings:
        ordered = sorted(ratings.items(), key=lambda kv: -kv[1].elo)
        table = [
            [str(rank), name, f"{r.elo + 0.0:.1f}", f"{r.lo + 0.0:.1f} to {r.hi + 0.0:.1f}"]
            + [str(r.games)]
            for rank, (name, r) in enumerate(ordered, start=1)
        ]
        headers = ["rank", "agent", "Elo", "95% interval", "games"]
        parts.append(
            "Bradley-Terry ratings:\n\n"
            + markdown_table(headers, table, right=[True, False, True, True, True])
        )
    return "\n\n".join(parts)


# ``eval.sweep.agent_name``: ``[label/]step1200/puct16/c1.25[/lam0.5[+policy]]`` -> net
# ``label/step1200``, search (the rollout policy's name is the sweep's, one for all).
_AGENT_NAME = re.compile(
    r"^(?P<net>(?:.+/)?step\d+)/(?P<kind>[a-z]+)(?P<sims>\d+)/c(?P<c>[\d.e+-]+)"
    r"(?:/lam(?P<lam>[\d.e+-]+)(?:\+.+)?)?$"
)


def _search_label(
    kind: str, simulations: Any, c_puct: Any, several_c: bool, rollout_lambda: Any = 0.0
) -> str:
    label = f"{kind} {simulations}"
    label = f"{label}, c {format_number(c_puct)}" if several_c else label
    return f"{label}, λ {format_number(float(rollout_lambda))}" if rollout_lambda else label


def _row_search(row: dict[str, Any], several_c: bool) -> str:
    """A sweep cell's search, as the run comparison labels it."""
    lam = row.get("rollout_lambda", 0.0)  # absent from sweeps recorded before it was an axis
    return _search_label(row["kind"], row["simulations"], row["c_puct"], several_c, lam)


def _run_comparison_markdown(rows: list[dict[str, Any]], ratings) -> str:
    """A sweep with ``run:`` opponents: nets x searches, as ratings and as head-to-head results.

    Every cell has both nets searching alike, so a column compares nets under one search.
    """
    several_c = len({r["c_puct"] for r in rows}) > 1
    searches = list(dict.fromkeys(_row_search(r, several_c) for r in rows))
    parts = []
    if ratings:
        elo: dict[str, dict[str, Any]] = {}
        fixed = []
        for name, rating in ratings.items():
            match = _AGENT_NAME.match(name)
            if match is None:
                fixed.append((name, rating))
                continue
            lam = match["lam"] or 0.0
            search = _search_label(match["kind"], match["sims"], match["c"], several_c, lam)
            elo.setdefault(match["net"], {})[search] = rating
        nets = sorted(elo, key=lambda net: -max(r.elo for r in elo[net].values()))
        body = [
            [net] + [_elo_text(elo[net][s]) if s in elo[net] else "–" for s in searches]
            for net in nets
        ]
        anchors = ", ".join(
            f"{name} {_elo_text(r)}" for name, r in sorted(fixed, key=lambda kv: -kv[1].elo)
        )
        parts.append(
            "Bradley-Terry Elo (95% interval) of each net under each search, one pool:\n\n"
            + markdown_table(["net"] + searches, body)
            + (f"\n\nFixed opponents: {anchors}." if anchors else "")
        )
    agents = list(dict.fromkeys(_net_of(r["agent"]) for r in rows))
    opponents = list(dict.fromkeys(_net_of(r["opponent_name"]) for r in rows))
    games = sorted({r["games"] for r in rows})
    played = {
        (_net_of(r["agent"]), _row_search(r, several_c), _net_of(r["opponent_name"])): r
        for r in rows
    }
    for agent in agents:
        body = []
        for search in searches:
            line = [search]
            for opponent in opponents:
                r = played.get((agent, search, opponent))
                line.append("–" if r is None else _win_rate_text(r))
            body.append(line)
        parts.append(
            f"Win rate (95% interval) of {agent} against each opponent, both sides searching "
            f"alike ({'/'.join(map(str, games))} games a cell):\n\n"
            + markdown_table(["search"] + opponents, body)
        )
    return "\n\n".join(parts)


def _elo_text(rating) -> str:
    # round() to an int: a rating of -0.3 prints 0, never "-0".
    return f"{round(rating.elo)} ({round(rating.lo)} to {round(rating.hi)})"


def _win_rate_text(row: dict[str, Any]) -> str:
    """``70.0% (10.0%–90.0%)``: a cell's win rate and its 95% interval."""
    return f"{_percent(row['win_rate'])} ({_percent(row['ci95_lo'])}–{_percent(row['ci95_hi'])})"


def _net_of(name: str) -> str:
    """The net part of an agent name (``gumbel_n2/step1200``), or a fixed opponent's name."""
    match = _AGENT_NAME.match(name)
    return match["net"] if match else name


def _render_sweep(entry: ResultEntry) -> Rendered:
    from eval.ratings import Rating, plot_ratings
    from eval.sweep import plot_elo_vs_compute, plot_elo_vs_step, plot_win_rates

    data = _read_json(entry.path / "results.json")
    rows = list(data["cells"])
    ratings = data.get("ratings")
    ratings = None if ratings is None else {k: Rating(**v) for k, v in ratings.items()}
    plots: dict[str, Callable[[Path], None]] = {}
    # The plots `gojax sweep` draws, on the same conditions.
    if rows:
        plots[f"{entry.name}_win_rate_vs_simulations.png"] = lambda p: plot_win_rates(rows, p)
    if rows and ratings is not None:
        title = "Sweep ratings (95% intervals)"
        plots[f"{entry.name}_ratings.png"] = lambda p: plot_ratings(ratings, p, title=title)
        if len({r["step"] for r in rows}) > 1:
            name = f"{entry.name}_elo_vs_step.png"
            plots[name] = lambda p: plot_elo_vs_step(rows, ratings, p)
        compute = {
            int(k): v
            for k, v in data.get("compute", {}).items()
            if "cpu_seconds" in v and "games" in v
        }
        if len(compute) > 1:
            name = f"{entry.name}_elo_vs_compute.png"
            plots[name] = lambda p: plot_elo_vs_compute(rows, ratings, compute, p)
    return Rendered(entry, _sweep_markdown(rows, ratings), plots)
