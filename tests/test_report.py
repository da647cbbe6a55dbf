"""gojax report: recorded results rendered into marker blocks, idempotent, stale blocks found."""

import json

import numpy as np
import pytest

from eval import cli
from eval.report import (
    ResultEntry,
    bench_markdown,
    find_results,
    generate_report,
    render_result,
    replace_blocks,
)
from eval.value_mse import ValueMSEConfig, ValueMSEResult, load_json, mse_by_bucket, save_json
from gojax.atomic import DamagedFileWarning

PNG = b"\x89PNG\r\n\x1a\n"
BEFORE = "# Notes\n\nHand-written text before.\n\n"
AFTER = "\nHand-written text after, with a `<!-- report:value_mse_tiny -->` in code.\n"


@pytest.fixture(autouse=True)
def _no_persistent_cache(monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")


def tiny_value_mse() -> ValueMSEResult:
    """24 positions in two 10-move buckets, evaluated four ways."""
    rng = np.random.default_rng(0)
    outcomes = rng.choice([-1, 1], size=24)
    buckets = np.repeat([0, 1], 12)
    predictions = {
        "value": np.clip(0.6 * outcomes + rng.normal(0, 0.3, 24), -1, 1),
        "rollouts_1": rng.choice([-1.0, 1.0], size=24),
        "rollouts_4": rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=24),
    }
    predictions["mix"] = 0.5 * predictions["value"] + 0.5 * predictions["rollouts_4"]
    labels = {"value": "value net", "rollouts_1": "rollouts x1", "rollouts_4": "rollouts x4"}
    labels["mix"] = "mix λ=0.5 (x4)"
    return ValueMSEResult(
        config=ValueMSEConfig(model="m.bin.gz", sgf_dir="games", rollouts=(1, 4), bucket_width=10),
        model_name="tiny-net",
        evaluators=labels,
        stats=mse_by_bucket(predictions, outcomes, buckets),
        games=12,
        skipped={"draw": 1},
        board_sizes=[9],
        seconds={"rollouts": 1.5},
    )


@pytest.fixture
def project(tmp_path):
    """results/ with a value-mse result, a training run and a bench; marked-up markdown."""
    results = tmp_path / "results"
    results.mkdir()
    save_json(tiny_value_mse(), results / "value_mse_tiny.json")
    run = results / "tiny_run"
    run.mkdir()
    records = [
        {"step": 4 * i, "learner.total_loss": 3.0 - 0.5 * i, "selfplay.moves_per_second": 100.0}
        for i in range(1, 4)
    ]
    records[1]["selfplay.resign_false_positive_rate"] = None
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    evaluation = {
        "step": 12,
        "results": [
            {"opponent": "random", "games": 8, "wins": 6, "losses": 2, "draws": 0,
             "win_rate": 0.75, "ci95": [0.41, 0.93]},
        ],
    }  # fmt: skip
    (run / "eval.json").write_text(json.dumps(evaluation))
    bench = {"bench": "tiny", "smoke": True, "rows": [{"batch": 1, "sims_per_s": 1234.4}]}
    (results / "bench_tiny.json").write_text(json.dumps(bench) + "\n")
    blocks = "".join(
        f"<!-- report:{name} -->\nold {name}\n<!-- /report:{name} -->\n"
        for name in ("value_mse_tiny", "tiny_run", "bench_tiny")
    )
    (tmp_path / "BENCHMARKS.md").write_text(BEFORE + blocks + AFTER)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "papers.md").write_text(
        "Paper.\n\n<!-- report:value_mse_tiny -->\n<!-- /report:value_mse_tiny -->\nEnd.\n"
    )
    return tmp_path


def report(root, check=False):
    files = [root / "BENCHMARKS.md", root / "docs" / "papers.md"]
    return generate_report(root / "results", files, root / "docs" / "figures", check=check)


