"""``gojax report``: regenerate the tables and plots of the docs from recorded results.

Recorded results live in one folder (``results/`` by default), one entry per
result, its kind known from its name:

=============================  ============  ===========================================
entry                          kind          plots (in the figures folder)
=============================  ============  ===========================================
``value_mse*.json``            value-mse     ``<name>.png``
``bench_*.json``               bench         none
``<name>/results.json``        sweep         ``<name>_win_rate_vs_simulations.png``,
                                             ``<name>_ratings.png``,
                                             ``<name>_elo_vs_step.png``,
                                             ``<name>_elo_vs_compute.png``
``<name>/metrics.jsonl``       training run  ``<name>_learning_curve.png``
``<name>/*/metrics.jsonl``     runs          ``<name>_curves.png``
``<name>/*/match.json``        strength      ``<name>.png``
``<name>/<run>/``              alphago-sl,   ``<name>.png``
                               -pg, -value,
                               -rollout,
                               -balance
=============================  ============  ===========================================

The last are folders of runs of one of AlphaGo's training stages
(``eval.report_alphago``).

``<name>`` is the file's stem or the folder's name. Each result is rendered as
markdown with the functions that made it in the first place (the value-mse
comparison's numbers and plot, the training loop's learning curve, the
sweep's plots and ratings) and written between the markers
``<!-- report:<name> -->`` and ``<!-- /report:<name> -->`` of every markdown
file that has them; text outside the markers is left alone. A marker is
recognised alone on its line and outside fenced code blocks.

``--check`` writes nothing: it says which blocks would change (and which
plots are missing) and exits 1 if any. Plots are not compared byte for byte
(PNG bytes change with matplotlib's version and fonts); their tables are.

>>> report = generate_report("results", ["BENCHMARKS.md"], "docs/figures")  # doctest: +SKIP
>>> report.ok                                                               # doctest: +SKIP
True
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from gojax.atomic import write_atomic

__all__ = [
    "Rendered",
    "Report",
    "ResultEntry",
    "bench_markdown",
    "find_results",
    "format_number",
    "generate_report",
    "markdown_table",
    "register",
    "render_result",
    "replace_blocks",
]

# A marker alone on its line: <!-- report:NAME --> opens a block, <!-- /report:NAME --> closes it.
_MARKER = re.compile(r"<!--\s*(/?)report:([A-Za-z0-9_.-]+)\s*-->")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_FENCE = ("```", "~~~")
# Value-mse plots leave out buckets with fewer positions, as `gojax value-mse` does by default.
VALUE_MSE_MIN_POSITIONS = 10
# Rows of the training-run table: the first record, the last, and this many in all.
TRAINING_ROWS = 5
_MATCH_MANIFEST = "match.json"  # eval.match.MANIFEST_FILE (not imported: it pulls in jax)


# ---------------------------------------------------------------------------- markdown


def format_number(x: Any) -> str:
    """A JSON value as a table cell: ints with separators, floats to 3 significant digits.

    >>> [format_number(v) for v in (1234567, 0.45454, 12.345, 4223.7, None, True)]
    ['1,234,567', '0.455', '12.3', '4,224', '–', 'true']
    """
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"
    if isinstance(x, str):
        return x.replace("|", "\\|")
    if isinstance(x, list) and all(not isinstance(v, dict | list) for v in x):
        return ", ".join(format_number(v) for v in x)
    return json.dumps(x, ensure_ascii=False).replace("|", "\\|")


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, right: Sequence[bool] | None = None
) -> str:
    """A pipe table; ``right[i]`` right-aligns column ``i`` (default: every column but the first).

    >>> print(markdown_table(["a", "b"], [["x", "1"]]))
    | a | b |
    |---|---:|
    | x | 1 |
    """
    if right is None:
        right = [i > 0 for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


# ---------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class ResultEntry:
    """One recorded result: its marker name, its kind and where it is."""

    name: str
    # "value-mse", "bench", "sweep", "training", "runs", "strength" or "alphago-<stage>"
    kind: str
    path: Path  # a file, or the run's / sweep's folder


@dataclasses.dataclass
class Rendered:
    """A result rendered: the markdown of its block and the plots to draw.

    ``plots`` maps each figure's file name to a function that draws it at a given path.
    """

    entry: ResultEntry
    markdown: str
    plots: dict[str, Callable[[Path], None]] = dataclasses.field(default_factory=dict)


def find_results(folder: str | os.PathLike) -> tuple[list[ResultEntry], list[str]]:
    """The results in ``folder`` by name, and a warning for each entry of no known kind.

    Raises ValueError if ``folder`` is not a folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root}: no such folder")
    entries, warnings = [], []
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        name = path.stem if path.is_file() else path.name
        kind = None
        if path.is_file() and path.suffix == ".json":
            kind = "value-mse" if name.startswith("value_mse") else None
            kind = "bench" if name.startswith("bench_") else kind
        elif path.is_dir():
            from eval.report_alphago import folder_stage

            stage = folder_stage(path)
            if stage:
                kind = f"alphago-{stage}"  # a folder of runs of one AlphaGo training stage
            elif (path / "results.json").is_file():
                kind = "sweep"
            elif (path / "metrics.jsonl").is_file():
                kind = "training"
            elif any(path.glob(f"*/{_MATCH_MANIFEST}")):
                kind = "strength"  # a folder of `gojax match` folders
            elif any(path.glob("*/metrics.jsonl")):
                kind = "runs"  # a folder of training runs, compared
        if kind is None:
            warnings.append(f"{path}: not a known kind of result, skipped")
        elif not _NAME.fullmatch(name):
            warnings.append(f"{path}: {name!r} cannot be a marker name, skipped")
        else:
            entries.append(ResultEntry(name, kind, path))
    return entries, warnings


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def render_result(entry: ResultEntry) -> Rendered:
    """Render one result. Raises ValueError, one line naming the file, if it is unreadable."""
    from eval.report_alphago import STAGES

    render = {
        "value-mse": _render_value_mse,
        "bench": _render_bench,
        "sweep": _render_sweep,
        "training": _render_training,
        "strength": _render_strength,
        "runs": _render_runs,
        **{f"alphago-{stage}": _render_alphago for stage in STAGES},
    }[entry.kind]
    try:
        return render(entry)
    except (KeyError, TypeError, AttributeError, IndexError) as err:
        # A file of the right name and valid JSON, but not holding what its kind holds.
        what = f"no {err} field" if isinstance(err, KeyError) else str(err)
        raise ValueError(f"{entry.path}: not a {entry.kind} result ({what})") from None


