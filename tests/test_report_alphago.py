"""`gojax report` on recorded runs of AlphaGo's stages: which folder is which, tables, plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.report import find_results, generate_report, render_result
from eval.report_alphago import folder_stage, stage_of

PNG = b"\x89PNG\r\n\x1a\n"


def _write(folder: Path, files: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if name.endswith(".jsonl"):
            text = "".join(json.dumps(r) + "\n" for r in content)
        else:
            text = json.dumps(content)
        (folder / name).write_text(text)
    return folder


def _sl_run(folder: Path, preset: str, seed: int, accuracy: float) -> None:
    config = {"board": {"size": 5}, "model": {"preset": preset}, "data": {}, "seed": seed}
    holdout = {"step": 30, "positions": 200.0, "accuracy": accuracy, "policy_loss": 2.0 + seed}
    holdout["value_mse"] = 1.5 - accuracy  # a better policy, a better value: a bold lowest
    records = [{"step": s, "holdout.accuracy": accuracy * s / 30} for s in (10, 20, 30)]
    records[-1]["holdout.value_mse"] = holdout["value_mse"]
    _write(folder, {"config.json": config, "holdout.json": holdout, "metrics.jsonl": records})


def _pg_run(folder: Path, seed: int) -> None:
    config = {"board": {"size": 5}, "model": {}, "pg": {}, "seed": seed}
    evaluation = {"step": 20, "games": 64, "wins": 40 + seed, "win_rate": 0.625 + seed / 64}
    evaluation["ci95"] = [0.5, 0.75]
    records = [
        {"step": s, "pg.entropy": 2.0 - s / 20, "pg.game_length": 40 + s}
        | ({"eval.vs_start.win_rate": 0.5 + s / 100} if s % 10 == 0 else {})
        for s in range(1, 21)
    ]
    _write(folder, {"config.json": config, "eval.json": evaluation, "metrics.jsonl": records})


def _value_run(folder: Path, mse_value: float) -> None:
    config = {"board": {}, "model": {}, "players": {}, "data": {"rollouts": 8, "lam": 0.5}}
    mse = {"value": mse_value, "start": 1.1, "zero": 1.0, "rollouts": 0.8, "mix": 0.75}
    by_move = {
        "buckets": [0, 1, 2],
        "count": [40, 30, 5],
        "bucket_width": 5,
        "mse": {k: [v, v - 0.1, v - 0.2] for k, v in mse.items()},
    }
    evaluation = {"positions": 75, "mse": mse, "train_mse": 0.7, "by_move": by_move}
    _write(folder, {"config.json": config, "eval.json": evaluation})


def _rollout_run(folder: Path) -> None:
    config = {"board": {"size": 9}, "data": {"holdout_games": 10}, "seed": 0, "train": {}}
    holdout = {
        "accuracy": 0.3,
        "nll": 2.5,
        "uniform_accuracy": 0.025,
        "uniform_nll": 3.9,
        "coverage": 0.9,
        "positions": 600,
    }
    evaluation = {
        "step": 100,
        "positions": 1200,
        "eval": {"holdout": holdout, "train": {"accuracy": 0.35, "nll": 2.3}},
    }
    records = [{"step": s, "loss": 3.0, "holdout.accuracy": 0.3 * s / 100} for s in (50, 100)]
    _write(folder, {"config.json": config, "eval.json": evaluation, "metrics.jsonl": records})


def _balance_run(folder: Path) -> None:
    config = {
        "data": {"init": "p.npz", "model": "m.bin.gz", "sgf_dir": "games"},
        "train": {"positions": 32, "rollouts": 8},
        "eval": {},
        "seed": 0,
    }
    start = {"mse_target": 0.2, "mse_result": 0.8, "positions": 64}
    balanced = {"mse_target": 0.15, "mse_result": 0.85, "positions": 64}
    evaluation = {
        "step": 40,
        "eval_rollouts": 16,
        "holdout": {"start": start, "balanced": balanced},
        "holdout_value_net_mse_result": 0.5,
    }
    records = [{"step": s, "holdout.mse_target": 0.2 - s / 800} for s in (0, 20, 40)]
    _write(folder, {"config.json": config, "eval.json": evaluation, "metrics.jsonl": records})


@pytest.fixture
def results(tmp_path) -> Path:
    root = tmp_path / "results"
    for preset, accuracies in (("alphago_tiny", (0.4, 0.38)), ("agz_tiny", (0.1, 0.12))):
        for seed, accuracy in enumerate(accuracies):
            _sl_run(root / "sl" / f"{preset}_seed{seed}", preset, seed, accuracy)
    for seed in (0, 1):
        _pg_run(root / "pg" / f"seed{seed}", seed)
    _value_run(root / "value" / "seed10", 0.9)
    _value_run(root / "value" / "seed2", 0.7)
    _rollout_run(root / "rollout" / "records")
    _balance_run(root / "balance" / "katago")
    return root


def test_stages_are_told_apart_from_other_results(results, tmp_path):
    assert stage_of(results / "sl" / "agz_tiny_seed0") == "sl"
    assert stage_of(results / "pg" / "seed0") == "pg"
    assert stage_of(results / "value" / "seed2") == "value"
    assert stage_of(results / "rollout" / "records") == "rollout"
    assert stage_of(results / "balance" / "katago") == "balance"
    # A self-play run (a config with a model, eval.json, no pg or players group) is none.
    selfplay = _write(tmp_path / "selfplay", {"config.json": {"model": {}}, "eval.json": {}})
    assert stage_of(selfplay) is None
    mixed = tmp_path / "mixed"
    _sl_run(mixed / "a", "agz_tiny", 0, 0.1)
    _pg_run(mixed / "b", 0)
    assert folder_stage(mixed) is None
    entries, warnings = find_results(results)
    assert {e.name: e.kind for e in entries} == {
        "balance": "alphago-balance",
        "pg": "alphago-pg",
        "rollout": "alphago-rollout",
        "sl": "alphago-sl",
        "value": "alphago-value",
    }
    assert warnings == []


def test_sl_runs_share_a_row_per_net_one_value_per_seed(results):
    entry = next(e for e in find_results(results)[0] if e.name == "sl")
    text = render_result(entry).markdown
    # 69,492 parameters at 9x9 less a dense value layer's 256 and a policy bias per lost point.
    assert 69_492 - (81 - 25) * (256 + 1) == 55_100
    assert (
        "| `alphago_tiny` | AlphaGo's 48 planes | 55,100 | 0 / 1 | 30 / 30 | 200 / 200 "
        "| **40.0% / 38.0%** | 2.000 / 3.000 | **1.100 / 1.120** |" in text
    )
    assert "| `agz_tiny` | AlphaGo Zero's 17 planes |" in text
    assert "| 10.0% / 12.0% |" in text and "parameters (5×5)" in text


def test_pg_runs_show_each_evaluation_and_the_final_interval(results):
    entry = next(e for e in find_results(results)[0] if e.name == "pg")
    text = render_result(entry).markdown
    assert "| run | wins/games (final) | 10 iterations | 20 (95% interval) |" in text
    # Entropy and game length: the means of the first and the last ten iterations.
    assert "| seed0 | 40/64 | 60.0% | 62.5% [50.0, 75.0] | 1.73 → 1.23 | 46 → 56 |" in text
    assert "| seed1 | 41/64 |" in text


def test_value_runs_bold_the_best_predictor_and_table_the_first_run_by_move(results):
    entry = next(e for e in find_results(results)[0] if e.name == "value")
    text = render_result(entry).markdown
    # Natural order: seed2 before seed10.
    assert text.index("| seed2 |") < text.index("| seed10 |")
    assert "| seed2 | 75 | **0.700** | 1.100 | 0.800 | 0.750 | 1.000 | 0.700 |" in text
    assert "| seed10 | 75 | 0.900 | 1.100 | 0.800 | **0.750** | 1.000 | 0.700 |" in text
    assert "8 random rollouts" in text and "mix, λ = 0.5" in text
    # The bucket of 5 positions is left out; buckets of 5 moves.
    assert "| U | 0-4 | 5-9 |\n" in text and "| positions | 40 | 30 |" in text
    assert "| value net (trained) | 0.70 | 0.60 |" in text


def test_rollout_runs_compare_with_uniform_play_and_every_plot_is_drawn(results, tmp_path):
    entry = next(e for e in find_results(results)[0] if e.name == "rollout")
    text = render_result(entry).markdown
    assert "| fast rollout policy, held-out games | 600 | **30.0%** | 2.50 |" in text
    assert "| uniform over the same moves (what random rollouts play) | 600 | 2.5% | 3.90 |" in text
    assert "| fast rollout policy, training games | 1,200 | 35.0% | 2.30 |" in text
    assert "90.0% of the held-out record moves" in text
    doc = tmp_path / "D.md"
    names = ("sl", "pg", "value", "rollout", "balance")
    doc.write_text("".join(f"<!-- report:{n} -->\n<!-- /report:{n} -->\n" for n in names))
    report = generate_report(results, [doc], tmp_path / "fig")
    assert report.ok, report
    for name in names:
        assert (tmp_path / "fig" / f"{name}.png").read_bytes()[:8] == PNG


def test_a_run_missing_its_numbers_is_named(results):
    (results / "value" / "seed2" / "eval.json").write_text(json.dumps({"positions": 1}))
    entry = next(e for e in find_results(results)[0] if e.name == "value")
    with pytest.raises(ValueError, match=r"value: not a alphago-value result \(no 'mse' field\)"):
        render_result(entry)
    (results / "value" / "seed2" / "eval.json").write_text("{")
    with pytest.raises(ValueError, match=r"seed2/eval.json: not valid JSON"):
        render_result(entry)


def test_balancing_runs_compare_the_start_and_the_balanced_policy(results):
    entry = next(e for e in find_results(results)[0] if e.name == "balance")
    text = render_result(entry).markdown
    assert "| vs V*: start (16 rollouts) | vs V*: balanced |" in text
    assert (
        "| katago | 40 | 32 × (8 + 8) | 64 | 0.200 | **0.150** | **0.800** | 0.850 | 0.500 |"
        in text
    )
