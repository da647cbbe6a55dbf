"""The papers' index: rows of claims rendered from a results folder, verdicts that follow
the numbers, missing or unreadable results as rows (not tracebacks), checked claims files."""

import json
import re
import shutil
from pathlib import Path

import pytest

from eval import cli
from eval.report import generate_report
from eval.report_papers import Score, load_claims, render_papers, verdict

ROOT = Path(__file__).resolve().parent.parent
H2H = [
    {"when": [["x.lo", ">", 0.5], ["x.share", ">=", 0.75]], "then": "reproduced"},
    {"when": [["x", ">", 0.5]], "then": "direction holds"},
    {"when": [["x.hi", "<", 0.5], ["x.share", "<=", 0.25]], "then": "reversed"},
    {"then": "not reproduced"},
]


def cell(agent, opponent, wins, draws, games):
    losses = games - wins - draws
    return {"agent": agent, "opponent_name": opponent, "kind": "puct", "simulations": 16,
            "wins": wins, "draws": draws, "losses": losses, "games": games}  # fmt: skip


def write_sweep(results, name, cells, ratings=None):
    (results / name).mkdir(parents=True, exist_ok=True)
    data = {"cells": cells, "ratings": ratings or {}}
    (results / name / "results.json").write_text(json.dumps(data))


def row(experiment, quantities, ours, rules, **text):
    fields = {"paper": "Paper (2020)", "experiment": experiment, "link": "page.md#a-section",
              "claim": "the trick helps", "paper_number": "+100 Elo",
              "setting": "9×9, tiny net, 2 CPU cores"}  # fmt: skip
    return {**fields, **text, "quantities": quantities, "ours": ours, "verdict": rules}


TRICK = row(
    "Trick",
    {
        "x": {
            "kind": "sweep",
            "sweeps": ["trick_sweep", "trick_sweep_seed1"],
            "a": "^trick(_seed\\d)?/",
            "b": "^control(_seed\\d)?/",
        }
    },  # fmt: skip
    "{x:.1%} of {x.games:,} games; {x.won} of {x.cells} pairings won",
    H2H,
)
MSE = row(
    "Value net",
    {
        "value": {"kind": "field", "files": "mse_tiny.json", "field": "overall.value"},
        "rollouts": {
            "kind": "field",
            "files": "mse_tiny.json",
            "field": "overall.rollouts_4",
        },
        "gain": {"kind": "difference", "of": ["rollouts", "value"]},
    },  # fmt: skip
    "MSE {value:.3f} against {rollouts:.3f}",
    [
        {"when": [["gain", ">=", 0.05]], "then": "reproduced"},
        {"when": [["gain", ">", 0]], "then": "direction holds"},
        {"then": "not reproduced"},
    ],  # fmt: skip
)
RL = row(
    "RL policy",
    {"x": {"kind": "games", "files": "pg/*/eval.json"}},
    "{x:.1%} of {x.games} games",
    [{"when": [["x.lo", ">=", 0.8]], "then": "reproduced"}, {"then": "not reproduced"}],
)


@pytest.fixture
def results(tmp_path):
    """A results folder: two sweeps of a trick against controls, a value-mse file, two
    runs' evaluations."""
    results = tmp_path / "results"
    write_sweep(
        results,
        "trick_sweep",
        [
            cell("trick/step100/puct16/c1.25", "random", 64, 0, 64),  # not a control: left out
            cell("trick/step100/puct16/c1.25", "control/step100", 90, 4, 128),
            cell("trick/step100/puct16/c1.25", "control_seed1/step100", 70, 0, 128),
        ],
    )
    # The other orientation: a control against the trick, counted from the trick's side.
    write_sweep(
        results, "trick_sweep_seed1", [cell("control/step100", "trick_seed1/step100", 40, 2, 128)]
    )
    overall = {"value": 0.55, "rollouts_4": 0.80}
    (results / "mse_tiny.json").write_text(json.dumps({"overall": overall}))
    for seed, wins in ((0, 120), (1, 110)):
        (results / "pg" / f"seed{seed}").mkdir(parents=True)
        evaluation = {"games": 128, "wins": wins, "draws": 2}
        (results / "pg" / f"seed{seed}" / "eval.json").write_text(json.dumps(evaluation))
    return results


def claims_file(tmp_path, rows):
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"rows": rows}, ensure_ascii=False))
    return path


def body(markdown):
    """The table's rows as lists of cells."""
    return [line.strip("| ").split(" | ") for line in markdown.splitlines()[2:]]