def _render_alphago(entry: ResultEntry) -> Rendered:
    from eval.report_alphago import render

    markdown, plots = render(entry.kind.removeprefix("alphago-"), entry.name, entry.path)
    return Rendered(entry, markdown, plots)


# ---------------------------------------------------------------------------- value-mse


def _value_mse_markdown(result) -> str:
    """The comparison as in docs/papers.md: a row per bucket, bold for a row's unique lowest."""
    from eval.value_mse import bucket_label

    stats = result.stats
    keys = list(result.evaluators)
    rollouts = [k for k in keys if k.startswith("rollouts_")]
    headers = ["moves", "positions"]
    for key in keys:
        label = re.sub(r"x(\d)", r"×\1", result.evaluators[key])
        if key in rollouts[1:]:  # "rollouts ×1 | ×4 | ×16": the word once
            label = label.removeprefix("rollouts ")
        headers.append(label)

    def cells(values: list[float], suffixes: list[str]) -> list[str]:
        text = [f"{v:.3f}" for v in values]
        lowest = min(text, key=float)
        bold = text.count(lowest) == 1
        return [
            (f"**{t}**" if bold and t == lowest else t) + s
            for t, s in zip(text, suffixes, strict=True)
        ]

    rows = []
    width = result.config.bucket_width
    for i, (bucket, count) in enumerate(zip(stats["buckets"], stats["count"], strict=True)):
        values = [stats["mse"][k][i] for k in keys]
        rows.append([bucket_label(bucket, width), str(count)] + cells(values, [""] * len(keys)))
    overall = [stats["overall"][k] for k in keys]
    errors = [f" ± {stats['overall_stderr'][k]:.3f}" for k in keys]
    rows.append(["all", str(stats["overall_count"])] + cells(overall, errors))
    return markdown_table(headers, rows)


