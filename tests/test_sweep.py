"""`gojax sweep`: the grid, resuming an interrupted sweep, the result files, config errors."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import pytest

from eval.cli import main
from eval.sweep import (
    Cell,
    _Agents,
    _parse_opponent,
    _split_lambda,
    _split_run,
    agent_name,
    cells_of,
    check_config,
    default_config,
    read_cell,
    run_sweep,
)
from gojax.atomic import DamagedFileWarning
from train.checkpoint import Checkpointer, checkpoint_steps, restore_variables
from train.learner import create_train_state
from train.loop import apply_overrides, config_to_json, learner_config
from train.loop import default_config as run_default_config
from train.model import ModelSpec

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "sweep_go9_tiny.py"


def _make_run(
    run: Path, size: int, steps: tuple[int, ...], seed: int = 0, counters: bool = False
) -> Path:
    """A training workdir with checkpoints at ``steps`` of a ``size`` x ``size`` agz_tiny net;
    ``counters``: each saved with the loop's counters (100 games, 1,800 CPU seconds a step)."""
    config = run_default_config()
    config.board.size = size
    config.board.komi = 0.5
    config.model.preset = "agz_tiny"
    spec = ModelSpec("agz_tiny")
    ckpt = Checkpointer(run / "checkpoints", save_every=1)
    for step in steps:
        key = jax.random.PRNGKey(seed + step)
        state = create_train_state(spec, learner_config(config), key, size)
        state = state.replace(step=jnp.asarray(step, jnp.int32))
        info = {"counters": {"games": 100 * step, "cpu_seconds": 1800.0 * step}}
        ckpt.save(
            step, state, config=config_to_json(config), info=info if counters else None, force=True
        )
    ckpt.close()
    return run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A training workdir with two checkpoints (steps 1 and 2) of a 5x5 ``agz_tiny`` net."""
    return _make_run(tmp_path_factory.mktemp("run"), 5, (1, 2))


@pytest.fixture(scope="module")
def other_run(tmp_path_factory) -> Path:
    """Another 5x5 run (other weights), checkpoints at steps 3 and 7."""
    return _make_run(tmp_path_factory.mktemp("base") / "other", 5, (3, 7), seed=100)


def test_restore_variables_reads_each_step(run_dir):
    assert checkpoint_steps(run_dir) == [1, 2]
    one, two = restore_variables(run_dir, 1), restore_variables(run_dir)
    assert (one.step, two.step) == (1, 2) and one.config["board"]["size"] == 5
    kernel = one.variables["params"]["conv"]["kernel"]
    assert kernel.shape == two.variables["params"]["conv"]["kernel"].shape
    assert not (kernel == two.variables["params"]["conv"]["kernel"]).all()
    with pytest.raises(ValueError, match="no checkpoint at step 3"):
        restore_variables(run_dir, 3)
    with pytest.raises(ValueError, match="no checkpoints"):
        restore_variables(run_dir / "missing")


def test_grid_order_and_steps():
    c = default_config()
    c.checkpoints.workdir = "run"
    c.checkpoints.steps = (-1, 10)
    c.search.simulations = (8, 16)
    c.opponents = ("random", "checkpoint:latest")
    cells = cells_of(c, [10, 20])
    assert [(x.step, x.simulations, x.opponent) for x in cells] == [
        (10, 8, "random"),
        (10, 8, "checkpoint:20"),
        (10, 16, "random"),
        (10, 16, "checkpoint:20"),
        (20, 8, "random"),
        (20, 8, "checkpoint:20"),
        (20, 16, "random"),
        (20, 16, "checkpoint:20"),
    ]
    assert cells[1].id == "step00000010_puct_s8_c1.25_vs_checkpoint-20"
    assert agent_name(10, "puct", 8, 1.25) == "step10/puct8/c1.25"
    assert agent_name(10, "puct", 8, 1.25, "mine") == "mine/step10/puct8/c1.25"
    assert agent_name(10, "puct", 8, 1.25, "", 0.5) == "step10/puct8/c1.25/lam0.5"
    assert agent_name(10, "puct", 8, 1.25, "", 0.5, "fast") == "step10/puct8/c1.25/lam0.5+fast"
    assert len({x.id for x in cells}) == len(cells)
    # Rollout lambdas are an axis before the opponents; an opponent may carry its own.
    c.checkpoints.steps = (20,)
    c.search.simulations = (8,)
    c.search.rollout_lambda = (0.0, 0.5)
    c.opponents = ("checkpoint:latest@lam1", "run:runs/x:300@lam0.25", "random")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("eval.sweep._resolve_run", lambda arg: f"run:{arg}")
        cells = cells_of(c, [10, 20])
    assert [(x.rollout_lambda, x.opponent) for x in cells] == [
        (0.0, "checkpoint:20@lam1"),
        (0.0, "run:runs/x:300@lam0.25"),
        (0.0, "random"),
        (0.5, "checkpoint:20@lam1"),
        (0.5, "run:runs/x:300@lam0.25"),
        (0.5, "random"),
    ]
    assert cells[0].id == "step00000020_puct_s8_c1.25_vs_checkpoint-20-lam1"
    assert cells[3].id == "step00000020_puct_s8_c1.25_lam0.5_vs_checkpoint-20-lam1"
    assert _split_lambda("run:runs/x:300@lam0.25") == ("run:runs/x:300", 0.25)
    assert _split_lambda("checkpoint:3") == ("checkpoint:3", None)
    assert _parse_opponent("checkpoint:latest@lam0") == ("checkpoint", "latest")
    apply_overrides(c, ["--config.search.rollout_lambda=0.5"])  # one value: a one-point axis
    assert c.search.rollout_lambda == (0.5,)
    c.checkpoints.steps = (30,)
    with pytest.raises(ValueError, match="no checkpoint at step 30"):
        cells_of(c, [10, 20])


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("opponents", ("random", "alphago"), "unknown opponent 'alphago'"),
        ("opponents", ("uct:0",), "unknown opponent"),
        ("opponents", ("uct:16:",), "unknown opponent"),
        ("search.rollout_policy", "p.npz", "needs search.rollout_lambda > 0"),
        ("opponents", ("gnugo:12",), "unknown opponent"),
        ("games.num_games", 0, r"--config.games.num_games=0: must be at least 1"),
        ("search.simulations", (), r"search.simulations=\(\): must be a non-empty tuple"),
        (
            "search.rollout_lambda",
            (0.5, 1.5),
            r"rollout_lambda=\(0.5, 1.5\): each must be a number in",
        ),
        ("search.rollout_lambda", (), r"search.rollout_lambda=\(\): must be a non-empty"),
        ("opponents", ("uct:16@lam0.5",), "only checkpoint: and run: opponents take @lam"),
        ("opponents", ("checkpoint:latest@lam2",), r"@lam takes a rollout lambda in \[0, 1\]"),
        ("opponents", ("run:runs/a@lamx",), r"@lam takes a rollout lambda in \[0, 1\]"),
        ("search.rollouts", 0, "search.rollouts=0: must be at least 1"),
        ("games.referee", "gnugo --mode gtp", "games.referee counts GTP games: it needs a gnugo"),
    ],
)
def test_bad_configs_are_clear_errors(key, value, message):
    c = default_config()
    c.checkpoints.workdir = "run"
    node, leaf = (c, key) if "." not in key else (c[key.split(".")[0]], key.split(".")[1])
    node[leaf] = value
    c.games.opening_moves = 2
    with pytest.raises(ValueError, match=message):
        check_config(c)


def test_rollout_policy_opponents_and_files(tmp_path):
    from eval.sweep import rollout_policy_label
    from gojax import rollout_policy

    arg = "16:runs/fast/rollout_policy.npz"
    assert _parse_opponent(f"uct:{arg}") == ("uct", arg)
    assert rollout_policy_label("runs/fast/rollout_policy.npz") == "fast"
    assert rollout_policy_label("weights/patterns9.npz") == "patterns9"
    c = default_config()
    c.checkpoints.workdir = "run"
    c.search.rollout_lambda = (0.5,)
    c.search.rollout_policy = str(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="missing.npz: no such rollout policy file"):
        check_config(c)
    rollout_policy.save(tmp_path / "fast.npz", rollout_policy.zero_weights())
    c.search.rollout_policy = str(tmp_path / "fast.npz")
    check_config(c)
    # An opponent's own lambda is enough to use the policy.
    c.search.rollout_lambda = (0.0,)
    c.opponents = ("checkpoint:latest@lam1",)
    check_config(c)


def test_unknown_keys_are_rejected(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the config names runs/go9_tiny relative to here: none
    c = default_config()
    c.checkpoints.workdir = "run"
    c.search.simulation = (8,)  # a typo in a config file
    with pytest.raises(
        ValueError, match=r"unknown config key 'search.simulation' in search \(did you mean"
    ):
        check_config(c)
    out = str(tmp_path / "sweep")
    code = main(["sweep", "--config", str(CONFIG), "--workdir", out, "--config.gmaes=3"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown config key 'gmaes'" in err and "Traceback" not in err
    code = main(["sweep", "--config", str(CONFIG), "--workdir", out])
    assert code == 2 and "runs/go9_tiny: no checkpoints" in capsys.readouterr().err


def _overrides(run_dir: Path, opponents: str = "('random',)") -> list[str]:
    return [
        f"--config.checkpoints.workdir={run_dir}",
        "--config.checkpoints.steps=(1, 2)",
        "--config.search.simulations=(2,)",
        f"--config.opponents={opponents}",
        "--config.games.num_games=4",
        "--config.games.opening_moves=1",
        "--config.board.max_moves=12",
    ]


def _config(run_dir: Path, opponents: str = "('random',)"):
    from train.loop import load_config

    config = load_config(CONFIG)
    apply_overrides(config, _overrides(run_dir, opponents))
    return config


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_interrupted_sweep_resumes_without_redoing_cells(run_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ["sweep", "--config", str(CONFIG), "--workdir", str(out), "--quiet"]
    assert main(args + _overrides(run_dir) + ["--max-cells", "1"]) == 0
    first = sorted((out / "cells").iterdir())
    assert [p.name for p in first] == ["step00000001_puct_s2_c1.25_vs_random.json"]
    stamp, text = first[0].stat().st_mtime_ns, first[0].read_text()
    assert "1 cells left" in capsys.readouterr().err
    assert len(_csv(out / "results.csv")) == 1  # summaries cover what is finished

    config = _config(run_dir)
    summary = run_sweep(config, out, progress=False)
    assert summary["played"] == 1 and summary["total"] == 2
    assert first[0].stat().st_mtime_ns == stamp and first[0].read_text() == text
    again = run_sweep(config, out, progress=False)
    assert again["played"] == 0 and len(again["cells"]) == 2

    rows = _csv(out / "results.csv")
    assert [r["cell"] for r in rows] == [
        "step00000001_puct_s2_c1.25_vs_random",
        "step00000002_puct_s2_c1.25_vs_random",
    ]
    assert [r["agent"] for r in rows] == ["step1/puct2/c1.25", "step2/puct2/c1.25"]
    for r in rows:
        assert r["opponent"] == r["opponent_name"] == "random"
        assert int(r["games"]) == 4
        assert int(r["wins"]) + int(r["draws"]) + int(r["losses"]) == 4
        assert float(r["ci95_lo"]) <= float(r["win_rate"]) <= float(r["ci95_hi"])

    results = json.loads((out / "results.json").read_text())
    assert [c["cell"] for c in results["cells"]] == [r["cell"] for r in rows]
    assert set(results["ratings"]) == {"random", "step1/puct2/c1.25", "step2/puct2/c1.25"}
    assert results["ratings"]["random"]["elo"] == 0.0
    for name in ("win_rate_vs_simulations.png", "elo_vs_step.png", "ratings.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
    assert "random" in (out / "ratings.txt").read_text()
    assert not (out / "elo_vs_compute.png").exists()  # its checkpoints have no counters

    # The same workdir with other shared settings is refused, not silently mixed.
    config.games.num_games = 6
    with pytest.raises(ValueError, match="holds a sweep with other settings"):
        run_sweep(config, out, progress=False)


def _row(cell: Cell, **changes) -> dict:
    """A finished cell's row as ``_play_cell`` writes it (4 games: 3 wins, 1 loss)."""
    row = {
        "cell": cell.id,
        **dataclasses.asdict(cell),
        "agent": "step1/puct2/c1.25",
        "opponent_name": cell.opponent,
        "games": 4, "wins": 3, "draws": 0, "losses": 1,
        "win_rate": 0.75, "ci95_lo": 0.3, "ci95_hi": 0.95,
        "win_rate_as_black": 1.0, "win_rate_as_white": 0.5,
        "mean_length": 12.0, "resignations": 0, "seconds": 1.5, "games_per_second": 2.7,
    }  # fmt: skip
    row.update(changes)
    return row