def test_the_table_renders_from_a_results_folder(tmp_path, results):
    index = render_papers(claims_file(tmp_path, [TRICK, MSE, RL]), results)
    assert not index.warnings and not index.errors
    lines = index.markdown.splitlines()
    assert lines[0] == (
        "| paper | experiment | claim | paper's number | ours | our setting | verdict |"
    )
    trick, mse, rl = body(index.markdown)
    # (90 + 2) + 70 + (128 - 40 - 1) = 249 of 384 games.
    assert trick == [
        "Paper (2020)", "[Trick](page.md#a-section)", "the trick helps", "+100 Elo",
        "64.8% of 384 games; 3 of 3 pairings won", "9×9, tiny net, 2 CPU cores", "**reproduced**",
    ]  # fmt: skip
    assert mse[4:] == ["MSE 0.550 against 0.800", "9×9, tiny net, 2 CPU cores", "**reproduced**"]
    assert rl[4] == "90.6% of 256 games" and rl[6] == "**reproduced**"  # (230 + 2) / 256


def test_the_verdict_follows_the_number_across_the_rule(tmp_path, results):
    claims = claims_file(tmp_path, [TRICK, MSE])
    verdicts = [r[6] for r in body(render_papers(claims, results).markdown)]
    assert verdicts == ["**reproduced**", "**reproduced**"]
    # The trick's nets now lose most games, every pairing: reversed.
    write_sweep(
        results,
        "trick_sweep",
        [
            cell("trick/step100/puct16/c1.25", "control/step100", 30, 0, 128),
            cell("trick/step100/puct16/c1.25", "control_seed1/step100", 40, 0, 128),
        ],
    )
    lost = [cell("control/step100", "trick_seed1/step100", 100, 0, 128)]
    write_sweep(results, "trick_sweep_seed1", lost)
    # The rollouts' error comes within 0.05 of the value net's: only the direction holds.
    (results / "mse_tiny.json").write_text(
        json.dumps({"overall": {"value": 0.55, "rollouts_4": 0.57}})
    )
    trick, mse = body(render_papers(claims, results).markdown)
    assert trick[4] == "25.5% of 384 games; 0 of 3 pairings won" and trick[6] == "**reversed**"
    assert mse[6] == "**direction holds**"
    # Level: neither way.
    write_sweep(results, "trick_sweep", [cell("trick/step100", "control/step100", 64, 0, 128)])
    level = [cell("control/step100", "trick_seed1/step100", 60, 0, 128)]
    write_sweep(results, "trick_sweep_seed1", level)
    (trick,) = body(render_papers(claims_file(tmp_path, [TRICK]), results).markdown)
    assert trick[6] == "**direction holds**"  # 132 of 256 > 50%, one pairing of two


def test_verdict_rules_compare_quantities_and_attributes():
    score = Score(value=0.6, lo=0.55, hi=0.65, games=100, cells=4, won=3)
    assert verdict(H2H, {"x": score}) == "reproduced"
    assert verdict(H2H, {"x": Score(0.6, 0.45, 0.7, 100, 4, 3)}) == "direction holds"
    rules = [{"when": [["a", "<", "b"]], "then": "lower"}, {"then": "not lower"}]
    assert verdict(rules, {"a": 1.0, "b": 2.0}) == "lower"
    assert verdict(rules, {"a": 2.0, "b": 2.0}) == "not lower"
    assert f"{score:.1%} of {score.games}" == "60.0% of 100" and float(score) == 0.6


def test_a_missing_result_gives_a_row_that_says_so(tmp_path, results):
    missing = row(
        "Missing",
        {
            "x": {
                "kind": "sweep",
                "sweeps": ["trick_sweep", "no_such_sweep"],
                "a": "^trick/",
                "b": "^control/",
            }
        },  # fmt: skip
        "{x:.1%}",
        H2H,
    )
    nothing = {"x": {"kind": "games", "files": "nothing/*/eval.json"}}
    absent_files = {**RL, "experiment": "No runs", "quantities": nothing}
    index = render_papers(claims_file(tmp_path, [missing, TRICK, absent_files]), results)
    first, trick, third = body(index.markdown)
    assert first[4:] == [
        "no result: `results/no_such_sweep`", "9×9, tiny net, 2 CPU cores", "not measured",
    ]  # fmt: skip
    assert third[4] == "no result: `results/nothing/*/eval.json`"
    assert trick[6] == "**reproduced**", "the other rows still render"
    assert len(index.warnings) == 2 and "no_such_sweep" in index.warnings[0]
    assert not index.errors