def _render_value_mse(entry: ResultEntry) -> Rendered:
    from eval.value_mse import load_json, save_plot

    result = load_json(entry.path)

    def plot(path: Path) -> None:
        save_plot(result, path, min_positions=VALUE_MSE_MIN_POSITIONS)

    return Rendered(entry, _value_mse_markdown(result), {f"{entry.name}.png": plot})


# ---------------------------------------------------------------------------- bench


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists are values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _rows_table(rows: list[dict[str, Any]]) -> str:
    """A table of JSON objects: a column per key (first seen first), a row per object."""
    flat = [_flatten(r) for r in rows]
    columns = list(dict.fromkeys(k for r in flat for k in r))
    right = [all(_is_number(r.get(c)) or r.get(c) is None for r in flat) for c in columns]
    body = [[format_number(r.get(c)) for c in columns] for r in flat]
    return markdown_table(columns, body, right=right)


def bench_markdown(summary: dict[str, Any]) -> str:
    """A bench's JSON summary as markdown: its scalars as a key/value table, then a table
    (titled by its key) for each list of objects."""
    if not isinstance(summary, dict):
        raise TypeError("the summary is not a JSON object")
    scalars = {}
    parts = []
    for key, value in _flatten(summary).items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            parts.append(f"**{key}**\n\n{_rows_table(value)}")
        else:
            scalars[key] = value
    if scalars:
        table = [[k, format_number(v)] for k, v in scalars.items()]
        parts.insert(0, markdown_table(["key", "value"], table, right=[False, False]))
    return "\n\n".join(parts)