def test_blocks_are_rendered_and_the_rest_is_untouched(project):
    first = report(project)
    assert first.ok and not first.warnings, first
    text = (project / "BENCHMARKS.md").read_text()
    assert text.startswith(BEFORE) and text.endswith(AFTER)
    assert "old " not in text
    assert "| moves | positions | value net | rollouts ×1 | ×4 | mix λ=0.5 (×4) |" in text
    assert "| 0-9 | 12 |" in text and "| 10-19 | 12 |" in text and "| all | 24 |" in text
    assert "Run `tiny_run`: 12 learner steps" in text
    assert "| random | 8 | 6 | 2 | 0 | 75.0% (41.0%–93.0%) |" in text
    assert "**rows**\n\n| batch | sims_per_s |\n|---:|---:|\n| 1 | 1,234 |" in text
    papers = (project / "docs" / "papers.md").read_text()
    assert papers.startswith("Paper.\n\n<!-- report:value_mse_tiny -->\n\n| moves |")
    assert papers.endswith("<!-- /report:value_mse_tiny -->\nEnd.\n")
    figures = project / "docs" / "figures"
    for name in ("value_mse_tiny.png", "tiny_run_learning_curve.png"):
        assert (figures / name).read_bytes()[:8] == PNG
    assert not list(figures.glob(".*")), "no temporary files are left behind"


