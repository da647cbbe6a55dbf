"""The training loop end to end on 5x5, its resume, config overrides and the arena."""

import json
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from subprocesses import run_job

from eval.cli import build_parser, main
from train.checkpoint import Checkpointer
from train.evaluation import capture_agent, play_arena, random_agent, wilson_interval
from train.loop import (
    apply_overrides,
    config_to_json,
    default_config,
    incompatible_keys,
    load_config,
    selfplay_config,
    train,
)
from train.provenance import read_provenance

REPO = Path(__file__).resolve().parents[1]


# 5x5, agz_tiny, 8 games of 8 simulations, batches of 32: seconds per iteration.
TINY = [
    "--config.board.size=5",
    "--config.board.komi=0.5",
    "--config.model.preset=agz_tiny",
    "--config.selfplay.num_games=8",
    "--config.selfplay.num_simulations=8",
    "--config.replay.capacity=2000",
    "--config.replay.min_size=32",
    "--config.learner.optimizer=adamw",
    "--config.learner.learning_rate=1e-3",
    "--config.learner.warmup_steps=2",
    "--config.learner.total_steps=100",
    "--config.learner.batch_size=32",
    "--config.train.total_steps=3",
    "--config.train.updates_per_iteration=3",
    "--config.train.checkpoint_every=2",
    "--config.train.plot_every=1",
    "--config.train.progress=false",
    "--config.eval.num_games=4",
    "--config.eval.num_simulations=4",
]


def tiny_config():
    c = default_config()
    apply_overrides(c, TINY)
    return c