def _render_bench(entry: ResultEntry) -> Rendered:
    lines = [line for line in entry.path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{entry.path}: empty")
    # A bench's --json file holds its final JSON line; an indented dump reads as well.
    text = lines[-1] if lines[-1].lstrip().startswith("{") else "\n".join(lines)
    try:
        summary = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{entry.path}: not valid JSON ({err})") from None
    return Rendered(entry, bench_markdown(summary))


# ---------------------------------------------------------------------------- sweep


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


# ---------------------------------------------------------------------------- training run


def _read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {number} is not valid JSON ({err})") from None
        if not isinstance(record, dict) or not _is_number(record.get("step")):
            raise ValueError(f"{path}: line {number} is not a record with a step")
        records.append(record)
    if not records:
        raise ValueError(f"{path}: no records")
    return records


def _panels(records: list[dict[str, Any]]):
    """The plot's panels: supervised runs (with held-out metrics) have their own."""
    from train.loop import LEARNING_CURVE_PANELS

    if any(k.startswith("holdout.") for r in records for k in r):
        from train.supervised import SL_PANELS

        return SL_PANELS
    return LEARNING_CURVE_PANELS


def _metric_columns(records: list[dict[str, Any]], panels) -> list[tuple[str, str]]:
    """``(key, label)`` of the plotted metrics that some record has, in the plot's order.

    A panel key ``"group.*"`` stands for every key under ``group.``, as in the plot.
    """
    present = list(dict.fromkeys(k for r in records for k in r))
    columns = []
    for _, keys in panels:
        for key in keys:
            if key.endswith(".*"):  # e.g. eval.random.win_rate -> "eval random win rate"
                found = [(k, k) for k in sorted(present) if k.startswith(key[:-1])]
            else:  # learner.total_loss -> "total loss"
                found = [(key, key.split(".")[-1])] if key in present else []
            for k, label in found:
                label = label.replace("per_second", "/s").replace("_", " ").replace(".", " ")
                columns.append((k, label.replace(" /s", "/s")))
    return columns


def _training_markdown(name: str, records, config: dict | None, evaluation: dict | None, panels):
    last = records[-1]
    facts = [f"{format_number(last['step'])} learner steps"]
    for key, what in (("iteration", "iterations"), ("games", "self-play games")):
        if _is_number(last.get(key)):
            facts.append(f"{format_number(last[key])} {what}")
    if _is_number(last.get("wall_seconds")):
        facts.append(f"{last['wall_seconds'] / 60:.1f} min")
    summary = f"Run `{name}`: " + ", ".join(facts)
    if config:
        board, model = config.get("board", {}), config.get("model", {})
        size = board.get("size")
        summary += (
            f"; {size}×{size} {board.get('rules')}, komi {format_number(board.get('komi'))}, "
            f"`{model.get('preset')}` net"
        )
    parts = [summary + "."]

    columns = _metric_columns(records, panels)
    count = min(TRAINING_ROWS, len(records))
    picks = sorted({round(i * (len(records) - 1) / max(count - 1, 1)) for i in range(count)})
    body = [
        [format_number(records[i]["step"])] + [format_number(records[i].get(k)) for k, _ in columns]
        for i in picks
    ]
    parts.append(markdown_table(["step"] + [label for _, label in columns], body))

    if evaluation:
        sims = (config or {}).get("eval", {}).get("num_simulations")
        search = f", {sims} simulations a move" if sims else ""
        parts.append(f"Final evaluation at step {format_number(evaluation['step'])}{search}:")
        headers = ["opponent", "games", "wins", "losses", "draws", "win rate (95% CI)"]
        headers += ["as Black", "as White", "mean length"]
        table = [
            [
                r["opponent"],
                format_number(r["games"]),
                format_number(r["wins"]),
                format_number(r["losses"]),
                format_number(r["draws"]),
                f"{_percent(r['win_rate'])} ({_percent(r['ci95'][0])}–{_percent(r['ci95'][1])})",
                _percent(r["win_rate_as_black"]) if "win_rate_as_black" in r else "–",
                _percent(r["win_rate_as_white"]) if "win_rate_as_white" in r else "–",
                format_number(r.get("mean_length")),
            ]
            for r in evaluation["results"]
        ]
        parts.append(markdown_table(headers, table))
    return "\n\n".join(parts)


def _render_training(entry: ResultEntry) -> Rendered:
    from train.loop import plot_learning_curve

    run = _read_run(entry.path)
    records = run["records"]
    panels = _panels(records)
    markdown = _training_markdown(entry.name, records, run["config"], run["eval"], panels)

    def plot(path: Path) -> None:
        plot_learning_curve(records, path, panels=panels)

    return Rendered(entry, markdown, {f"{entry.name}_learning_curve.png": plot})


# ---------------------------------------------------------------------------- runs compared

# The curves of a comparison of runs: (title, metrics.jsonl key), one line per run.
RUNS_CURVES = (
    ("policy loss", "learner.policy_loss"),
    ("policy entropy", "learner.policy_entropy"),
    ("value loss", "learner.value_loss"),
    ("self-play moves/s", "selfplay.moves_per_second"),
)


def _read_run(folder: Path) -> dict[str, Any]:
    """A training run's ``records`` (metrics.jsonl), ``config`` ({} if absent) and ``eval``."""
    run = {"records": _read_records(folder / "metrics.jsonl"), "config": {}, "eval": None}
    if (folder / "config.json").is_file():
        run["config"] = _read_json(folder / "config.json")
    if (folder / "eval.json").is_file():
        run["eval"] = _read_json(folder / "eval.json")
    return run


# Settings the runs table shows in columns of their own, or that change no result.
_RUN_COLUMNS = ("seed", "selfplay.search_kind", "selfplay.num_simulations")


@functools.cache
def _default_settings() -> dict[str, Any]:
    """``gojax train``'s default config, flattened: what a key a run's config lacks was
    (the key was added after the run), as resuming reads it."""
    from train.loop import config_to_json, default_config

    return _flatten(config_to_json(default_config()))


def _settings(config: dict[str, Any]) -> dict[str, Any]:
    """A run's flattened config, keys added to the defaults since it ran included
    (only for a ``gojax train`` config: one with a ``selfplay`` group)."""
    flat = _flatten(config)
    if "selfplay" not in config:
        return flat
    return {**_default_settings(), **flat}


def _differing_settings(runs: dict[str, dict[str, Any]]) -> list[str]:
    """Dotted config keys whose values differ between runs (what an ablation changed)."""
    configs = [_settings(run["config"]) for run in runs.values() if run["config"]]
    keys = sorted({k for c in configs for k in c})
    return [
        k
        for k in keys
        if k not in _RUN_COLUMNS
        and not k.endswith("num_devices")
        and len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1
    ]


def _runs_markdown(runs: dict[str, dict[str, Any]]) -> str:
    """A row per run: its self-play search, the settings that differ between runs, how
    much it trained and its final evaluation."""
    opponents = list(
        dict.fromkeys(
            r["opponent"] for run in runs.values() for r in (run["eval"] or {}).get("results", [])
        )
    )
    differing = _differing_settings(runs)
    headers = ["run", "self-play search", "seed", *(f"`{k}`" for k in differing)]
    headers += ["learner steps", "games", "minutes", *(f"vs {o} (95% CI)" for o in opponents)]
    body = []
    for name, run in runs.items():
        last, selfplay = run["records"][-1], run["config"].get("selfplay", {})
        settings = _settings(run["config"])
        games = next((r["games"] for r in reversed(run["records"]) if "games" in r), None)
        seconds = next(
            (r["wall_seconds"] for r in reversed(run["records"]) if "wall_seconds" in r), None
        )
        results = {r["opponent"]: r for r in (run["eval"] or {}).get("results", [])}
        line = [
            f"`{name}`",
            f"{selfplay.get('search_kind', '–')} {selfplay.get('num_simulations', '')}".strip(),
            format_number(run["config"].get("seed")),
            *(format_number(settings.get(k, "–")) for k in differing),
            format_number(last["step"]),
            format_number(games),
            "–" if seconds is None else f"{seconds / 60:.1f}",
        ]
        for opponent in opponents:
            r = results.get(opponent)
            line.append(
                "–"
                if r is None
                else f"{r['wins']}/{r['games']}, {_percent(r['win_rate'])} "
                f"({_percent(r['ci95'][0])}–{_percent(r['ci95'][1])})"
            )
        body.append(line)
    sims = {
        format_number(run["config"].get("eval", {}).get("num_simulations")) for run in runs.values()
    }
    note = (
        f"Final evaluations: each run's net searching as its self-play did, with "
        f"{'/'.join(sorted(sims))} simulations a move; draws count half."
    )
    return (
        markdown_table(headers, body, right=[False, False] + [True] * (len(headers) - 2))
        + "\n\n"
        + note
    )


def _plot_runs(runs: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (title, key) in zip(axes.flat, RUNS_CURVES, strict=True):
        for name, run in runs.items():
            points = [(r["step"], r[key]) for r in run["records"] if _is_number(r.get(key))]
            if points:
                ax.plot(*zip(*points, strict=True), label=name)
        ax.set_title(title)
        ax.set_xlabel("learner step")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)


def _render_runs(entry: ResultEntry) -> Rendered:
    folders = sorted(
        (p.parent for p in entry.path.glob("*/metrics.jsonl")), key=lambda p: _natural(p.name)
    )
    runs = {folder.name: _read_run(folder) for folder in folders}
    plots = {f"{entry.name}_curves.png": lambda p: _plot_runs(runs, p)}
    return Rendered(entry, _runs_markdown(runs), plots)


# ---------------------------------------------------------------------------- strength


def _recounted_rate(m, recounts) -> str:
    """A's win rate with the engine's recount in place of the match's count (``gojax
    recount``), or "–" for a match never recounted."""
    from eval.recount import win_rate_a

    if recounts is None or not m.games:
        return "–"
    return _percent(win_rate_a(m, recounts)[0])


def _strength_rows(matches, recounts=None) -> list[list[str]]:
    rows = []
    for folder, m in matches:
        c = m.config
        n = len(m.games)
        lo, hi = m.interval_a
        extra = [] if recounts is None else [_recounted_rate(m, recounts.get(folder))]
        rows.append(
            [
                f"`{folder}`",
                f"{c.size}×{c.size}",
                f"{c.komi:g}",
                m.names["A"],
                m.names["B"],
                str(n),
                f"{m.wins('A')} ({m.wins('A', 'B')} / {m.wins('A', 'W')})",
                str(m.draws),
                f"{_percent(m.win_rate_a)} ({_percent(lo)}–{_percent(hi)})" if n else "–",
                f"{m.mean_length:.0f}" if n else "–",
                *extra,
            ]
        )
    return rows


def _strength_markdown(matches, recounts=None) -> str:
    """The match table; with ``recounts`` (folder -> ``gojax recount``'s games, None where a
    match was never recounted) a column of A's win rate by the recounting engine's count."""
    headers = ["match", "board", "komi", "engine A", "engine B", "games"]
    headers += ["A wins (as B / as W)", "draws", "A win rate (95% Wilson)", "mean moves"]
    right = [False, False, True, False, False, True, True, True, True, True]
    note = "Draws count half."
    if recounts is not None:
        headers.append("A win rate, recounted")
        right.append(True)
        note += (
            " Recounted: the games that ended by the score counted again by an engine's own"
            " `final_score` (`gojax recount`, dead stones removed as it judges them)."
        )
    table = markdown_table(headers, _strength_rows(matches, recounts), right=right)
    commands = "\n".join(
        f"- `{folder}`: A = `{m.config.engine_a}`; B = `{m.config.engine_b}`; "
        f"{m.config.rules} rules"
        for folder, m in matches
    )
    return f"{table}\n\n{note} Engines:\n\n{commands}"


def _plot_strength(matches, path: Path, recounts=None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    played = [(folder, m) for folder, m in matches if m.games]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(played) + 1.6))
    from eval.recount import win_rate_a

    recounted_any = False
    for y, (folder, m) in enumerate(played):
        lo, hi = m.interval_a
        rate = m.win_rate_a
        ax.errorbar(rate, y, xerr=[[rate - lo], [hi - rate]], fmt="o", color="C0", capsize=3)
        if recounts is not None and recounts.get(folder) is not None:
            again = win_rate_a(m, recounts[folder])[0]
            label = "recounted by an engine's final_score" if not recounted_any else None
            ax.plot(again, y, "x", color="C3", label=label)
            recounted_any = True
    ax.set_yticks(range(len(played)))
    # The rules join the label when the matches were not all played under the same ones.
    mixed = len({m.config.rules for _, m in played}) > 1
    ax.set_yticklabels(
        [f"{m.names['A']} vs {m.names['B']}, {m.config.size}×{m.config.size}"
         f"{' ' + m.config.rules if mixed else ''} ({len(m.games)})"
         for _, m in played]
    )  # fmt: skip
    ax.axvline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlim(0, 1)
    ax.set_xlabel("engine A's win rate (95% Wilson interval)")
    if recounted_any:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), fontsize=8, frameon=False)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _natural(name: str) -> list[tuple[int, int, str]]:
    """A sort key reading runs of digits as numbers: ``v1 < v64 < v256``."""
    parts = re.split(r"(\d+)", name)
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in parts]