def test_a_second_run_changes_nothing_and_check_passes(project, capsys):
    report(project)
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert report(project, check=True).ok
    again = report(project)
    assert again.ok and not again.updated
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before
    code = cli.main(
        ["report", "--results", str(project / "results"),
         "--benchmarks", str(project / "BENCHMARKS.md"), "--docs", str(project / "docs"),
         "--figures", str(project / "docs" / "figures"), "--check"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr()


def test_check_finds_an_edited_block_and_a_missing_plot_and_writes_nothing(project, capsys):
    report(project)
    path = project / "BENCHMARKS.md"
    edited = path.read_text().replace("| all | 24 |", "| all | 25 |")
    path.write_text(edited)
    (project / "docs" / "figures" / "tiny_run_learning_curve.png").unlink()
    result = report(project, check=True)
    assert not result.ok
    assert any("value_mse_tiny" in line and "BENCHMARKS.md" in line for line in result.stale)
    assert any("tiny_run_learning_curve.png" in line for line in result.stale)
    assert not any("papers.md" in line for line in result.stale)
    assert path.read_text() == edited
    assert not (project / "docs" / "figures" / "tiny_run_learning_curve.png").exists()
    code = cli.main(
        ["report", "--results", str(project / "results"), "--benchmarks", str(path),
         "--docs", str(project / "docs"), "--figures", str(project / "docs" / "figures"),
         "--check"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1 and "stale: " in out and "value_mse_tiny" in out


def test_a_corrupt_result_is_named_and_the_others_still_render(project, capsys):
    (project / "results" / "bench_broken.json").write_text('{"rows": [1, 2\n')
    path = project / "BENCHMARKS.md"
    path.write_text(
        path.read_text() + "<!-- report:bench_broken -->\nkept\n<!-- /report:bench_broken -->\n"
    )
    code = cli.main(
        ["report", "--results", str(project / "results"), "--benchmarks", str(path),
         "--docs", str(project / "docs"), "--figures", str(project / "docs" / "figures")]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1 and "bench_broken.json" in err and "not valid JSON" in err
    assert "Traceback" not in err
    text = path.read_text()
    assert "\nkept\n" in text, "the broken result's block is left as it was"
    assert "| all | 24 |" in text and "old tiny_run" not in text
    assert "updated" in out


def test_missing_markers_and_orphan_blocks_are_warnings(project):
    (project / "results" / "bench_unmarked.json").write_text('{"x": 1}\n')
    path = project / "BENCHMARKS.md"
    path.write_text(path.read_text() + "<!-- report:gone -->\n<!-- /report:gone -->\n")
    result = report(project)
    assert result.ok
    assert any(
        "bench_unmarked.json" in w and "no <!-- report:bench_unmarked -->" in w
        for w in result.warnings
    )
    assert any("report:gone has no result" in w for w in result.warnings)


def test_unknown_entries_are_skipped_with_a_warning(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "bench_ok.json").write_text("{}")
    entries, warnings = find_results(tmp_path)
    assert [(e.name, e.kind) for e in entries] == [("bench_ok", "bench")]
    assert len(warnings) == 2 and any("notes.txt" in w for w in warnings)
    with pytest.raises(ValueError, match="no such folder"):
        find_results(tmp_path / "absent")


def test_replace_blocks_checks_markers_and_skips_code_fences():
    text = "a\n```\n<!-- report:x -->\n```\n<!-- report:x -->\nold\n<!-- /report:x -->\nb\n"
    new, names = replace_blocks(text, {"x": "NEW"})
    assert names == ["x"]
    assert (
        new == "a\n```\n<!-- report:x -->\n```\n<!-- report:x -->\n\nNEW\n\n<!-- /report:x -->\nb\n"
    )
    assert replace_blocks(new, {"x": "NEW"})[0] == new
    assert replace_blocks(text, {})[0] == text
    with pytest.raises(ValueError, match=r"f.md:2: report:x is never closed"):
        replace_blocks("a\n<!-- report:x -->\n", {}, where="f.md")
    with pytest.raises(ValueError, match=r":3: /report:y closes no open block"):
        replace_blocks("<!-- report:x -->\n\n<!-- /report:y -->\n", {})
    with pytest.raises(ValueError, match="opened inside"):
        replace_blocks("<!-- report:x -->\n<!-- report:y -->\n", {})


def test_value_mse_table_bolds_a_unique_lowest_and_shows_standard_errors(tmp_path):
    result = tiny_value_mse()
    stats = result.stats
    stats["mse"] = {k: [0.5, 0.0] for k in result.evaluators}  # bucket 2: a four-way tie
    stats["mse"]["value"] = [0.25, 0.0]
    save_json(result, tmp_path / "value_mse_t.json")
    markdown = render_result(ResultEntry("value_mse_t", "value-mse", tmp_path / "value_mse_t.json"))
    rows = markdown.markdown.splitlines()
    assert rows[2] == "| 0-9 | 12 | **0.250** | 0.500 | 0.500 | 0.500 |"
    assert rows[3] == "| 10-19 | 12 | 0.000 | 0.000 | 0.000 | 0.000 |"
    se = stats["overall_stderr"]["value"]
    assert f" ± {se:.3f} |" in rows[4] and rows[4].startswith("| all | 24 | ")


def test_load_json_round_trips_and_names_a_bad_file(tmp_path):
    result = tiny_value_mse()
    save_json(result, tmp_path / "r.json")
    loaded = load_json(tmp_path / "r.json")
    assert loaded.config == result.config and loaded.evaluators == result.evaluators
    assert loaded.stats["mse"] == result.stats["mse"] and loaded.games == 12
    data = json.loads((tmp_path / "r.json").read_text())
    del data["stderr"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"bad.json: not a value-mse result \(no 'stderr' field\)"):
        load_json(tmp_path / "bad.json")
    (tmp_path / "cut.json").write_text("{")
    with pytest.raises(ValueError, match="cut.json: not valid JSON"):
        load_json(tmp_path / "cut.json")


def test_training_records_without_a_step_are_named_by_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n{"loss": 2}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl: line 2 is not a record with a step"):
        render_result(ResultEntry("run", "training", run))


def test_bench_markdown_tables_scalars_and_rows():
    text = bench_markdown(
        {"device": "cpu", "config": {"batch": 64}, "rows": [{"n": 1, "rate": 0.5}, {"n": 2}]}
    )
    assert "| device | cpu |" in text and "| config.batch | 64 |" in text
    assert "**rows**\n\n| n | rate |\n|---:|---:|\n| 1 | 0.5 |\n| 2 | – |" in text


def test_sweep_results_render_cells_ratings_and_plots(tmp_path):
    folder = tmp_path / "results" / "tiny_sweep"
    folder.mkdir(parents=True)
    cells = [
        {"step": step, "kind": "puct", "simulations": 8, "c_puct": 1.25,
         "agent": f"s{step}", "opponent": "random", "opponent_name": "random",
         "games": 10, "wins": wins, "draws": 0, "losses": 10 - wins, "win_rate": wins / 10,
         "ci95_lo": 0.1, "ci95_hi": 0.9, "win_rate_as_black": 0.5, "win_rate_as_white": 0.5}
        for step, wins in ((10, 4), (20, 7))
    ]  # fmt: skip
    ratings = {
        "s20": {"elo": 150.0, "lo": 20.0, "hi": 280.0, "games": 10},
        "random": {"elo": 0.0, "lo": 0.0, "hi": 0.0, "games": 20},
        "s10": {"elo": -70.0, "lo": -200.0, "hi": 60.0, "games": 10},
    }
    (folder / "results.json").write_text(json.dumps({"cells": cells, "ratings": ratings}))
    (tmp_path / "B.md").write_text("<!-- report:tiny_sweep -->\n<!-- /report:tiny_sweep -->\n")
    result = generate_report(tmp_path / "results", [tmp_path / "B.md"], tmp_path / "fig")
    assert result.ok, result
    text = (tmp_path / "B.md").read_text()
    assert "| s20 | random | 10 | 7 | 0 | 3 | 70.0% (10.0%–90.0%) |" in text
    assert "| 1 | s20 | 150.0 | 20.0 to 280.0 | 10 |" in text
    assert "| 3 | s10 | -70.0 | -200.0 to 60.0 | 10 |" in text
    for name in ("win_rate_vs_simulations", "ratings", "elo_vs_step"):
        assert (tmp_path / "fig" / f"tiny_sweep_{name}.png").read_bytes()[:8] == PNG


def test_run_comparison_sweeps_render_nets_by_search(tmp_path):
    folder = tmp_path / "results" / "runs_sweep"
    folder.mkdir(parents=True)

    def cell(kind, sims, opponent, name, wins):
        return {
            "step": 9, "kind": kind, "simulations": sims, "c_puct": 1.25,
            "agent": f"a/step9/{kind}{sims}/c1.25", "opponent": opponent,
            "opponent_name": name, "games": 8, "wins": wins, "draws": 0,
            "losses": 8 - wins, "win_rate": wins / 8, "ci95_lo": 0.0, "ci95_hi": 1.0,
        }  # fmt: skip

    cells = [
        cell("gumbel", 2, "random", "random", 8),
        cell("gumbel", 2, "run:runs/b:7", "b/step7/gumbel2/c1.25", 6),
        cell("puct", 16, "random", "random", 7),
        cell("puct", 16, "run:runs/b:7", "b/step7/puct16/c1.25", 2),
    ]
    ratings = {
        "a/step9/gumbel2/c1.25": {"elo": 400.0, "lo": 300.0, "hi": 500.0, "games": 16},
        "a/step9/puct16/c1.25": {"elo": 250.4, "lo": 150.0, "hi": 350.0, "games": 16},
        "b/step7/gumbel2/c1.25": {"elo": 210.0, "lo": 90.0, "hi": 330.0, "games": 8},
        "b/step7/puct16/c1.25": {"elo": 445.0, "lo": 300.0, "hi": 590.0, "games": 8},
        "random": {"elo": 0.0, "lo": 0.0, "hi": 0.0, "games": 16},
    }
    (folder / "results.json").write_text(json.dumps({"cells": cells, "ratings": ratings}))
    (tmp_path / "P.md").write_text("<!-- report:runs_sweep -->\n<!-- /report:runs_sweep -->\n")
    assert generate_report(tmp_path / "results", [tmp_path / "P.md"], tmp_path / "fig").ok
    text = (tmp_path / "P.md").read_text()
    # Nets by their best rating; a column per search.
    assert "| net | gumbel 2 | puct 16 |" in text
    assert "| b/step7 | 210 (90 to 330) | 445 (300 to 590) |" in text
    assert "| a/step9 | 400 (300 to 500) | 250 (150 to 350) |" in text
    assert text.index("| b/step7 |") < text.index("| a/step9 |")
    assert "Fixed opponents: random 0 (0 to 0)." in text
    assert "Win rate (95% interval) of a/step9 against each opponent" in text
    assert "| search | random | b/step7 |" in text
    assert "| gumbel 2 | 100.0% (0.0%–100.0%) | 75.0% (0.0%–100.0%) |" in text
    assert "| puct 16 | 87.5% (0.0%–100.0%) | 25.0% (0.0%–100.0%) |" in text
    assert "a/step9/gumbel2/c1.25 | random" not in text  # not the flat list of cells


def test_run_comparison_sweeps_name_the_rollout_lambda_of_a_search(tmp_path):
    folder = tmp_path / "results" / "mix_sweep"
    folder.mkdir(parents=True)

    def cell(lam, wins):
        mix = f"/lam{lam:g}+fast" if lam else ""
        return {
            "step": 9, "kind": "puct", "simulations": 32, "c_puct": 1.25,
            "rollout_lambda": lam, "agent": f"a/step9/puct32/c1.25{mix}",
            "opponent": "run:runs/b:7", "opponent_name": f"b/step7/puct32/c1.25{mix}",
            "games": 8, "wins": wins, "draws": 0, "losses": 8 - wins, "win_rate": wins / 8,
            "ci95_lo": 0.0, "ci95_hi": 1.0,
        }  # fmt: skip

    ratings = {
        "a/step9/puct32/c1.25": {"elo": 100.0, "lo": 0.0, "hi": 200.0, "games": 8},
        "a/step9/puct32/c1.25/lam0.5+fast": {"elo": 50.0, "lo": -50.0, "hi": 150.0, "games": 8},
        "b/step7/puct32/c1.25": {"elo": 0.0, "lo": 0.0, "hi": 0.0, "games": 8},
        "b/step7/puct32/c1.25/lam0.5+fast": {"elo": 0.0, "lo": 0.0, "hi": 0.0, "games": 8},
    }
    cells = [cell(0.0, 6), cell(0.5, 5)]
    (folder / "results.json").write_text(json.dumps({"cells": cells, "ratings": ratings}))
    (tmp_path / "P.md").write_text("<!-- report:mix_sweep -->\n<!-- /report:mix_sweep -->\n")
    assert generate_report(tmp_path / "results", [tmp_path / "P.md"], tmp_path / "fig").ok
    text = (tmp_path / "P.md").read_text()
    assert "| net | puct 32 | puct 32, λ 0.5 |" in text
    assert "| a/step9 | 100 (0 to 200) | 50 (-50 to 150) |" in text
    assert "| search | b/step7 |" in text
    assert "| puct 32, λ 0.5 | 62.5% (0.0%–100.0%) |" in text
    assert "Fixed opponents" not in text


def test_a_folder_of_training_runs_renders_one_comparison(tmp_path):
    results = tmp_path / "results" / "arms"
    arms = [("puct_n2", "puct", 0, 25, 1.0), ("gumbel_n2", "gumbel", 1, 58, 1.0)]
    arms.append(("puct_n2_off", "puct", 0, 20, 0.0))  # an ablation: a learner weight at 0
    for name, kind, seed, wins, weight in arms:
        run = results / name
        run.mkdir(parents=True)
        records = [
            {"step": 16, "games": 32, "wall_seconds": 3.0, "learner.policy_loss": 4.5},
            {"step": 32, "games": 64, "wall_seconds": 120.0, "learner.policy_loss": 4.0},
            {"step": 32, "eval.uct16.win_rate": wins / 64},
        ]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        config = {"seed": seed, "selfplay": {"search_kind": kind, "num_simulations": 2},
                  "eval": {"num_simulations": 16}, "learner": {"ownership_weight": weight,
                  "batch_size": 32, "num_devices": seed}}  # fmt: skip
        if kind == "gumbel":  # a key added since the other runs ran, at its default
            config["selfplay"]["fpu_reduction"] = 0.2
        (run / "config.json").write_text(json.dumps(config))
        evaluation = {"step": 32, "results": [
            {"opponent": "uct16", "games": 64, "wins": wins, "losses": 64 - wins, "draws": 0,
             "win_rate": wins / 64, "ci95": [0.25, 0.75]}]}  # fmt: skip
        (run / "eval.json").write_text(json.dumps(evaluation))
    (tmp_path / "P.md").write_text("<!-- report:arms -->\n<!-- /report:arms -->\n")
    report = generate_report(tmp_path / "results", [tmp_path / "P.md"], tmp_path / "fig")
    assert report.ok and not report.warnings, report
    text = (tmp_path / "P.md").read_text()
    # The setting that differs between runs gets a column (not those alike, nor devices,
    # nor a key that one run has at the default the others ran with before it existed).
    header = (
        "| run | self-play search | seed | `learner.ownership_weight` | learner steps | games "
        "| minutes | vs uct16 (95% CI) |"
    )
    assert header in text
    row = "| `gumbel_n2` | gumbel 2 | 1 | 1 | 32 | 64 | 2.0 | 58/64, 90.6% (25.0%–75.0%) |"
    assert row in text
    assert "| `puct_n2` | puct 2 | 0 | 1 | 32 | 64 | 2.0 | 25/64, 39.1% (25.0%–75.0%) |" in text
    assert "| `puct_n2_off` | puct 2 | 0 | 0 | 32 | 64 | 2.0 | 20/64, 31.2%" in text
    assert "with 16 simulations a move" in text
    assert (tmp_path / "fig" / "arms_curves.png").read_bytes()[:8] == PNG
    assert generate_report(
        tmp_path / "results", [tmp_path / "P.md"], tmp_path / "fig", check=True
    ).ok


def _match_folder(folder, size, outcomes):
    """A `gojax match` folder: its manifest and one result line per ``(black, winner)``."""
    folder.mkdir(parents=True)
    manifest = {"engine_a": "gojax gtp --visits 8", "engine_b": "gnugo --mode gtp --level 10",
                "size": size, "komi": 7.0, "rules": "chinese", "max_moves": 2 * size * size,
                "time": None}  # fmt: skip
    (folder / "match.json").write_text(json.dumps(manifest))
    lines = []
    for game, (black, winner) in enumerate(outcomes):
        names = {"A": "ours", "B": "gnugo"}
        white = "B" if black == "A" else "A"
        result = "0" if winner is None else ("B+3" if winner == black else "W+3")
        lines.append(json.dumps({
            "game": game, "black": black, "black_name": names[black],
            "white_name": names[white], "result": result, "winner": winner,
            "reason": "score", "moves": 40 + game, "margin": 3.0, "loser_move": None,
            "seconds": 1.0, "sgf": f"game-{game + 1:04d}.sgf",
        }) + "\n")  # fmt: skip
    # A torn last line: reported (DamagedFileWarning), not counted.
    (folder / "results.jsonl").write_text("".join(lines) + '{"game": 9, "bla')


def test_match_folders_render_as_a_strength_table_and_plot(tmp_path):
    strength = tmp_path / "results" / "strength"
    # 19x19 first on disk: the table still lists 9x9 first.
    _match_folder(strength / "big", 19, [("A", "A"), ("B", "A")])
    _match_folder(strength / "small", 9, [("A", "A"), ("B", "B"), ("A", None), ("B", "A")])
    (tmp_path / "B.md").write_text("<!-- report:strength -->\n<!-- /report:strength -->\n")
    with pytest.warns(DamagedFileWarning, match="results.jsonl: 1 line.*cut short"):
        result = generate_report(tmp_path / "results", [tmp_path / "B.md"], tmp_path / "fig")
    assert result.ok and not result.warnings, result
    text = (tmp_path / "B.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    # 9x9: A won as Black (game 0) and as White (game 3), drew once: 2.5 of 4.
    assert (
        rows[0]
        == "| `small` | 9×9 | 7 | ours | gnugo | 4 | 2 (1 / 1) | 1 | 62.5% ("
        + (rows[0].split("62.5% (")[1])
    )
    assert rows[0].endswith(" | 42 |")  # mean of 40..43 moves, the torn line not counted
    assert rows[1].startswith("| `big` | 19×19 | 7 | ours | gnugo | 2 | 2 (1 / 1) | 0 | 100.0% (")
    assert "- `small`: A = `gojax gtp --visits 8`; B = `gnugo --mode gtp --level 10`" in text
    assert (tmp_path / "fig" / "strength.png").read_bytes()[:8] == PNG


def test_a_recounted_match_gets_a_column_of_its_recounted_win_rate(tmp_path):
    strength = tmp_path / "results" / "strength"
    # Game 0: A (Black) won by the match's count; the engine's count gives it to White.
    _match_folder(strength / "small", 9, [("A", "A"), ("B", "B")])
    _match_folder(strength / "other", 9, [("A", "A")])
    recount = {"game": 0, "result": "B+3", "recount": "W+2"}
    (strength / "small" / "recount.jsonl").write_text(json.dumps(recount) + "\n")
    (tmp_path / "B.md").write_text("<!-- report:strength -->\n<!-- /report:strength -->\n")
    with pytest.warns(DamagedFileWarning, match="results.jsonl: 1 line.*cut short"):
        result = generate_report(tmp_path / "results", [tmp_path / "B.md"], tmp_path / "fig")
    assert result.ok and not result.warnings, result
    text = (tmp_path / "B.md").read_text()
    assert "| A win rate, recounted |" in text and "`gojax recount`" in text
    rows = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}
    small = "| `small` | 9×9 | 7 | ours | gnugo | 2 | 1 (1 / 0) | 0 | 50.0% ("
    assert rows["small"].startswith(small)
    assert rows["small"].endswith(" | 0.0% |")  # both games lost by the engine's count
    assert rows["other"].endswith(" | – |")  # never recounted
    (strength / "small" / "recount.jsonl").write_text("{not json\n")
    entries, _ = find_results(tmp_path / "results")
    with pytest.warns(DamagedFileWarning):
        with pytest.raises(ValueError, match=r"recount.jsonl: not a recount file"):
            render_result(entries[0])


def test_a_broken_match_manifest_is_named(tmp_path):
    strength = tmp_path / "results" / "strength"
    _match_folder(strength / "m", 9, [("A", "A")])
    (strength / "m" / "match.json").write_text('{"engine_a": "x"}')
    entries, _ = find_results(tmp_path / "results")
    with pytest.raises(ValueError, match=r"m/match.json: not a match manifest"):
        render_result(entries[0])


def test_elo_text_never_prints_minus_zero():
    from eval.ratings import Rating
    from eval.report import _elo_text

    assert _elo_text(Rating(elo=-1e-9, lo=-682.3, hi=682.3, games=128)) == "0 (-682 to 682)"
    assert _elo_text(Rating(elo=-0.4, lo=-0.6, hi=1.5, games=1)) == "0 (-1 to 2)"
