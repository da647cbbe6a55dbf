"""The learner, the model wrapper and checkpoints (train/model.py, learner.py, checkpoint.py).

The multi-device comparisons run this file as a worker script in a fresh
process (``python tests/test_learner.py worker ...``), because the device
count is fixed when JAX starts and the test process already has one device.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocesses import free_port, host_devices_flags, wait_all

import gojax
import train.learner
from train.checkpoint import Checkpointer, install_signal_handlers
from train.learner import (
    LearnerConfig,
    abstract_train_state,
    check_finite,
    create_train_state,
    learning_rate_schedule,
    make_mesh,
    make_train_step,
    shard_batch,
)
from train.model import (
    ModelSpec,
    build,
    dummy_inputs,
    encode,
    evaluator,
    forward,
    init_variables,
)

SIZE = 5
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def synthetic_batch(spec: ModelSpec, batch: int, size: int, seed: int = 0) -> dict:
    """A fixed random batch in the learner's format (numpy), with every target."""
    rng = np.random.default_rng(seed)
    inputs = tuple(
        rng.normal(size=x.shape).astype(np.float32) for x in dummy_inputs(spec, batch, size)
    )
    inputs[0][..., 0] = 1.0  # KataGo's on-board plane
    actions = size * size + 1
    out = {
        "inputs": inputs,
        "policy": rng.dirichlet(np.ones(actions), size=batch).astype(np.float32),
        "policy_mask": np.ones(batch, np.float32),
        "value": rng.choice([-1.0, 0.0, 1.0], size=batch).astype(np.float32),
        "value_mask": np.ones(batch, np.float32),
    }
    if spec.is_katago:
        points = size * size
        out["score"] = rng.normal(scale=5.0, size=batch).astype(np.float32)
        out["ownership"] = rng.choice([-1.0, 1.0], size=(batch, points)).astype(np.float32)
        out["ownership_mask"] = np.ones(batch, np.float32)
    return out


def _states(n: int):
    games = jax.vmap(lambda _: gojax.new_game(SIZE, rules="chinese", komi=7.0))(jnp.arange(n))
    return jax.vmap(gojax.play)(games, jnp.arange(n, dtype=jnp.int32) * 3 % (SIZE * SIZE))


def _train(spec, config, batch, steps, size=SIZE):
    mesh = make_mesh(config)
    state = create_train_state(spec, config, jax.random.PRNGKey(0), size, mesh)
    step = make_train_step(spec, build(spec), config, mesh)
    history = []
    for _ in range(steps):
        state, metrics = step(state, shard_batch(batch, mesh))
        history.append(jax.device_get(metrics))
    return state, history