def _render_strength(entry: ResultEntry) -> Rendered:
    from eval.match import read_match

    folders = sorted(p.parent for p in entry.path.glob(f"*/{_MATCH_MANIFEST}"))
    from eval.recount import read_recounts

    matches = [(folder.name, read_match(folder)) for folder in folders]
    # 9x9 before 19x19; names in natural order (v1, v64, v256).
    matches.sort(key=lambda fm: (fm[1].config.size, _natural(fm[0])))
    recounts = {folder.name: read_recounts(folder) for folder in folders}
    if all(r is None for r in recounts.values()):
        recounts = None
    plots = {}
    if any(m.games for _, m in matches):
        plots[f"{entry.name}.png"] = lambda p: _plot_strength(matches, p, recounts)
    return Rendered(entry, _strength_markdown(matches, recounts), plots)


# ---------------------------------------------------------------------------- marker blocks


def _blocks(text: str, where: str) -> list[tuple[int, int, str]]:
    """``(open line, close line, name)`` of each marker block in ``text`` (0-based lines).

    Raises ValueError (``where:line: ...``) for a block left open, closed without
    being opened, or opened inside another.
    """
    blocks, open_at, open_name, fence = [], None, None, None
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if fence is not None:
            fence = None if stripped.startswith(fence) else fence
            continue
        if stripped.startswith(_FENCE):
            fence = stripped[:3]
            continue
        match = _MARKER.fullmatch(stripped)
        if match is None:
            continue
        closing, name = match.group(1) == "/", match.group(2)
        if not closing and open_name is not None:
            raise ValueError(
                f"{where}:{number + 1}: report:{name} opened inside report:{open_name}"
            )
        if closing and name != open_name:
            raise ValueError(f"{where}:{number + 1}: /report:{name} closes no open block")
        if closing:
            blocks.append((open_at, number, name))
            open_name = None
        else:
            open_at, open_name = number, name
    if open_name is not None:
        raise ValueError(f"{where}:{open_at + 1}: report:{open_name} is never closed")
    return blocks