CELL = Cell(step=1, kind="puct", simulations=2, c_puct=1.25, opponent="random")
OTHER = Cell(step=2, kind="puct", simulations=2, c_puct=1.25, opponent="random")


@pytest.mark.parametrize(
    "content, why",
    [
        (json.dumps(_row(CELL))[:40].encode(), "unreadable (JSONDecodeError"),
        (b"", "unreadable (JSONDecodeError"),
        (b"\xff\xfe\x00garbage", "unreadable"),
        (b"[1, 2]", "not a cell's row (a JSON list)"),
        (json.dumps({"cell": CELL.id}).encode(), "not a cell's row (no kind, agent"),
        (json.dumps(_row(CELL, wins="3")).encode(), "wins='3' is not an integer"),
        (json.dumps(_row(CELL, win_rate=None)).encode(), "win_rate=None is not a number"),
        (json.dumps(_row(OTHER)).encode(), f"the row of cell '{OTHER.id}', not of"),
        (json.dumps(_row(CELL, wins=4)).encode(), "(4 + 0 + 1) do not add up to its 4 games"),
    ],
)
def test_a_damaged_cell_file_is_reported_and_read_as_not_played(content, why, tmp_path):
    path = tmp_path / "cells" / f"{CELL.id}.json"
    path.parent.mkdir()
    path.write_bytes(json.dumps(_row(CELL)).encode())
    assert read_cell(tmp_path, CELL) == _row(CELL)  # a whole row is read as it is
    path.write_bytes(content)
    with pytest.warns(DamagedFileWarning, match=rf"{path}: .*{re.escape(why)}.*played again"):
        assert read_cell(tmp_path, CELL) is None
    assert read_cell(tmp_path, OTHER) is None  # no file: not played, nothing to report


