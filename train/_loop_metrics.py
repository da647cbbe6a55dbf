"""What a run records as it goes: metrics.jsonl, TensorBoard, the learning-curve plot, SGF.

``_Metrics`` appends each iteration's record to ``metrics.jsonl`` (and TensorBoard
events) and redraws ``learning_curve.png`` with ``plot_learning_curve``;
``_write_sgf`` keeps a few games of the newest iterations under ``sgf/``. Kept apart
from ``train.loop`` (which re-exports these names) because the other trainers
(supervised, value, policy-gradient, rollout) and the reports write and plot the
same records.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from gojax.atomic import atomic_file
from train.selfplay import PER_GAME_FIELDS, SelfPlayConfig, trajectories_to_sgf

# (title, metric keys) of the learning-curve plot's four panels; ``"group.*"``
# stands for every key under ``group.``.
LEARNING_CURVE_PANELS = (
    ("loss", ("learner.total_loss", "learner.policy_loss", "learner.value_loss")),
    ("policy entropy", ("learner.policy_entropy",)),
    ("value accuracy, evaluation win rates", ("learner.value_accuracy", "eval.*")),
    ("self-play moves/s", ("selfplay.moves_per_second",)),
)


def _series(records: Sequence[dict[str, Any]], keys) -> list[tuple[str, str]]:
    """``(metric key, label)`` pairs; ``"group.*"`` stands for every key under ``group.``."""
    out = []
    for key in keys:
        if key.endswith(".*"):
            prefix = key[:-1]
            found = sorted({k for r in records for k in r if k.startswith(prefix)})
            out.extend((k, k[len(prefix) :].removesuffix(".win_rate")) for k in found)
        else:
            out.append((key, key.split(".")[-1]))
    return out


def plot_learning_curve(
    records: Sequence[dict[str, Any]],
    path: str | os.PathLike,
    *,
    panels: Sequence[tuple[str, Sequence[str]]] = LEARNING_CURVE_PANELS,
) -> None:
    """Plot ``metrics.jsonl`` records (dicts with a ``step``) as a 2x2 PNG, written atomically.

    ``panels`` are four ``(title, metric keys)``; a missing or null value is
    left out of its line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (title, keys) in zip(axes.flat, panels, strict=True):
        series = _series(records, keys)
        for key, label in series:
            pts = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            if pts:  # a marker, so that a single evaluation shows
                marker = "o" if len(pts) < 4 else None
                ax.plot(*zip(*pts, strict=True), label=label, marker=marker)
        ax.set_title(title)
        ax.set_xlabel("learner step")
        ax.grid(alpha=0.3)
        if len(series) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    try:
        with atomic_file(path, "wb") as handle:
            fig.savefig(handle, format="png", dpi=80)
    finally:
        plt.close(fig)


class _Metrics:
    """metrics.jsonl (appended, flushed), TensorBoard events and the PNG plot."""

    PANELS = LEARNING_CURVE_PANELS

    def __init__(self, workdir: Path, enabled: bool, panels=None):
        self.workdir = workdir
        self.enabled = enabled
        self.panels = panels or self.PANELS
        self.records: list[dict[str, Any]] = []
        self.path = workdir / "metrics.jsonl"
        self.tb = None
        if not enabled:
            return
        if self.path.exists():  # a resumed run plots its whole history
            with open(self.path) as f:
                self.records = [json.loads(line) for line in f if line.strip()]
        try:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(str(workdir / "tb"))
        except ImportError:  # metrics.jsonl still has everything
            self.tb = None

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.records.append(record)
        with open(self.path, "a") as f:
            # Strict JSON: NaN (e.g. no resignations yet) is written as null.
            clean = {
                k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in record.items()
            }
            f.write(json.dumps(clean) + "\n")
            f.flush()
        if self.tb is not None:
            step = int(record["step"])
            for k, v in record.items():
                if isinstance(v, int | float) and math.isfinite(v) and k != "step":
                    self.tb.add_scalar(k.replace(".", "/"), v, step)
            self.tb.flush()

    def plot(self) -> None:
        if not self.enabled or not self.records:
            return
        plot_learning_curve(self.records, self.workdir / "learning_curve.png", panels=self.panels)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def _eval_record(rows: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """Evaluation rows as a metrics record: ``eval.<opponent>.win_rate`` at ``step``."""
    return {"step": step, **{f"eval.{r['opponent']}.win_rate": r["win_rate"] for r in rows}}


def _write_sgf(traj, sp_config: SelfPlayConfig, folder: Path, iteration: int, t) -> None:
    """A few games of this iteration under ``sgf/iter_<i>/``; only the newest folders kept."""
    k = min(t.sgf_games, sp_config.num_games)
    trajectories_to_sgf(_first_games(traj, k), sp_config, folder / f"iter_{iteration:06d}")
    kept = sorted(p for p in folder.iterdir() if p.name.startswith("iter_"))
    for old in kept[: max(0, len(kept) - t.sgf_keep_iterations)]:
        shutil.rmtree(old, ignore_errors=True)


def _first_games(traj, k: int):
    """The first ``k`` games of a batch of trajectories."""
    fields = {}
    for f in dataclasses.fields(traj):
        x = getattr(traj, f.name)
        if f.name in PER_GAME_FIELDS:
            fields[f.name] = jax.tree.map(lambda a: a[:k], x)
        else:
            fields[f.name] = jax.tree.map(lambda a: a[:, :k], x)
    return traj.replace(**fields)