def replace_blocks(text: str, contents: dict[str, str], *, where: str = "<text>"):
    """``text`` with each block named in ``contents`` holding that content; all else kept.

    Returns ``(new text, names of every block in text)``. Raises ValueError for
    unbalanced markers.
    """
    blocks = _blocks(text, where)
    lines = text.splitlines(keepends=True)
    out, position = [], 0
    for start, stop, name in blocks:
        out.extend(lines[position : start + 1])
        if name in contents:
            # Blank lines around the content: a table then never touches a marker line.
            content = contents[name].strip("\n")
            out.append(f"\n{content}\n\n" if content else "")
        else:
            out.extend(lines[start + 1 : stop])
        position = stop
    out.extend(lines[position:])
    return "".join(out), [name for _, _, name in blocks]


# ---------------------------------------------------------------------------- the report


@dataclasses.dataclass
class Report:
    """What ``generate_report`` did (or, with ``check``, would do): one line per item."""

    updated: list[str] = dataclasses.field(default_factory=list)
    unchanged: list[str] = dataclasses.field(default_factory=list)
    stale: list[str] = dataclasses.field(default_factory=list)  # --check: what would change
    warnings: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.stale


def _draw(plots: dict[str, Callable[[Path], None]], figures: Path, report: Report) -> None:
    """Draw each plot beside its target; replace the target only if the bytes differ."""
    figures.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=figures, prefix=".report.") as scratch:
        for name, draw in plots.items():
            target, fresh = figures / name, Path(scratch) / name
            draw(fresh)
            if target.is_file() and target.read_bytes() == fresh.read_bytes():
                report.unchanged.append(str(target))
            else:
                os.replace(fresh, target)  # same folder, so atomic
                report.updated.append(str(target))


