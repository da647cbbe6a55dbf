"""What a run records about the code, libraries and machine that made it."""

import json
import subprocess
from pathlib import Path

import jax

from train import provenance as prov

ROOT = Path(__file__).resolve().parents[1]


def test_provenance_names_this_checkout_and_its_libraries(monkeypatch):
    monkeypatch.setenv("GOJAX_EIGEN_CONVOLUTIONS", "0")
    monkeypatch.setenv("UNRELATED_VARIABLE", "1")
    record = prov.provenance(step=12)
    assert record["step"] == 12
    assert record["libraries"]["jax"] == jax.__version__
    assert record["backend"] == jax.default_backend()
    assert record["devices"] == len(jax.devices())
    assert record["env"]["GOJAX_EIGEN_CONVOLUTIONS"] == "0"
    assert "UNRELATED_VARIABLE" not in record["env"]
    if (ROOT / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        assert record["git_commit"] == head.stdout.strip()
        assert isinstance(record["git_dirty"], bool)
    json.dumps(record)  # one JSON line


def test_outside_a_checkout_the_commit_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(prov, "_SOURCE", tmp_path)
    record = prov.provenance()
    assert record["git_commit"] is None and record["git_dirty"] is None


def test_each_start_appends_a_line_and_rewrites_the_config(tmp_path):
    workdir = tmp_path / "run"
    assert prov.read_provenance(workdir) == []
    prov.record_start(workdir, {"seed": 0}, 0)
    prov.record_start(workdir, {"seed": 0, "train": {"total_steps": 8}}, 4)
    assert [r["step"] for r in prov.read_provenance(workdir)] == [0, 4]
    assert json.loads((workdir / "config.json").read_text())["train"]["total_steps"] == 8
    # No temporary files left beside them.
    assert sorted(p.name for p in workdir.iterdir()) == ["config.json", "provenance.jsonl"]


def test_a_line_cut_by_a_crash_elsewhere_does_not_glue_onto_the_next(tmp_path):
    (tmp_path / prov.PROVENANCE_FILE).write_text('{"step": 0}')  # no final newline
    prov.record_start(tmp_path, {}, 3)
    assert [r["step"] for r in prov.read_provenance(tmp_path)] == [0, 3]
