"""``gojax report`` for training runs: one run (``<name>/metrics.jsonl``, its learning
curve and final evaluation) and a folder of runs compared (``<name>/*/metrics.jsonl``,
the settings that differ between them and their curves side by side).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from eval._report_markdown import (
    _flatten,
    _is_number,
    _natural,
    _percent,
    format_number,
    markdown_table,
)
from eval._report_results import Rendered, ResultEntry, _read_json

# Rows of the training-run table: the first record, the last, and this many in all.
TRAINING_ROWS = 5


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
