"""``gojax report`` for value-mse and bench results: ``value_mse*.json`` (the comparison
of value estimates by move, as ``gojax value-mse`` writes it) and ``bench_*.json``
(a bench's JSON summary as tables).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from eval._report_markdown import _flatten, _is_number, format_number, markdown_table
from eval._report_results import Rendered, ResultEntry

# Value-mse plots leave out buckets with fewer positions, as `gojax value-mse` does by default.
VALUE_MSE_MIN_POSITIONS = 10


def _value_mse_markdown(result) -> str:
    """The comparison as in docs/papers/alphago.md: a row per bucket, bold for a row's unique
    lowest."""
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