def generate_report(
    results: str | os.PathLike,
    markdown_files: Sequence[str | os.PathLike],
    figures: str | os.PathLike,
    *,
    check: bool = False,
) -> Report:
    """Render every result in ``results`` into the marker blocks of ``markdown_files`` and
    draw its plots into ``figures``; with ``check``, write nothing and list what is stale.

    A result that cannot be read is an error (named in ``report.errors``); its
    blocks are left as they are and the others still render. Raises
    ValueError if ``results`` is not a folder or a markdown file is missing.
    """
    report = Report()
    entries, report.warnings = find_results(results)
    figures = Path(figures)
    rendered: dict[str, Rendered] = {}
    for entry in entries:
        try:
            rendered[entry.name] = render_result(entry)
        except (ValueError, OSError) as err:
            text = str(err)
            report.errors.append(text if str(entry.path) in text else f"{entry.path}: {text}")
    contents = {name: r.markdown for name, r in rendered.items()}
    failed = {e.name for e in entries} - set(rendered)

    seen: set[str] = set()
    for file in map(Path, markdown_files):
        if not file.is_file():
            raise ValueError(f"{file}: no such file")
        old = file.read_text(encoding="utf-8")
        try:
            new, names = replace_blocks(old, contents, where=str(file))
        except ValueError as err:
            report.errors.append(str(err))
            continue
        seen.update(names)
        for name in dict.fromkeys(names):
            if name not in contents and name not in failed:
                report.warnings.append(f"{file}: block report:{name} has no result in {results}")
        changed = [n for n in dict.fromkeys(names) if n in contents]
        if new == old:
            if changed:
                report.unchanged.append(f"{file} ({', '.join(changed)})")
        elif check:
            stale = [n for n in changed if _block_text(old, n, file) != _block_text(new, n, file)]
            report.stale.append(f"{file}: block(s) {', '.join(stale)} out of date")
        else:
            write_atomic(file, new.encode("utf-8"))
            report.updated.append(f"{file} ({', '.join(changed)})")

    for name, result in rendered.items():
        if name not in seen:
            where = ", ".join(str(f) for f in markdown_files)
            report.warnings.append(
                f"{result.entry.path}: no <!-- report:{name} --> marker in {where}"
            )
        if check:
            for plot in result.plots:
                if not (figures / plot).is_file():
                    report.stale.append(f"{figures / plot}: plot missing")
        else:
            try:
                _draw(result.plots, figures, report)
            except (ValueError, OSError) as err:
                report.errors.append(f"{result.entry.path}: plot failed ({err})")
    return report