def test_a_torn_cell_file_is_played_again_on_resume(run_dir, tmp_path):
    """A finished sweep whose first cell file is cut short: the resume reports it once,
    plays that cell again (the same games: its counts come back) and counts it once."""
    out = tmp_path / "sweep"
    config = _config(run_dir)
    first = run_sweep(config, out, progress=False)
    path = out / "cells" / "step00000001_puct_s2_c1.25_vs_random.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.warns(DamagedFileWarning, match=re.escape(str(path))) as caught:
        again = run_sweep(config, out, progress=False)
    assert len([w for w in caught if w.category is DamagedFileWarning]) == 1
    assert again["played"] == 1 and len(again["cells"]) == 2
    for before, after in zip(first["cells"], again["cells"], strict=True):
        counts = ("cell", "games", "wins", "draws", "losses")
        assert {k: before[k] for k in counts} == {k: after[k] for k in counts}
    assert json.loads(path.read_text())["cell"] == "step00000001_puct_s2_c1.25_vs_random"
    assert len(_csv(out / "results.csv")) == 2


def test_a_run_with_counters_is_plotted_against_its_compute(tmp_path):
    run = _make_run(tmp_path / "run", 5, (1, 2), counters=True)
    out = tmp_path / "sweep"
    summary = run_sweep(_config(run), out, progress=False)
    assert summary["total"] == 2
    compute = json.loads((out / "results.json").read_text())["compute"]
    assert compute == {
        "1": {"games": 100, "cpu_seconds": 1800.0},
        "2": {"games": 200, "cpu_seconds": 3600.0},
    }
    assert (out / "elo_vs_compute.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_checkpoint_opponents(run_dir, tmp_path):
    config = _config(run_dir, "('checkpoint:1',)")
    summary = run_sweep(config, tmp_path, progress=False)
    rows = _csv(tmp_path / "results.csv")
    assert [r["opponent"] for r in rows] == ["checkpoint:1", "checkpoint:1"]
    assert [r["opponent_name"] for r in rows] == ["step1/puct2/c1.25"] * 2
    # Step 1 against itself rates nothing; step 2 against step 1 does.
    assert set(summary["ratings"]) == {"step1/puct2/c1.25", "step2/puct2/c1.25"}
    assert rows[0]["agent"] == rows[0]["opponent_name"]
    assert set(summary["ratings"]["step1/puct2/c1.25"].__dict__) == {"elo", "lo", "hi", "games"}


def test_run_opponents_parse_and_resolve(run_dir, other_run, tmp_path):
    assert _split_run("runs/a") == ("runs/a", "latest")
    assert _split_run("runs/a:300") == ("runs/a", "300")
    assert _split_run("C:/runs/a:latest") == ("C:/runs/a", "latest")
    assert _split_run("runs/a:b") == ("runs/a:b", "latest")  # not a step: part of the path
    assert _parse_opponent("run:runs/a:300") == ("run", "runs/a:300")
    with pytest.raises(ValueError, match="unknown opponent 'run:'.*run:<workdir>"):
        _parse_opponent("run:")
    c = default_config()
    c.checkpoints.workdir = str(run_dir)
    c.search.simulations = (2,)
    c.opponents = (f"run:{other_run}", f"run:{other_run}:3", f"run:{other_run}:latest")
    cells = cells_of(c, [1, 2])
    # latest resolves to the other run's newest checkpoint; the same opponent is played once.
    assert [x.opponent for x in cells] == [f"run:{other_run}:7", f"run:{other_run}:3"] * 2
    c.opponents = (f"run:{other_run}:5",)
    with pytest.raises(ValueError, match=r"other: no checkpoint at step 5; there are \[3, 7\]"):
        cells_of(c, [1, 2])
    c.opponents = (f"run:{tmp_path / 'nothing'}",)
    with pytest.raises(ValueError, match="nothing has no checkpoints"):
        cells_of(c, [1, 2])


def test_run_opponent_on_another_board_is_refused(run_dir, tmp_path, capsys):
    seven = _make_run(tmp_path / "seven", 7, (1,))
    args = ["sweep", "--config", str(CONFIG), "--workdir", str(tmp_path / "sweep"), "--quiet"]
    code = main(args + _overrides(run_dir, f"('run:{seven}',)"))
    err = capsys.readouterr().err
    assert code == 2 and "seven plays 7x7, not 5x5" in err and "Traceback" not in err
    assert not (tmp_path / "sweep" / "cells").exists()


@pytest.mark.slow
def test_run_opponents_play_under_the_cells_search(run_dir, other_run, tmp_path):
    config = _config(run_dir, f"('run:{other_run}', 'random')")
    config.checkpoints.steps = (2,)
    config.checkpoints.label = "mine"
    summary = run_sweep(config, tmp_path, progress=False)
    rows = _csv(tmp_path / "results.csv")
    assert [r["opponent"] for r in rows] == [f"run:{other_run}:7", "random"]
    assert (
        rows[0]["cell"]
        == f"step00000002_puct_s2_c1.25_vs_run-{str(other_run)[1:].replace('/', '-')}-7"
    )
    assert [r["agent"] for r in rows] == ["mine/step2/puct2/c1.25"] * 2
    assert rows[0]["opponent_name"] == "other/step7/puct2/c1.25"
    assert set(summary["ratings"]) == {
        "mine/step2/puct2/c1.25",
        "other/step7/puct2/c1.25",
        "random",
    }
    # The opponent is the other run's net at step 7, searched like the cell.
    agents = _Agents(str(run_dir), 2, label="mine")
    cell = cells_of(config, [1, 2])[0]
    opponent = agents.opponent(cell)
    expected = restore_variables(other_run, 7).variables
    chex.assert_trees_all_equal(opponent.params, expected)
    assert opponent.policy is agents.searcher(2, "puct", 2, 1.25).policy  # one compiled search
    # AlphaGo's mixed leaf value reaches every net of the sweep, and names it.
    mixed = _Agents(str(run_dir), 2, label="mine", rollouts=2)
    searcher = mixed.searcher(2, "puct", 2, 1.25, rollout_lambda=0.5)
    assert searcher.name == "mine/step2/puct2/c1.25/lam0.5"
    mixed_cell = dataclasses.replace(cell, rollout_lambda=0.5)
    assert mixed.opponent(mixed_cell).policy is searcher.policy
    assert searcher.policy is not agents.searcher(2, "puct", 2, 1.25).policy
    # An opponent's own lambda overrides the cell's.
    own = dataclasses.replace(mixed_cell, opponent=f"run:{other_run}:7@lam0")
    assert mixed.opponent(own).policy is agents.searcher(2, "puct", 2, 1.25).policy
    assert mixed.opponent(own).name == "other/step7/puct2/c1.25"


@pytest.mark.slow
def test_lambda_axis_plays_each_leaf_mix_against_the_others(run_dir, tmp_path):
    """AlphaGo's Fig. 4b in small: one net with lambda 0 and 1 against itself with lambda 1."""
    config = _config(run_dir, "('checkpoint:latest@lam1',)")
    config.checkpoints.steps = (2,)
    config.search.rollout_lambda = (0.0, 1.0)
    config.search.rollouts = 2
    summary = run_sweep(config, tmp_path, progress=False)
    rows = _csv(tmp_path / "results.csv")
    assert [r["cell"] for r in rows] == [
        "step00000002_puct_s2_c1.25_vs_checkpoint-2-lam1",
        "step00000002_puct_s2_c1.25_lam1_vs_checkpoint-2-lam1",
    ]
    assert [float(r["rollout_lambda"]) for r in rows] == [0.0, 1.0]
    assert [r["agent"] for r in rows] == ["step2/puct2/c1.25", "step2/puct2/c1.25/lam1"]
    assert [r["opponent_name"] for r in rows] == ["step2/puct2/c1.25/lam1"] * 2
    # The lambda-1 agent of the grid and the lambda-1 opponent are one player in the ratings.
    assert set(summary["ratings"]) == {"step2/puct2/c1.25", "step2/puct2/c1.25/lam1"}
    assert json.loads((tmp_path / "sweep.json").read_text())["rollouts"] == 2
    assert run_sweep(config, tmp_path, progress=False)["played"] == 0
    # A workdir of a sweep from before lambda was in each cell is not mixed into.
    old = tmp_path / "old"
    old.mkdir()
    (old / "sweep.json").write_text(json.dumps({"rollout_lambda": 0.5}))
    with pytest.raises(ValueError, match="cells all mixed rollouts with lambda 0.5"):
        run_sweep(config, old, progress=False)


def test_a_referee_is_a_setting_of_the_sweep_and_absent_without_one():
    from eval.sweep import _shared_settings

    c = default_config()
    c.checkpoints.workdir = "run"
    c.opponents = ("gnugo:3",)
    board = {"size": 9, "komi": 7.0, "rules": "chinese", "max_moves": None}
    assert "referee" not in _shared_settings(c, board)  # sweeps from before it resume
    c.games.referee = "gnugo  --mode gtp --level '10'"
    check_config(c)
    assert _shared_settings(c, board)["referee"] == "gnugo --mode gtp --level 10"


def test_cell_ids_are_stable():
    cell = Cell(step=1200, kind="gumbel", simulations=32, c_puct=1.5, opponent="gnugo:10")
    assert cell.id == "step00001200_gumbel_s32_c1.5_vs_gnugo-10"