def test_a_result_without_the_field_is_an_error_row(tmp_path, results):
    wrong = {**MSE, "quantities": {
        "value": {"kind": "field", "files": "mse_tiny.json", "field": "overall.nope"},
        "rollouts": {"kind": "field", "files": "mse_tiny.json", "field": "overall.value"},
        "gain": {"kind": "difference", "of": ["rollouts", "value"]}}}  # fmt: skip
    no_cells = {**TRICK, "quantities": {"x": {"kind": "sweep", "sweeps": ["trick_sweep"],
                                              "a": "^nobody/", "b": "^control/"}}}  # fmt: skip
    index = render_papers(claims_file(tmp_path, [wrong, no_cells]), results)
    first, second = body(index.markdown)
    assert first[4] == "unreadable (see the errors)" and first[6] == "–"
    assert second[4] == "unreadable (see the errors)"
    assert "no field 'overall.nope'" in index.errors[0]
    assert "no cell of trick_sweep plays ^nobody/" in index.errors[1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "unknown key(s) colour"),
        ({"ours": "{y:.1%}"}, "'ours' names no quantity 'y'"),
        ({"verdict": [{"when": [["x", "~", 0.5]], "then": "a"}, {"then": "b"}]}, "operator"),
        ({"verdict": [{"when": [["y", ">", 0.5]], "then": "a"}, {"then": "b"}]}, "no quantity"),
        ({"verdict": [{"when": [["x", ">", 0.5]], "then": "a"}]}, "the last none"),
        ({"quantities": {"x": {"kind": "sweep", "sweeps": [], "a": "("}}}, "missing b"),
        ({"quantities": {"x": {"kind": "sweep", "sweeps": [], "a": "(", "b": ""}}}, "no pattern"),
        ({"quantities": {"x": {"kind": "guess"}}}, "'kind' must be one of"),
        ({"link": None}, "'link' must be a string"),
    ],
)
def test_a_malformed_claims_file_is_one_line_naming_the_row(tmp_path, change, message):
    path = claims_file(tmp_path, [MSE, {**TRICK, **change}])
    with pytest.raises(ValueError, match=r"claims.json: row 2 \(Trick\): ") as err:
        load_claims(path)
    assert message in str(err.value)


def only_other_kinds(results):
    """The results less the sweeps, which `gojax report` would render too: the rest is of
    no kind it knows (skipped with a warning), read by the claims alone."""
    for sweep in results.glob("*/results.json"):
        shutil.rmtree(sweep.parent)
    return results


def test_gojax_report_fills_the_papers_block(tmp_path, results):
    results = only_other_kinds(results)
    docs = tmp_path / "docs"
    (docs / "papers").mkdir(parents=True)
    claims = claims_file(docs / "papers", [RL, MSE])
    page = docs / "papers" / "README.md"
    page.write_text("# Papers\n\n<!-- report:papers -->\nold\n<!-- /report:papers -->\n\nEnd.\n")
    figures = tmp_path / "figures"
    report = generate_report(results, [page], figures, claims=claims)
    assert report.ok, report
    text = page.read_text()
    assert "| Paper (2020) | [RL policy](page.md#a-section) |" in text and "old" not in text
    assert text.endswith("<!-- /report:papers -->\n\nEnd.\n")
    assert generate_report(results, [page], figures, claims=claims, check=True).ok
    # The command line finds the claims in docs/papers/ and the page below docs/.
    evaluation = {"games": 128, "wins": 10, "draws": 0}
    (results / "pg" / "seed1" / "eval.json").write_text(json.dumps(evaluation))
    code = cli.main(
        ["report", "--results", str(results), "--benchmarks", str(page),
         "--docs", str(docs), "--models", str(tmp_path / "models"),
         "--figures", str(figures), "--check"]
    )  # fmt: skip
    assert code == 1, "the RL number changed, so the block is stale"
    (tmp_path / "B.md").write_text("")
    code = cli.main(
        ["report", "--results", str(results), "--benchmarks", str(tmp_path / "B.md"),
         "--docs", str(docs), "--models", str(tmp_path / "models"), "--figures", str(figures)]
    )  # fmt: skip
    assert code == 0
    assert "| 51.2% of 256 games | 9×9, tiny net, 2 CPU cores | **not reproduced** |" in (
        page.read_text()
    )  # (121 + 10) / 256


def test_a_bad_claims_file_is_an_error_and_its_block_is_kept(tmp_path, results):
    results = only_other_kinds(results)
    page = tmp_path / "P.md"
    page.write_text("<!-- report:papers -->\nkept\n<!-- /report:papers -->\n")
    claims = tmp_path / "claims.json"
    claims.write_text("{not json")
    report = generate_report(results, [page], tmp_path / "fig", claims=claims)
    assert not report.ok and "claims.json: not valid JSON" in report.errors[0]
    assert not any("has no result" in w for w in report.warnings)
    assert "kept" in page.read_text()


def _headings(page: Path) -> set[str]:
    """The ids GitHub gives the headings of ``page`` (those outside fenced code)."""
    ids, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6} (.*)$", line)):
            ids.add(re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-"))
    return ids


def test_the_shipped_claims_load_and_link_to_their_pages():
    folder = ROOT / "docs" / "papers"
    rows = load_claims(folder / "claims.json")
    assert len(rows) >= 30
    for claim in rows:
        page, _, anchor = claim["link"].partition("#")
        assert (folder / page).is_file(), claim["link"]
        assert anchor in _headings(folder / page), claim["link"]