@pytest.mark.parametrize("preset", ["tiny", "agz_tiny"])
def test_one_step_end_to_end(preset):
    spec = ModelSpec(preset)
    n = 8
    states = _states(n)
    module = build(spec)
    config = LearnerConfig(batch_size=n)
    variables0 = jax.jit(lambda: init_variables(spec, jax.random.PRNGKey(5), SIZE))()

    # One compile for the encoder and the evaluator (KataGo's features take seconds).
    @jax.jit
    def encode_and_evaluate(variables, states, key):
        return encode(spec, states), evaluator(spec, module, variables)(states, key)

    inputs, (logits, value, *score) = encode_and_evaluate(variables0, states, jax.random.PRNGKey(0))
    out = jax.jit(lambda v, x: forward(spec, module, v, x, train=False))(variables0, inputs)
    np.testing.assert_allclose(logits, out["policy_logits"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(value, out["value"], rtol=1e-6, atol=1e-6)
    # KataGo nets also give the search their score lead, and the score distribution its
    # score utility weighs (mean: the lead channel; stdev); the others no score.
    assert len(score) == 3 * int(spec.is_katago)
    if score:
        np.testing.assert_allclose(score[0], out["score_lead"], rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(score[1], out["score_lead"], rtol=1e-6, atol=1e-5)
        np.testing.assert_allclose(score[2], out["score_stdev"], rtol=1e-6, atol=1e-5)
    assert out["policy_logits"].shape == (n, SIZE * SIZE + 1)
    assert out["value"].shape == (n,)
    assert np.all(np.abs(out["value"]) <= 1.0)
    if spec.is_katago:
        assert out["score_lead"].shape == (n,)
        assert out["ownership"].shape == (n, SIZE * SIZE)
        assert np.all(np.abs(out["ownership"]) <= 1.0)

    batch = synthetic_batch(spec, n, SIZE)
    batch["inputs"] = tuple(np.asarray(x) for x in inputs)
    state, (metrics,) = _train(spec, config, batch, 1)
    assert int(state.step) == 1
    expected = {"policy_loss", "value_loss", "l2_loss", "total_loss", "policy_entropy"}
    expected |= {"value_accuracy", "grad_norm", "learning_rate"}
    if spec.is_katago:
        expected |= {"score_loss", "ownership_loss"}
    assert set(metrics) == expected  # score_stdev_weight is 0 by default: no such term
    check_finite(metrics, step=1)
    assert metrics["learning_rate"] == pytest.approx(1e-2)


def test_katago_self_play_search_weighs_the_nets_scores():
    """Self-play's evaluator gives a KataGo net's score distribution, so that a
    ``kind="katago"`` search adds KataGo's score utility (it once gave only the lead,
    and such searches ran on the value alone); weights 0 and 0 leave it out."""
    from gojax.search import SearchConfig, search

    spec = ModelSpec("tiny")
    module = build(spec)
    variables = jax.jit(lambda: init_variables(spec, jax.random.PRNGKey(5), SIZE))()
    states = _states(4)

    def utilities(static: float, dynamic: float) -> np.ndarray:
        config = SearchConfig(
            kind="katago",
            num_simulations=8,
            static_score_utility=static,
            dynamic_score_utility=dynamic,
        )
        assert config.weighs_scores == bool(static or dynamic)
        net = evaluator(spec, module, variables)
        out = jax.jit(lambda s, k: search(net, s, k, config))(states, jax.random.PRNGKey(1))
        return np.asarray(out.tree.node_score_utilities)

    assert np.abs(utilities(0.1, 0.3)).max() > 0
    assert np.abs(utilities(0.0, 0.0)).max() == 0


def test_loss_falls_on_a_fixed_batch():
    spec = ModelSpec("tiny")
    # At 0.02 every loss falls smoothly. At 0.05 the lead overshoots within 30 steps
    # and meets a stdev that has shrunk to fit it: the likelihood term jumps 1.1 -> 13
    # near step 30, where the step it lands on depends on the CPU's rounding.
    config = LearnerConfig(batch_size=16, lr_values=(0.02, 0.01, 0.001), score_stdev_weight=0.05)
    _, history = _train(spec, config, synthetic_batch(spec, 16, SIZE), 30)
    first, last = history[0], history[-1]
    assert last["total_loss"] < 0.8 * first["total_loss"]
    assert last["value_loss"] < first["value_loss"]
    assert last["ownership_loss"] < first["ownership_loss"]
    assert last["score_stdev_loss"] < first["score_stdev_loss"]


def test_score_stdev_loss_is_the_gaussian_likelihood_of_the_final_score():
    """``-log N(s; mu, sigma)`` up to a constant, sigma floored, the lead held fixed."""
    spec = ModelSpec("tiny")
    config = LearnerConfig(score_stdev_weight=0.5, score_weight=0.0, l2=0.0)
    batch = {
        "policy": jnp.full((3, 2), 0.5),
        "policy_mask": jnp.ones(3),
        "value": jnp.zeros(3),
        "value_mask": jnp.array([1.0, 1.0, 0.0]),
        "score": jnp.array([1.0, -3.0, 50.0]),
    }

    def loss(lead, stdev):
        out = {
            "policy_logits": jnp.zeros((3, 2)),
            "value": jnp.zeros(3),
            "score_lead": lead,
            "score_stdev": stdev,
        }
        return train.learner.losses(spec, config, out, {}, batch)

    lead, stdev = jnp.array([0.0, 3.0, 0.0]), jnp.array([2.0, 0.1, 1.0])
    total, metrics = loss(lead, stdev)
    # Game 2's sigma is floored at 0.5 points; game 3 is masked out.
    want = np.mean([np.log(2.0) + 0.5 * (1.0 / 2.0) ** 2, np.log(0.5) + 0.5 * (6.0 / 0.5) ** 2])
    assert float(metrics["score_stdev_loss"]) == pytest.approx(want, rel=1e-6)
    assert "score_loss" in metrics and float(total) == pytest.approx(
        float(metrics["policy_loss"] + metrics["value_loss"]) + 0.5 * want, rel=1e-6
    )
    grad_lead, grad_stdev = jax.grad(lambda a, b: loss(a, b)[0], argnums=(0, 1))(lead, stdev)
    assert not np.any(grad_lead)  # the lead learns from its own loss only
    # d/dsigma (log sigma + e^2 / 2 sigma^2) = 1/sigma - e^2/sigma^3: 1/2 - 1/8 at sigma 2, e 1.
    assert float(grad_stdev[0]) == pytest.approx(0.5 * 0.5 * (1 / 2.0 - 1.0 / 8.0), rel=1e-5)
    assert float(grad_stdev[1]) == 0.0 and float(grad_stdev[2]) == 0.0  # floored; masked


def test_adamw_schedule_warms_up():
    spec = ModelSpec("agz_tiny")
    config = LearnerConfig(
        batch_size=8, optimizer="adamw", learning_rate=1e-3, warmup_steps=4, total_steps=10
    )
    _, history = _train(spec, config, synthetic_batch(spec, 8, SIZE), 3)
    rates = [float(m["learning_rate"]) for m in history]
    assert rates == pytest.approx([0.0, 2.5e-4, 5e-4])


def test_adamw_drops_the_rate_at_each_annealing_step():
    base = LearnerConfig(
        optimizer="adamw", learning_rate=1e-3, warmup_steps=2, total_steps=10**6, end_lr_factor=1.0
    )
    annealed = dataclasses.replace(base, lr_drops=(5, 8), lr_drop_factor=0.3)
    plain, dropped = learning_rate_schedule(base), learning_rate_schedule(annealed)
    steps = jnp.arange(12)
    ratio = np.asarray(dropped(steps))[2:] / np.asarray(plain(steps))[2:]
    # Warm-up untouched (0 at step 0), then x1 before step 5, x0.3 from 5, x0.09 from 8.
    assert float(dropped(0)) == 0.0
    np.testing.assert_allclose(ratio, [1, 1, 1, 0.3, 0.3, 0.3, 0.09, 0.09, 0.09, 0.09], rtol=1e-6)
    with pytest.raises(ValueError, match="lr_drops"):
        LearnerConfig(optimizer="adamw", lr_drops=(8, 5))
    with pytest.raises(ValueError, match="lr_drop_factor"):
        LearnerConfig(optimizer="adamw", lr_drop_factor=0.0)


def test_nan_stops_training():
    spec = ModelSpec("agz_tiny")
    batch = synthetic_batch(spec, 8, SIZE)
    batch["value"][3] = np.nan
    _, (metrics,) = _train(spec, LearnerConfig(batch_size=8), batch, 1)
    with pytest.raises(FloatingPointError, match=r"training stopped.*value_loss.*step 7"):
        check_finite(metrics, step=7)
    check_finite({"total_loss": jnp.float32(1.0)}, step=0)


# ----------------------------------------------------------------------------
# Several devices, in a fresh process.


def _worker_sharded(out_path: str) -> None:
    """3 steps on 1 device, on 8 replicated, on 8 FSDP; the flat states to ``out_path``.

    AlphaGo Zero's net: KataGo's gpool max has a gradient that depends on XLA's
    fusion (which point equals the max after recomputation), so its sharded and
    single-device gradients can differ far beyond rounding; see docs/training.md.
    """
    spec = ModelSpec("agz_tiny")
    batch = synthetic_batch(spec, 16, SIZE, seed=1)
    results = {}
    for name, devices, sharding in [("one", 1, "replicated"), ("repl", 8, "replicated")] + [
        ("fsdp", 8, "fsdp")
    ]:
        config = LearnerConfig(
            batch_size=16, num_devices=devices, param_sharding=sharding, fsdp_min_size=64
        )
        state, _ = _train(spec, config, batch, 3)
        if sharding == "fsdp":
            # The live arrays' own shardings: FSDP must really have split some of them.
            specs = [x.sharding.spec for x in jax.tree.leaves(state)]
            results["fsdp_sharded_leaves"] = np.int32(sum(any(p) for p in specs))
        for i, leaf in enumerate(jax.tree.leaves(state)):
            results[f"{name}/{i}"] = np.asarray(leaf)
    results["device_count"] = np.int32(jax.device_count())
    np.savez(out_path, **results)


def _run_worker(args: list[str], env: dict[str, str], timeout: float = 300) -> str:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "worker", *args],
        env={**os.environ, "JAX_PLATFORMS": "cpu", **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode:
        raise AssertionError(f"worker {args} failed:\n{proc.stderr[-4000:]}")
    return proc.stdout


def test_sharded_step_matches_one_device(tmp_path):
    out = tmp_path / "params.npz"
    _run_worker(["sharded", str(out)], {"XLA_FLAGS": host_devices_flags(8)})
    got = np.load(out)
    assert int(got["device_count"]) == 8
    assert int(got["fsdp_sharded_leaves"]) > 0
    n = sum(1 for k in got.files if k.startswith("one/"))
    assert n > 10
    for i in range(n):
        one = got[f"one/{i}"]
        np.testing.assert_allclose(got[f"repl/{i}"], one, atol=1e-5, rtol=0, err_msg=f"leaf {i}")
        np.testing.assert_allclose(got[f"fsdp/{i}"], one, atol=1e-5, rtol=0, err_msg=f"leaf {i}")


def _worker_distributed(out_path: str, coordinator: str, process_id: str) -> None:
    """One of two processes with 1 CPU device each; 3 steps on its half of the batch."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    from train.learner import initialize_distributed

    initialize_distributed(coordinator, 2, int(process_id))
    spec = ModelSpec("agz_tiny")
    batch = synthetic_batch(spec, 16, SIZE, seed=2)
    pid = jax.process_index()
    local = jax.tree.map(lambda x: x[pid * 8 : (pid + 1) * 8], batch)
    state, _ = _train(spec, LearnerConfig(batch_size=16), local, 3)
    leaves = [np.asarray(jax.device_get(x)) for x in jax.tree.leaves(state)]
    np.savez(out_path, *leaves)


def _worker_single(out_path: str) -> None:
    spec = ModelSpec("agz_tiny")
    state, _ = _train(spec, LearnerConfig(batch_size=16), synthetic_batch(spec, 16, SIZE, 2), 3)
    np.savez(out_path, *[np.asarray(x) for x in jax.tree.leaves(state)])


@pytest.mark.slow
def test_two_processes_match_one(tmp_path):
    coordinator = f"127.0.0.1:{free_port()}"
    env = {"XLA_FLAGS": host_devices_flags(1)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "worker",
                "distributed",
                str(tmp_path / f"p{i}.npz"),
                coordinator,
                str(i),
            ],
            env={**os.environ, "JAX_PLATFORMS": "cpu", **env},
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outputs = wait_all(procs, timeout=240)
    errors = [err[-3000:] for p, (_, err) in zip(procs, outputs, strict=True) if p.returncode]
    # No skip on a collective error: the pinned jaxlib runs CPU collectives across
    # processes, so any failure here is ours.
    if errors:
        raise AssertionError("\n".join(errors))
    _run_worker(["single", str(tmp_path / "one.npz")], env)
    one = np.load(tmp_path / "one.npz")
    for i in range(2):
        got = np.load(tmp_path / f"p{i}.npz")
        for k in one.files:
            np.testing.assert_allclose(got[k], one[k], atol=1e-5, rtol=0)


_IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
from jax._src import xla_bridge
names = []
for package in ("gojax", "train", "eval"):
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
        names.append(info.name)
        if xla_bridge._backends:
            sys.exit("importing " + info.name + " started the XLA backend")
print(len(names))
"""


def test_no_module_starts_the_backend_when_imported():
    """A multi-process job calls ``jax.distributed.initialize`` after the imports of
    ``gojax train`` and before its first computation; an array made at import time
    (a jnp constant) starts the backend first and the job fails to start (it did)."""
    run = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERYTHING],
        cwd=REPO,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert int(run.stdout.split()[-1]) > 50  # every module was imported


# ----------------------------------------------------------------------------
# Checkpoints.


def _trained_state(steps: int = 2):
    spec = ModelSpec("agz_tiny")
    config = LearnerConfig(batch_size=8)
    state, _ = _train(spec, config, synthetic_batch(spec, 8, SIZE), steps)
    return spec, config, state


def _assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_checkpoint_round_trip_is_exact(tmp_path):
    spec, config, state = _trained_state()
    ckpt = Checkpointer(tmp_path, save_every=2, keep=2)
    extra = {"replay": {"planes": np.arange(60, dtype=np.int8).reshape(3, 20)}, "n": np.int64(7)}
    meta = {"preset": spec.preset, "batch_size": config.batch_size}
    assert not ckpt.save(1, state)  # not due
    assert ckpt.save(2, state, extra=extra, config=meta)
    ckpt.close()

    mesh = make_mesh(config)
    template = abstract_train_state(spec, config, SIZE, mesh)
    restored = Checkpointer(tmp_path).restore_latest(template)
    assert restored.step == 2
    assert restored.config == meta
    _assert_trees_equal(restored.state, state)
    assert int(restored.state.step) == 2
    assert restored.extra["replay"]["planes"].dtype == np.int8
    _assert_trees_equal(restored.extra, jax.tree.map(np.asarray, extra))
    leaf = jax.tree.leaves(restored.state.params)[0]
    assert leaf.sharding == jax.tree.leaves(template.params)[0].sharding

    # The restored state trains on: same result as the state that was saved.
    step = make_train_step(spec, build(spec), config, mesh)
    batch = shard_batch(synthetic_batch(spec, 8, SIZE, 3), mesh)
    a, _ = step(restored.state, batch)
    b, _ = step(state, batch)
    _assert_trees_equal(a, b)


def test_corrupt_newest_checkpoint_falls_back(tmp_path):
    spec, config, state = _trained_state(1)
    ckpt = Checkpointer(tmp_path, save_every=1, keep=3)
    ckpt.save(1, state)
    later = state.replace(step=state.step + 1)
    ckpt.save(2, later)
    ckpt.close()
    # Damage every data file of step 2's state.
    for root, _, files in os.walk(tmp_path / "2" / "state"):
        for name in files:
            if name not in ("commit_success.txt",):
                with open(os.path.join(root, name), "wb") as f:
                    f.write(b"\0garbage")
    # An interrupted save of step 3: orbax's temporary directory, never renamed.
    (tmp_path / "3.orbax-checkpoint-tmp-1234").mkdir()
    template = abstract_train_state(spec, config, SIZE)
    with pytest.warns(UserWarning) as record:
        restored = Checkpointer(tmp_path).restore_latest(template)
    messages = [str(w.message) for w in record]
    assert any("partial checkpoint" in m and "3.orbax-checkpoint-tmp" in m for m in messages)
    assert any("2 is corrupt or incomplete" in m for m in messages)
    assert restored.step == 1
    _assert_trees_equal(restored.state, state)


def test_no_checkpoint_restores_none(tmp_path):
    spec, config = ModelSpec("agz_tiny"), LearnerConfig(batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Checkpointer(tmp_path).restore_latest(abstract_train_state(spec, config, 5)) is None


@pytest.mark.parametrize("defer", [False, True])
def test_sigterm_saves_then_exits(tmp_path, defer):
    spec, config, state = _trained_state(1)
    ckpt = Checkpointer(tmp_path, save_every=1000)
    calls = []

    def final_save(signum):
        calls.append(signum)
        ckpt.save(int(state.step), state, force=True)
        ckpt.wait()

    previous = signal.getsignal(signal.SIGTERM)
    guard = install_signal_handlers(final_save, defer=defer)
    try:
        with pytest.raises(SystemExit) as exit_info:
            os.kill(os.getpid(), signal.SIGTERM)
            if defer:
                assert guard.requested and not calls  # nothing saved until the loop checks
                guard.check()
            for _ in range(100):  # the handler runs at the next bytecode boundary
                pass
    finally:
        guard.uninstall()
    assert exit_info.value.code == 128 + signal.SIGTERM
    assert calls == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == previous
    assert ckpt.all_steps() == [1]


# ----------------------------------------------------------------------------


def _worker_main(argv: list[str]) -> None:
    kind, *args = argv
    {"sharded": _worker_sharded, "distributed": _worker_distributed, "single": _worker_single}[
        kind
    ](*args)
    print(json.dumps({"ok": kind}))


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    sys.path.insert(0, REPO)
    _worker_main(sys.argv[2:])
