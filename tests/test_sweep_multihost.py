"""`gojax sweep` over several processes: the grid's split, what process 0 alone writes (one
process standing in for each of a job's, no games), and two real processes
(``jax.distributed`` on localhost, one CPU device each) resuming and matching one process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from subprocesses import run_job
from test_sweep import CONFIG, _config, _csv, _make_run, _overrides, _row

import eval._sweep_hosts
import eval.sweep
from eval.sweep import Cell, run_sweep
from train.loop import apply_overrides

# uct:4 first: its program, the slower to compile, falls to process 0, which alone writes
# the compilation cache (and process 1's device is another: its programs miss the cache).
OPPONENTS = "('uct:4', 'random')"
# The grid, in order: cell i is played by process i % 2.
CELLS = [
    "step00000001_puct_s2_c1.25_vs_uct-4",
    "step00000001_puct_s2_c1.25_vs_random",
    "step00000002_puct_s2_c1.25_vs_uct-4",
    "step00000002_puct_s2_c1.25_vs_random",
]
# Plots are left out (seconds each, and drawn as in one process): the tables suffice.
OVERRIDES = ["--config.plots=False"]
SUMMARIES = ("results.csv", "results.json", "ratings.txt")
TIMING = ("seconds", "games_per_second", "process")  # what may differ between two runs


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A training workdir with two checkpoints (steps 1 and 2) of a 5x5 ``agz_tiny`` net."""
    return _make_run(tmp_path_factory.mktemp("run"), 5, (1, 2))


def test_process_i_of_n_plays_every_nth_cell_from_i():
    grid = list(range(7))
    shares = [eval._sweep_hosts.own_cells(grid, i, 3) for i in range(3)]
    assert shares == [[0, 3, 6], [1, 4], [2, 5]]
    assert eval._sweep_hosts.own_cells(grid, 0, 1) == grid  # one process: every cell


def _as_process(monkeypatch, index: int, count: int) -> list[str]:
    """Make ``run_sweep`` act as process ``index`` of ``count``; the barriers it waits at."""
    waits = []
    monkeypatch.setattr(eval.sweep, "this_process", lambda: (index, count))
    monkeypatch.setattr(eval.sweep, "wait_for_all", waits.append)
    monkeypatch.setattr(eval._sweep_hosts, "wait_for_all", waits.append)
    return waits


def test_process_0_alone_writes_the_manifest_and_the_summaries(run_dir, tmp_path, monkeypatch):
    """Every cell already played: each process plays nothing, and only process 0 writes."""
    out = tmp_path / "sweep"
    config = _config(run_dir, OPPONENTS)
    apply_overrides(config, OVERRIDES)
    waits = _as_process(monkeypatch, 1, 2)
    with pytest.raises(ValueError, match=r"sweep.json: missing \(process 0 writes it"):
        run_sweep(config, out, progress=False)  # process 0 failed before writing it
    assert waits == ["manifest"] and not out.exists()  # the others only read

    grid = [
        Cell(step, "puct", 2, 1.25, opponent) for step in (1, 2) for opponent in ("uct:4", "random")
    ]
    assert [cell.id for cell in grid] == CELLS
    for cell in grid:
        (out / "cells").mkdir(parents=True, exist_ok=True)
        (out / "cells" / f"{cell.id}.json").write_text(json.dumps(_row(cell)))
    waits = _as_process(monkeypatch, 0, 2)
    first = run_sweep(config, out, progress=False)
    assert waits == ["manifest", "cells"]
    assert first["played"] == 0 and [r["cell"] for r in first["cells"]] == CELLS
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(["cells", "sweep.json", *SUMMARIES])

    for name in SUMMARIES:
        (out / name).unlink()
    waits = _as_process(monkeypatch, 1, 2)
    other = run_sweep(config, out, progress=False)
    assert waits == ["manifest", "cells"]
    assert other == first  # the same cells and ratings, read from the cell files
    assert sorted(p.name for p in out.iterdir()) == ["cells", "sweep.json"]


def _sweep_on_two_processes(run_dir: Path, out: Path, *extra: str) -> list[str]:
    """``gojax sweep`` started as processes 0 and 1 of a job; their stderr, in order."""
    command = [sys.executable, "-m", "eval.cli", "sweep", "--config", str(CONFIG)]
    command += ["--workdir", str(out), "--quiet", *_overrides(run_dir, OPPONENTS), *OVERRIDES]
    command += extra
    outputs = run_job(command, processes=2, devices=1, timeout=300)
    assert outputs[1][0] == ""  # process 0 alone prints the results
    return [err for _, err in outputs]


def _cell_files(out: Path) -> dict[str, dict]:
    """Every file under ``out/cells`` (temporary ones included), by cell id."""
    files = sorted((out / "cells").iterdir())
    assert all(p.suffix == ".json" for p in files), files
    return {p.stem: json.loads(p.read_text()) for p in files}


def _without_timing(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in TIMING}


@pytest.mark.slow  # 60-70 s on 2 busy cores: five processes compile the games' programs
def test_two_processes_split_the_grid_resume_and_match_one_process(run_dir, tmp_path):
    # Two processes, each stopped after one new cell of its own: cells 0 and 1.
    out = tmp_path / "two"
    errs = _sweep_on_two_processes(run_dir, out, "--max-cells", "1")
    first = _cell_files(out)
    assert sorted(first) == sorted(CELLS[:2])
    assert [first[cell]["process"] for cell in CELLS[:2]] == [0, 1]
    assert "1 cells played by process 0 of 2" in errs[0] and "2 cells left" in errs[0]
    assert "1 cells played by process 1 of 2" in errs[1]
    assert len(json.loads((out / "results.json").read_text())["cells"]) == 2
    stamps = {cell: (out / "cells" / f"{cell}.json").stat().st_mtime_ns for cell in first}

    # Started again: each plays its cell left, nothing twice.
    errs = _sweep_on_two_processes(run_dir, out)
    assert "1 cells played by process 0 of 2" in errs[0] and "complete" in errs[0]
    assert "1 cells played by process 1 of 2" in errs[1]
    cells = _cell_files(out)
    assert sorted(cells) == sorted(CELLS)
    assert [cells[cell]["process"] for cell in CELLS] == [0, 1, 0, 1]  # cell i: process i % 2
    for cell, stamp in stamps.items():
        assert (out / "cells" / f"{cell}.json").stat().st_mtime_ns == stamp, cell
        assert cells[cell] == first[cell]

    # The same games as one process plays (in this one, after: process 0's programs are
    # in the compilation cache then), and the summaries of all four cells.
    one = tmp_path / "one"
    config = _config(run_dir, OPPONENTS)
    apply_overrides(config, OVERRIDES)
    alone = run_sweep(config, one, progress=False)
    assert [r["cell"] for r in alone["cells"]] == CELLS
    reference = _cell_files(one)
    assert not any("process" in row for row in reference.values())  # one process: as before
    assert {c: _without_timing(r) for c, r in cells.items()} == {
        c: _without_timing(r) for c, r in reference.items()
    }
    for name in SUMMARIES:
        assert (out / name).exists(), name
    assert [_without_timing(r) for r in _csv(out / "results.csv")] == [
        _without_timing(r) for r in _csv(one / "results.csv")
    ]
    results = json.loads((out / "results.json").read_text())
    assert [_without_timing(r) for r in results["cells"]] == [
        _without_timing(r) for r in json.loads((one / "results.json").read_text())["cells"]
    ]
    assert results["ratings"] == json.loads((one / "results.json").read_text())["ratings"]
    assert (out / "sweep.json").read_text() == (one / "sweep.json").read_text()
