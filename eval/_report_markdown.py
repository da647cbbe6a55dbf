"""Markdown for ``gojax report``: table cells, pipe tables and the small helpers every
renderer shares.

Separate from the renderers so that each kind of result (``eval._report_sweep``,
``eval._report_training``, ...) and ``eval.report_alphago`` format numbers alike
without importing one another.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any


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


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists are values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _natural(name: str) -> list[tuple[int, int, str]]:
    """A sort key reading runs of digits as numbers: ``v1 < v64 < v256``."""
    parts = re.split(r"(\d+)", name)
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in parts]
