"""``gojax report`` for AlphaGo's four training stages: SL policy, RL policy, value, rollout.

A recorded result of a stage is a folder of its runs, each run a subfolder
copied from its workdir without checkpoints, data or TensorBoard logs:

=================  ======================  ==================================  ===============
stage              written by              each run holds                      plot
=================  ======================  ==================================  ===============
``alphago-sl``     ``gojax train-sl``      ``config.json``, ``holdout.json``,  held-out
                                           ``metrics.jsonl``                   accuracy
``alphago-pg``     ``gojax train-pg``      ``config.json``, ``eval.json``,     win rate against
                                           ``metrics.jsonl``                   the start
``alphago-value``  ``gojax train-value``   ``config.json``, ``eval.json``      error by move
``alphago-rollout`` ``gojax train-rollout`` ``config.json``, ``eval.json``,     held-out
                                           ``metrics.jsonl``                   accuracy
``alphago-balance`` ``gojax balance-rollout`` ``config.json``, ``eval.json``,   held-out error
                                           ``metrics.jsonl``                   against V*
=================  ======================  ==================================  ===============

A run's stage is told by its files and config: ``holdout.json`` (SL), a
``pg`` config group (RL), a ``players`` group (value), ``data.init`` and
``data.model`` (balancing) or else a config without a ``model`` (rollout). Runs are listed in the
natural order of their folder names (``seed2`` before ``seed10``); runs that
differ only in ``seed`` share a row of the SL table, one value per seed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval._report_markdown import format_number, markdown_table

STAGES = ("sl", "pg", "value", "rollout", "balance")
# Held-out value buckets with fewer positions are left out of the table (as from the plot).
MIN_BUCKET_POSITIONS = 10

Plots = dict[str, Callable[[Path], None]]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def _read_records(path: Path) -> list[dict[str, Any]]:
    """``metrics.jsonl``'s records, or [] if the run has none."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: line {number} is not valid JSON ({err})") from None
    return records


def stage_of(run: Path) -> str | None:
    """The AlphaGo stage whose run ``run`` is (one of ``STAGES``), or None."""
    config_path = run / "config.json"
    if not config_path.is_file():
        return None
    if (run / "holdout.json").is_file():
        return "sl"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or not (run / "eval.json").is_file():
        return None
    if "pg" in config:
        return "pg"
    if "players" in config:
        return "value"
    data = config.get("data")
    if isinstance(data, dict) and "init" in data and "model" in data:
        return "balance"
    if "model" not in config and data is not None:
        return "rollout"
    return None


def folder_stage(folder: Path) -> str | None:
    """The stage of a folder of runs when every run in it is of one stage, else None."""
    runs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    stages = {stage_of(run) for run in runs}
    return stages.pop() if len(stages) == 1 and None not in stages and runs else None


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def read_runs(folder: Path) -> dict[str, dict[str, Any]]:
    """Every run of ``folder`` by name: ``config``, ``eval`` (or ``holdout``), ``records``."""
    runs = {}
    for run in sorted(folder.iterdir(), key=lambda p: _natural(p.name)):
        if not run.is_dir() or run.name.startswith("."):
            continue
        result = run / ("holdout.json" if (run / "holdout.json").is_file() else "eval.json")
        runs[run.name] = {
            "config": _read_json(run / "config.json"),
            "eval": _read_json(result),
            "records": _read_records(run / "metrics.jsonl"),
        }
    return runs


def _percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def _bold_lowest(text: list[str]) -> list[str]:
    """Bold the unique lowest number of a row of formatted numbers."""
    lowest = min(text, key=float)
    return [f"**{t}**" if t == lowest and text.count(lowest) == 1 else t for t in text]


def _plot_curves(
    runs, key: str, ylabel: str, title: str, path: Path, baseline=None, xlabel: str = "step"
) -> None:
    """One line per run: ``key`` of its metrics records against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eval.ratings import save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, run in runs.items():
        points = [(r["step"], r[key]) for r in run["records"] if key in r and "step" in r]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=name)
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


# ---------------------------------------------------------------------------- SL


def _inputs_and_parameters(preset: str, size: int) -> tuple[str, int]:
    """What a preset's net reads, and its parameter count on a ``size`` board."""
    from gojax.nn import PRESETS, AlphaGoNet, AlphaGoZeroNet, count_params

    module = PRESETS[preset]()
    if isinstance(module, AlphaGoNet):
        inputs = "board and move history" if module.raw_inputs else "AlphaGo's 48 planes"
    elif isinstance(module, AlphaGoZeroNet):
        inputs = "AlphaGo Zero's 17 planes"
    else:
        inputs = "KataGo's 22 + 19 features"
    return inputs, count_params(module, size)


def _without_seed(config: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True)