def test_one_iteration_end_to_end(tmp_path):
    summary = train(tiny_config(), tmp_path)
    assert summary["step"] == 3 and summary["iteration"] == 1
    assert summary["stopped"] == "total_steps" and summary["resumed_from"] is None
    assert len(summary["losses"]) == 3 and np.all(np.isfinite(summary["losses"]))

    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2  # the iteration, then the final evaluation
    assert records[1]["step"] == 3
    assert set(records[1]) == {"step", "eval.random.win_rate", "eval.uct4.win_rate"}
    for key in (
        "learner.policy_loss",
        "learner.value_loss",
        "learner.policy_entropy",
        "learner.value_accuracy",
        "learner.samples_per_second",
        "selfplay.moves_per_second",
        "selfplay.games_per_second",
        "replay_size",
        "replay_bytes",
    ):
        assert key in records[0], key
    assert (tmp_path / "checkpoints" / "3").is_dir()
    assert (tmp_path / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any((tmp_path / "tb").iterdir())
    sgf = sorted((tmp_path / "sgf").rglob("*.sgf"))
    assert len(sgf) == 2 and sgf[0].read_text().startswith("(;")
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["step"] == 3
    assert [r["opponent"] for r in report["results"]] == ["random", "uct4"]
    for row in report["results"]:
        assert row["games"] == 4 and 0.0 <= row["win_rate"] <= 1.0


def test_resume_equals_uninterrupted_run(tmp_path):
    config = tiny_config()
    config.eval.num_games = 0
    # Stop at 4 with 3 updates per iteration: the stop falls inside an iteration,
    # whose remaining update the resumed run must do before self-playing again.
    config.train.total_steps = 4
    first = train(config, tmp_path / "resumed")
    assert first["step"] == 4 and first["iteration"] == 2
    config.train.total_steps = 8
    second = train(config, tmp_path / "resumed")
    assert second["resumed_from"] == 4 and second["step"] == 8
    straight = train(config, tmp_path / "straight")
    assert second["iteration"] == straight["iteration"] == 3
    assert second["replay_size"] == straight["replay_size"]
    # Bitwise equal: every random draw derives from (seed, iteration, step), the
    # checkpoint holds the state, replay and counters exactly, and the same
    # compiled programs run on the same device.
    assert first["losses"] + second["losses"] == straight["losses"]
    # Each start is recorded with the step it started from and what made it.
    starts = read_provenance(tmp_path / "resumed")
    assert [s["step"] for s in starts] == [0, 4]
    assert starts[0]["libraries"]["jax"] == jax.__version__

    # Another recipe is refused, naming the keys (a different net too: its
    # parameters would not restore, and must not read as a damaged checkpoint).
    config.board.komi = 1.5
    config.model.preset = "tiny"
    with pytest.raises(ValueError, match=r"board\.komi: 0\.5 -> 1\.5, model\.preset"):
        train(config, tmp_path / "resumed")


@pytest.mark.slow
def test_gating_records_its_games_and_resumes_exactly(tmp_path):
    config = tiny_config()
    config.eval.num_games = 0
    config.gating.every_iterations = 1
    config.gating.num_games = 4
    config.gating.num_simulations = 2
    # Stop at 6, the end of iteration 2: the checkpoint must hold that gate's decision.
    config.train.total_steps = 6
    first = train(config, tmp_path / "resumed")
    config.train.total_steps = 7
    second = train(config, tmp_path / "resumed")
    straight = train(config, tmp_path / "straight")
    # The best network (and so self-play) is restored with the checkpoint.
    assert first["losses"] + second["losses"] == straight["losses"]
    # Each start is recorded with the step it started from.
    assert [s["step"] for s in read_provenance(tmp_path / "resumed")] == [0, 6]
    records = [json.loads(x) for x in (tmp_path / "straight" / "metrics.jsonl").open()]
    gated = [r for r in records if "gating.win_rate" in r]
    assert len(gated) == 2  # after iterations 1 and 2, whose 3 updates were done
    for r in gated:
        assert 0.0 <= r["gating.win_rate"] <= 1.0 and r["gating.promoted"] in (0.0, 1.0)
        assert r["gating.promoted"] == float(r["gating.win_rate"] > 0.55)


@pytest.mark.slow
def test_kill_9_then_restart_continues_exactly(tmp_path):
    """SIGKILL (no chance to save) mid-run; the restart resumes from the last checkpoint
    and its losses equal those of an uninterrupted run from the same seed."""
    config_file = tmp_path / "config.py"
    config_file.write_text("from train.loop import default_config\n\nget_config = default_config\n")
    workdir = tmp_path / "killed"
    command = [sys.executable, "-m", "eval.cli", "train", "--config", str(config_file)]
    command += ["--workdir", str(workdir), *TINY, "--config.eval.num_games=0"]
    command += ["--config.train.total_steps=1000"]  # train.* may differ on resume
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and process.poll() is None:
            steps = [int(p.name) for p in (workdir / "checkpoints").glob("*") if p.name.isdigit()]
            if steps and max(steps) >= 4:
                break
            time.sleep(0.1)
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    config = tiny_config()
    config.eval.num_games = 0
    # Where the restart will resume: the newest complete checkpoint (a save the
    # kill interrupted is a temporary directory and is skipped with a warning).
    last = max(Checkpointer(workdir / "checkpoints").all_steps())
    config.train.total_steps = last + 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = train(config, workdir)
    assert resumed["resumed_from"] == last and resumed["step"] == last + 5
    straight = train(config, tmp_path / "straight")
    np.testing.assert_allclose(resumed["losses"], straight["losses"][last:], rtol=1e-6)


def _two_process_train(workdir, *args: str) -> list[tuple[str, str]]:
    """``gojax train`` as a 2-process ``jax.distributed`` job on localhost, 2 host
    devices per process; ``(stdout, stderr)`` of each, both checked to exit 0."""
    config_file = workdir.parent / "config.py"
    config_file.write_text("from train.loop import default_config\n\nget_config = default_config\n")
    command = [sys.executable, "-m", "eval.cli", "train", "--config", str(config_file)]
    command += ["--workdir", str(workdir), *TINY, *args]
    return run_job(command, processes=2, devices=2, timeout=600)


@pytest.mark.slow
def test_two_processes_with_two_devices_each_train(tmp_path):
    """``gojax train`` as a 2-process ``jax.distributed`` job, 2 host devices per process:
    the learner's mesh spans both processes (FSDP: parameters split over all four
    devices), each process self-plays on its own two devices, every process takes part
    in gathering the parameters, and the chief alone evaluates (every iteration and at
    the end); the game counter adds up both processes' games. Gathering with
    ``tiled=False`` failed; gathering on the chief alone hung."""
    outputs = _two_process_train(
        tmp_path / "run",
        "--config.train.total_steps=2",
        "--config.learner.param_sharding=fsdp",
        "--config.learner.fsdp_min_size=64",
        "--config.eval.every_iterations=1",
    )
    # One iteration; whole games (TINY plays to the end), 8 on each process: 16 in all.
    assert "stopped at step 2 (total_steps), iteration 1, 16 games" in outputs[0][1]
    rows = json.loads((tmp_path / "run" / "eval.json").read_text())["results"]
    assert [r["games"] for r in rows] == [4, 4]
    assert Checkpointer(tmp_path / "run" / "checkpoints").latest_step() == 2


@pytest.mark.slow
def test_two_processes_scan_ladders_through_the_host_callback(tmp_path, monkeypatch):
    """What a TPU pod slice runs, on a CPU: a 2-process job with KataGo's features whose
    ladder scans go through the host callback (``GOJAX_NATIVE_LADDERS=host``, the
    accelerators' path), each process scanning the boards of its own games."""
    from gojax import _ladders

    if not _ladders.native_available():
        pytest.skip("no C++ compiler: no native ladder scan to call back")
    monkeypatch.setenv("GOJAX_NATIVE_LADDERS", "host")
    outputs = _two_process_train(
        tmp_path / "run", "--config.model.preset=tiny", "--config.train.total_steps=2"
    )
    assert "stopped at step 2 (total_steps), iteration 1, 16 games" in outputs[0][1]
    assert Checkpointer(tmp_path / "run" / "checkpoints").latest_step() == 2


def _process_replay(workdir, step: int, index: int) -> dict[str, np.ndarray]:
    path = workdir / "checkpoints" / "local" / str(step) / f"process-{index}-of-2.npz"
    with np.load(path) as data:
        return {name: data[name] for name in data.files if name.startswith("replay|")}


@pytest.mark.slow
def test_two_processes_resume_with_their_own_replays(tmp_path):
    """A resumed 2-process run goes on with two distinct buffers, each the one its
    process saved: the step-4 buffer of each process starts with its own step-2
    buffer (with process 0's restored everywhere, process 1's would start with
    process 0's games)."""
    workdir = tmp_path / "run"
    _two_process_train(workdir, "--config.train.total_steps=2")
    saved = [_process_replay(workdir, 2, i) for i in range(2)]
    size = [int(s["replay|size"]) for s in saved]
    assert min(size) > 0
    value = "replay|data/value"
    assert not np.array_equal(saved[0][value][: min(size)], saved[1][value][: min(size)])
    _two_process_train(workdir, "--config.train.total_steps=4")
    for i in range(2):
        resumed = _process_replay(workdir, 4, i)
        assert int(resumed["replay|size"]) > size[i]  # its own games added
        for name, array in saved[i].items():
            if name.startswith("replay|data/"):
                np.testing.assert_array_equal(resumed[name][: size[i]], array[: size[i]])


def test_games_too_short_to_end_are_an_error_not_a_hang(tmp_path):
    config = tiny_config()
    config.selfplay.num_steps = 2  # no 5x5 game ends in 2 moves: no targets, ever
    with pytest.raises(ValueError, match=r"no self-play game ended within selfplay.num_steps=2"):
        train(config, tmp_path)


def test_overrides():
    config = default_config()
    apply_overrides(
        config,
        [
            "--config.train.total_steps=7",
            "--config.learner.learning_rate",
            "0.5",
            "--config.model.preset=tiny",
            "--config.replay.augment=false",
            "--config.learner.lr_values=(1.0, 0.1, 0.01)",
            "--config.board.komi=6",
        ],
    )
    assert config.train.total_steps == 7
    assert config.learner.learning_rate == 0.5
    assert config.model.preset == "tiny"
    assert config.replay.augment is False
    assert tuple(config.learner.lr_values) == (1.0, 0.1, 0.01)
    assert config.board.komi == 6.0 and isinstance(config.board.komi, float)
    with pytest.raises(ValueError, match="train.total_stepz"):
        apply_overrides(config, ["--config.train.total_stepz=1"])
    with pytest.raises(ValueError, match="nothere"):
        apply_overrides(config, ["--config.nothere.x=1"])
    with pytest.raises(ValueError, match="train.total_steps=abc"):
        apply_overrides(config, ["--config.train.total_steps=abc"])
    with pytest.raises(ValueError, match="not a valid bool"):
        apply_overrides(config, ["--config.replay.augment=maybe"])


def gated_search(monkeypatch, config):
    """The ``SearchConfig`` the learner's network plays with in ``config``'s gating."""
    import train.gating
    import train.loop

    seen = []
    monkeypatch.setattr(train.gating, "gate", lambda a, b, *args, **kw: seen.append(a[1]))
    monkeypatch.setattr("train.agents.search_agent", lambda spec, params, cfg, name: (name, cfg))
    train.loop.gate_candidate(config, {}, {}, jax.random.key(0))
    return seen[0]


def test_gumbel_keys_reach_the_searches(monkeypatch):

    config = tiny_config()
    apply_overrides(
        config,
        [
            "--config.selfplay.search_kind=gumbel",
            "--config.selfplay.gumbel_considered=4",
            "--config.selfplay.gumbel_scale=0.5",
        ],
    )
    search = selfplay_config(config).search
    assert (search.kind, search.max_num_considered_actions, search.gumbel_scale) == (
        "gumbel",
        4,
        0.5,
    )
    assert search.num_simulations == 8 and search.dirichlet_fraction == 0.25
    # Gating plays its strongest: no noise of either kind, its own simulation count.
    gated = gated_search(monkeypatch, config)
    assert gated.kind == "gumbel" and gated.max_num_considered_actions == 4
    assert gated.gumbel_scale == 0.0 and gated.dirichlet_fraction == 0.0
    assert gated.num_simulations == config.gating.num_simulations


def test_forced_playouts_only_in_full_self_play_searches(monkeypatch):
    import train.loop
    from train.selfplay import fast_search

    config = tiny_config()
    apply_overrides(config, ["--config.selfplay.forced_playouts=2"])
    search = selfplay_config(config).search
    assert search.forced_playouts == 2.0 and search.kind == "puct"
    assert fast_search(search, 4).forced_playouts == 0.0
    assert fast_search(search, 4).dirichlet_fraction == 0.0
    seen = [gated_search(monkeypatch, config)]

    class Stop(Exception):
        pass

    def capture(spec, module, variables, cfg):
        seen.append(cfg)
        raise Stop

    monkeypatch.setattr(train.loop, "search_agent", capture)
    with pytest.raises(Stop):
        train.loop.evaluate(config, None, jax.random.key(0), variables={})
    assert [cfg.forced_playouts for cfg in seen] == [0.0, 0.0]  # gating, evaluation


def test_score_utility_weights_reach_every_search_of_a_run(monkeypatch):

    config = tiny_config()
    search = selfplay_config(config).search
    assert (search.static_score_utility, search.dynamic_score_utility) == (0.1, 0.3)
    apply_overrides(
        config,
        [
            "--config.selfplay.search_kind=katago",
            "--config.selfplay.static_score_utility=0",
            "--config.selfplay.dynamic_score_utility=0.5",
        ],
    )
    search = selfplay_config(config).search
    assert (search.kind, search.static_score_utility, search.dynamic_score_utility) == (
        "katago",
        0.0,
        0.5,
    )
    assert search.weighs_scores
    apply_overrides(config, ["--config.selfplay.dynamic_score_utility=0"])
    assert not selfplay_config(config).search.weighs_scores
    # Gating searches as self-play does, on the value alone here too.
    gated = gated_search(monkeypatch, config)
    assert gated.kind == "katago" and not gated.weighs_scores
    with pytest.raises(ValueError, match="static_score_utility must be >= 0"):
        apply_overrides(config, ["--config.selfplay.static_score_utility=-1"])
        selfplay_config(config)


def test_katago_puct_constants_reach_every_search_of_a_run(monkeypatch):
    config = tiny_config()
    apply_overrides(
        config,
        [
            "--config.selfplay.search_kind=katago",
            "--config.selfplay.fpu_reduction=0",
            "--config.selfplay.root_fpu_reduction=0.3",
            "--config.selfplay.cpuct_utility_stdev_scale=0",
            "--config.selfplay.cpuct_exploration=2",
        ],
    )
    search = selfplay_config(config).search
    assert (search.fpu_reduction, search.root_fpu, search.cpuct_utility_stdev_scale) == (
        0.0,
        0.3,
        0.0,
    )
    assert (search.cpuct_exploration, search.cpuct_exploration_log) == (2.0, 0.45)
    gated = gated_search(monkeypatch, config)  # gating has no root noise: same constants
    assert (gated.fpu_reduction, gated.root_fpu, gated.cpuct_exploration) == (0.0, 0.3, 2.0)
    # Left unset, the root's reduction is KataGo's: none under self-play's root noise,
    # 0.1 in gating's noiseless searches.
    config = tiny_config()
    apply_overrides(config, ["--config.selfplay.search_kind=katago"])
    assert selfplay_config(config).search.root_fpu == 0.0
    assert gated_search(monkeypatch, config).root_fpu == 0.1
    apply_overrides(
        config, ["--config.selfplay.search_kind=puct", "--config.selfplay.fpu_reduction=0"]
    )
    with pytest.raises(ValueError, match="fpu_reduction needs kind='katago'"):
        selfplay_config(config)


def test_katagos_temperatures_reach_self_play_alone(monkeypatch):
    config = tiny_config()
    assert not selfplay_config(config).search.tempers_root
    apply_overrides(
        config,
        [
            "--config.selfplay.root_policy_temperature=1.1",
            "--config.selfplay.root_policy_temperature_early=1.25",
            "--config.selfplay.move_temperature=0.15",
            "--config.selfplay.move_temperature_early=0.75",
            "--config.selfplay.temperature_halflife=38",
        ],
    )
    search = selfplay_config(config).search
    assert (search.root_policy_temperature, search.root_policy_temperature_early) == (1.1, 1.25)
    assert (search.move_temperature, search.move_temperature_early) == (0.15, 0.75)
    assert search.temperature_halflife == 38.0
    # Gating plays for strength, as KataGo's noiseless searches do: the best move.
    gated = gated_search(monkeypatch, config)
    assert not gated.tempers_root and gated.move_temperature is None
    assert gated.temperature_moves == 0
    apply_overrides(config, ["--config.selfplay.root_policy_temperature=0"])
    with pytest.raises(ValueError, match=r"root_policy_temperature must be in \[0.01, 100\]"):
        selfplay_config(config)


def test_raw_values_key_reaches_the_self_play_search():
    config = tiny_config()
    assert selfplay_config(config).search.normalise_values
    apply_overrides(config, ["--config.selfplay.normalise_values=false"])
    search = selfplay_config(config).search
    assert search.kind == "puct" and not search.normalise_values
    apply_overrides(config, ["--config.selfplay.search_kind=gumbel"])
    with pytest.raises(ValueError, match="normalise_values=False needs kind='puct'"):
        selfplay_config(config)


def test_keys_added_later_do_not_block_resume_at_their_default():
    current = config_to_json(default_config())
    saved = json.loads(json.dumps(current))
    del saved["selfplay"]["gumbel_considered"]  # a run written before the key existed
    assert incompatible_keys(saved, current) == []
    current["selfplay"]["gumbel_considered"] = 8
    assert incompatible_keys(saved, current) == ["selfplay.gumbel_considered"]
    # Keys neither config has (a supervised run's) are not filled in from the defaults.
    sl = {"board": {"size": 9}}
    assert incompatible_keys(sl, json.loads(json.dumps(sl))) == []


def test_cli_parses_overrides_and_reports_errors(tmp_path, capsys):
    args = build_parser().parse_args(
        ["train", "--config", "c.py", "--workdir", "w", "--config.train.total_steps=5"]
    )
    assert args.overrides == ["--config.train.total_steps=5"]
    path = tmp_path / "cfg.py"
    path.write_text(
        "from train.loop import default_config\n\ndef get_config():\n    return default_config()\n"
    )
    assert load_config(path).board.size == 9
    code = main(["train", "--config", str(path), "--workdir", str(tmp_path / "w"), "--config.x=1"])
    assert code == 2 and "unknown config key 'x'" in capsys.readouterr().err
    code = main(["train", "--config", str(tmp_path / "nope.py"), "--workdir", str(tmp_path)])
    assert code == 2 and "nope.py" in capsys.readouterr().err
    (tmp_path / "bad.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="bad.py: no get_config"):
        load_config(tmp_path / "bad.py")


def test_cpu_devices_hint_only_for_one_cpu_device_on_several_cores():
    from train.cli import cpu_devices_hint

    hint = cpu_devices_hint("cpu", 1, 4)
    assert "--xla_force_host_platform_device_count=4" in hint
    assert "--config.learner.num_devices=1" in hint
    assert cpu_devices_hint("cpu", 2, 4) is None  # already split
    assert cpu_devices_hint("cpu", 1, 1) is None  # one core: nothing to gain
    assert cpu_devices_hint("gpu", 1, 16) is None


def test_arena_random_self_play_is_even():
    agent = random_agent()
    result = play_arena(agent, agent, jax.random.PRNGKey(0), size=5, num_games=128, komi=0.5)
    summary = result.summary()
    assert summary["games"] == 128 and result.finished.all()
    assert result.a_black.sum() == 64  # colours alternate
    lo, hi = summary["ci95"]
    assert lo < 0.5 < hi


def test_arena_capture_agent_beats_random():
    result = play_arena(
        capture_agent(), random_agent(), jax.random.PRNGKey(1), size=5, num_games=64, komi=0.5
    )
    assert result.summary()["win_rate"] > 0.6


def test_wilson_interval():
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