def _block_text(text: str, name: str, where: Path) -> list[str]:
    lines = text.splitlines()
    return ["\n".join(lines[a + 1 : b]) for a, b, n in _blocks(text, str(where)) if n == name]


# ---------------------------------------------------------------------------- command line


def cmd_report(args: argparse.Namespace) -> int:
    import sys

    markdown = [Path(args.benchmarks)]
    for folder in (Path(args.docs), Path(args.models)):
        if folder.is_dir():
            markdown += sorted(
                p for p in folder.glob("*.md") if p.resolve() != markdown[0].resolve()
            )
    report = generate_report(args.results, markdown, args.figures, check=args.check)
    for line in report.updated:
        print(f"updated {line}")
    for line in report.unchanged:
        print(f"unchanged {line}")
    for line in report.stale:
        print(f"stale: {line}")
    for line in report.warnings:
        print(f"warning: {line}")
    for line in report.errors:
        print(f"gojax report: error: {line}", file=sys.stderr)
    if report.stale:
        print(f"{len(report.stale)} out of date: run `gojax report` and commit the result")
    return 0 if report.ok else 1


def register(commands) -> None:
    """Add ``gojax report`` to the subcommands of the ``gojax`` parser."""
    parser = commands.add_parser(
        "report",
        help="regenerate the tables and plots of BENCHMARKS.md and docs/ from results/",
        description="Renders every recorded result into the <!-- report:NAME --> blocks of "
        "the markdown files and draws its plots.",
    )
    parser.add_argument("--results", default="results", help="the recorded results (results/)")
    parser.add_argument(
        "--benchmarks", default="BENCHMARKS.md", help="a markdown file with blocks (BENCHMARKS.md)"
    )
    parser.add_argument(
        "--docs", default="docs", help="a folder whose *.md files may hold blocks too (docs/)"
    )
    parser.add_argument(
        "--models", default="models", help="the shipped nets' folder, whose *.md too (models/)"
    )
    parser.add_argument("--figures", default="docs/figures", help="where plots go (docs/figures/)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a block would change or a plot is missing",
    )
    parser.set_defaults(run=cmd_report)