def render_sl(name: str, runs: dict[str, dict[str, Any]]) -> tuple[str, Plots]:
    """A row per net (runs differing only in seed share it): held-out accuracy, policy loss
    and value MSE; plots of the held-out accuracy and value MSE over the runs."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs.values():
        groups.setdefault(_without_seed(run["config"]), []).append(run)
    means = [sum(r["eval"]["accuracy"] for r in g) / len(g) for g in groups.values()]
    best = max(means)
    mse_means = [sum(r["eval"]["value_mse"] for r in g) / len(g) for g in groups.values()]
    body = []
    for group, mean, mse in zip(groups.values(), means, mse_means, strict=True):
        group.sort(key=lambda r: r["config"].get("seed", 0))
        config = group[0]["config"]
        preset, size = config["model"]["preset"], config["board"]["size"]
        inputs, parameters = _inputs_and_parameters(preset, size)
        accuracy = " / ".join(_percent(r["eval"]["accuracy"]) for r in group)
        body.append(
            [
                f"`{preset}`",
                inputs,
                f"{parameters:,}",
                " / ".join(str(r["config"].get("seed", 0)) for r in group),
                " / ".join(format_number(r["eval"]["step"]) for r in group),
                " / ".join(format_number(int(r["eval"]["positions"])) for r in group),
                _bold_if(accuracy, mean == best and means.count(best) == 1),
                " / ".join(f"{r['eval']['policy_loss']:.3f}" for r in group),
                _bold_if(
                    " / ".join(f"{r['eval']['value_mse']:.3f}" for r in group),
                    mse == min(mse_means) and mse_means.count(mse) == 1,
                ),
            ]
        )
    size = next(iter(runs.values()))["config"]["board"]["size"]
    headers = ["net", "inputs", f"parameters ({size}×{size})", "seeds", "steps"]
    headers += ["held-out positions", "move accuracy", "policy loss (nats)", "value MSE"]
    table = markdown_table(headers, body, right=[False, False] + [True] * 7)

    def plot(path: Path) -> None:
        _plot_curves(runs, "holdout.accuracy", "held-out move accuracy", "SL policy nets", path)

    def plot_value(path: Path) -> None:
        title = "SL nets' value heads (dotted: predicting 0 where no game is drawn)"
        _plot_curves(runs, "holdout.value_mse", "held-out value MSE", title, path, baseline=1.0)

    return table, {f"{name}.png": plot, f"{name}_value.png": plot_value}


def _bold_if(text: str, bold: bool) -> str:
    return f"**{text}**" if bold else text


# ---------------------------------------------------------------------------- RL (policy gradient)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def render_pg(name: str, runs: dict[str, dict[str, Any]]) -> tuple[str, Plots]:
    """A row per run: win rate against the starting policy at every evaluation."""
    key = "eval.vs_start.win_rate"
    steps = sorted({r["step"] for run in runs.values() for r in run["records"] if key in r})
    body = []
    for run_name, run in runs.items():
        final = run["eval"]
        at = {r["step"]: r[key] for r in run["records"] if key in r}
        cells = [_percent(at[s]) if s in at else "–" for s in steps if s != final["step"]]
        lo, hi = final["ci95"]
        cells.append(f"{_percent(final['win_rate'])} [{100 * lo:.1f}, {100 * hi:.1f}]")
        train = [r for r in run["records"] if "pg.entropy" in r]
        first, last = train[:10], train[-10:]
        entropy = f"{_mean([r['pg.entropy'] for r in first]):.2f} → "
        entropy += f"{_mean([r['pg.entropy'] for r in last]):.2f}"
        length = f"{_mean([r['pg.game_length'] for r in first]):.0f} → "
        length += f"{_mean([r['pg.game_length'] for r in last]):.0f}"
        body.append([run_name, f"{final['wins']}/{final['games']}"] + cells + [entropy, length])
    final_step = next(iter(runs.values()))["eval"]["step"]
    headers = ["run", "wins/games (final)"]
    earlier = [format_number(s) for s in steps if s != final_step]
    headers += [f"{t} iterations" if i == 0 else t for i, t in enumerate(earlier)]
    headers += [f"{format_number(final_step)} (95% interval)"]
    headers += ["policy entropy (first → last 10)", "game length (first → last 10)"]
    table = markdown_table(headers, body)

    def plot(path: Path) -> None:
        title = "RL policy against the SL policy it started from"
        ylabel = "win rate against the start"
        _plot_curves(runs, key, ylabel, title, path, baseline=0.5, xlabel="iteration")

    return table, {f"{name}.png": plot}


# ---------------------------------------------------------------------------- value network


def _bucket_label(bucket: int, width: int) -> str:
    return f"{bucket * width}-{bucket * width + width - 1}"


def render_value(name: str, runs: dict[str, dict[str, Any]]) -> tuple[str, Plots]:
    """Held-out error of every predictor a run; by move number for the first run."""
    first_config = next(iter(runs.values()))["config"]["data"]
    predictors = [
        ("value", "value net (trained)"),
        ("start", "value net (start)"),
        ("rollouts", f"{first_config['rollouts']} random rollouts"),
        ("mix", f"mix, λ = {format_number(float(first_config['lam']))}"),
        ("zero", "always 0"),
    ]
    body = []
    for run_name, run in runs.items():
        mse = run["eval"]["mse"]
        errors = _bold_lowest([f"{mse[k]:.3f}" for k, _ in predictors])
        positions = format_number(run["eval"]["positions"])
        body.append([run_name, positions] + errors + [f"{run['eval']['train_mse']:.3f}"])
    headers = ["run", "held-out positions"] + [label for _, label in predictors]
    headers += ["value net on training positions"]
    parts = [markdown_table(headers, body)]

    first_name, first = next(iter(runs.items()))
    by_move = first["eval"]["by_move"]
    width = by_move["bucket_width"]
    keep = [i for i, n in enumerate(by_move["count"]) if n >= MIN_BUCKET_POSITIONS]
    rows = [["positions"] + [str(by_move["count"][i]) for i in keep]]
    for key, label in predictors[:1] + predictors[2:4]:
        rows.append([label] + [f"{by_move['mse'][key][i]:.2f}" for i in keep])
    headers = ["U"] + [_bucket_label(by_move["buckets"][i], width) for i in keep]
    parts.append(
        f"By the move number `U` of the random move (`{first_name}`; buckets of {width} "
        f"moves, those of fewer than {MIN_BUCKET_POSITIONS} positions left out):\n\n"
        + markdown_table(headers, rows)
    )

    def plot(path: Path) -> None:
        from train.value_network import save_by_move_plot

        title = f"Held-out value error by move number ({first_name})"
        save_by_move_plot(first["eval"], path, title)

    return "\n\n".join(parts), {f"{name}.png": plot}


# ---------------------------------------------------------------------------- rollout policy


def render_rollout(name: str, runs: dict[str, dict[str, Any]]) -> tuple[str, Plots]:
    """Move prediction of each fast rollout policy against uniform play over the same moves."""
    body = []
    for run_name, run in runs.items():
        result = run["eval"]
        holdout, train = result["eval"]["holdout"], result["eval"]["train"]
        label = f"`{run_name}`: " if len(runs) > 1 else ""
        body += [
            [
                f"{label}fast rollout policy, held-out games",
                format_number(holdout["positions"]),
                f"**{_percent(holdout['accuracy'])}**",
                f"{holdout['nll']:.2f}",
            ],
            [
                f"{label}uniform over the same moves (what random rollouts play)",
                format_number(holdout["positions"]),
                _percent(holdout["uniform_accuracy"]),
                f"{holdout['uniform_nll']:.2f}",
            ],
            [
                f"{label}fast rollout policy, training games",
                format_number(result["positions"]),
                _percent(train["accuracy"]),
                f"{train['nll']:.2f}",
            ],
        ]
    headers = ["", "positions", "top-1 accuracy", "log-loss"]
    coverage = ", ".join(
        f"{_percent(run['eval']['eval']['holdout']['coverage'])}"
        + (f" (`{run_name}`)" if len(runs) > 1 else "")
        for run_name, run in runs.items()
    )
    steps = ", ".join(format_number(run["eval"]["step"]) for run in runs.values())
    text = (
        markdown_table(headers, body)
        + f"\n\nAfter {steps} steps; {coverage} of the held-out record moves are in the "
        "rollout move set (the others are not counted)."
    )

    def plot(path: Path) -> None:
        title = "Fast rollout policy: held-out move accuracy"
        _plot_curves(runs, "holdout.accuracy", "held-out top-1 accuracy", title, path)

    return text, {f"{name}.png": plot}


# ---------------------------------------------------------------------------- balancing


def render_balance(name: str, runs: dict[str, dict[str, Any]]) -> tuple[str, Plots]:
    """Held-out errors of each balanced policy's rollouts against those of its start."""
    body = []
    for run_name, run in runs.items():
        result = run["eval"]
        start, balanced = result["holdout"]["start"], result["holdout"]["balanced"]
        train = run["config"]["train"]
        body.append(
            [
                run_name,
                format_number(result["step"]),
                f"{train['positions']} × ({train['rollouts']} + {train['rollouts']})",
                format_number(balanced["positions"]),
                *_bold_lowest([f"{start['mse_target']:.3f}", f"{balanced['mse_target']:.3f}"]),
                *_bold_lowest([f"{start['mse_result']:.3f}", f"{balanced['mse_result']:.3f}"]),
                f"{result['holdout_value_net_mse_result']:.3f}",
            ]
        )
    n = next(iter(runs.values()))["eval"]["eval_rollouts"]
    headers = ["run", "steps", "positions × rollouts a step", "held-out positions"]
    headers += [f"vs V*: start ({n} rollouts)", "vs V*: balanced"]
    headers += ["vs results: start", "vs results: balanced", "value net vs results"]
    table = markdown_table(headers, body)

    def plot(path: Path) -> None:
        title = f"Simulation balancing: held-out MSE of {n} rollouts against V*"
        _plot_curves(runs, "holdout.mse_target", "MSE against the value net", title, path)

    return table, {f"{name}.png": plot}


RENDERERS = {
    "sl": render_sl,
    "pg": render_pg,
    "value": render_value,
    "rollout": render_rollout,
    "balance": render_balance,
}


def render(stage: str, name: str, folder: Path) -> tuple[str, Plots]:
    """The markdown and plots of the folder of ``stage`` runs recorded as ``name``."""
    return RENDERERS[stage](name, read_runs(folder))
