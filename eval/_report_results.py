"""Recorded results for ``gojax report``: what each entry of the results folder is.

``find_results`` tells an entry's kind from its name and files; ``ResultEntry`` and
``Rendered`` are what the renderers (one module per kind) take and give back.
Separate from the renderers so that they share these types without importing
``eval.report``, which imports them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_MATCH_MANIFEST = "match.json"  # eval.match.MANIFEST_FILE (not imported: it pulls in jax)


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
