"""The training loop: self-play, replay, learner steps, metrics, checkpoints, evaluation.

``train(config, workdir)`` runs AlphaGo Zero's loop on one process (or every
process of a multi-host job) from an ``ml_collections.ConfigDict`` (see
``configs/``)::

    iteration: self-play num_games games with the current params -> replay
               if the replay holds replay.min_size positions:
                   updates_per_iteration learner steps on sampled batches
               metrics -> metrics.jsonl, TensorBoard, plot; SGF of a few games
    until train.total_steps learner steps or train.max_minutes

Everything random derives from ``config.seed``: iteration ``i`` self-plays with
``fold_in(selfplay_key, i)`` and learner step ``s`` samples with
``fold_in(sample_key, s)``. A checkpoint (every ``train.checkpoint_every``
steps, at the end, on SIGTERM/SIGINT) holds the train state, the replay
contents and the counters (iteration, updates left in it), so a resumed run
continues exactly where the stopped one was: it produces the same losses as
a run that never stopped.

Workdir layout: ``checkpoints/<step>/``, ``metrics.jsonl``, ``tb/`` (TensorBoard
events), ``learning_curve.png``, ``eval.json``, ``sgf/iter_<i>/``, ``config.json``.

This module holds the loop itself (``train``) and the evaluation and gating it
runs; the rest lives in private modules and is re-exported here, so that
``from train.loop import X`` works for all of it: the config's keys, loading,
overrides and resume checks (``train._loop_config``), the pieces built from a
config (``train._loop_parts``) and what a run records (``train._loop_metrics``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from gojax.atomic import write_atomic
from train import model as model_lib
from train._loop_config import RESUMABLE_PREFIXES as RESUMABLE_PREFIXES
from train._loop_config import _check_resumable, _saved_config, config_to_json
from train._loop_config import _flatten as _flatten
from train._loop_config import apply_overrides as apply_overrides
from train._loop_config import default_config as default_config
from train._loop_config import incompatible_keys as incompatible_keys
from train._loop_config import learner_group as learner_group
from train._loop_config import load_config as load_config
from train._loop_metrics import LEARNING_CURVE_PANELS as LEARNING_CURVE_PANELS
from train._loop_metrics import _eval_record, _Metrics, _write_sgf
from train._loop_metrics import plot_learning_curve as plot_learning_curve
from train._loop_parts import (
    _across_processes,
    _host_variables,
    _past,
    _search_config,
    _to_learner_batch,
    _train_step,
    learner_config,
    selfplay_config,
    selfplay_functions,
)
from train._loop_parts import replay_encoder as replay_encoder
from train.checkpoint import Checkpointer, install_signal_handlers
from train.config_checks import check_run_config
from train.continuation import continue_from, write_lineage
from train.evaluation import GAMES_AXIS, play_arena, random_agent, search_agent, uct_agent
from train.learner import (
    abstract_train_state,
    check_finite,
    create_train_state,
    first_non_finite,
    make_mesh,
    shard_batch,
)
from train.provenance import record_start
from train.replay import ReplayBuffer
from train.selfplay import play_games

__all__ = [
    "apply_overrides",
    "default_config",
    "incompatible_keys",
    "load_config",
    "plot_learning_curve",
    "train",
]

# Replay-free copies of the state every train.snapshot_every steps: <workdir>/snapshots/
# checkpoints/<step>, so that the folder reads as a run's workdir (sweeps, init_from).
SNAPSHOTS = Path("snapshots") / "checkpoints"


# ----------------------------------------------------------------------------
# Evaluation.


def evaluate(
    config: ml_collections.ConfigDict,
    state,
    key: jax.Array,
    workdir: Path | None = None,
    variables: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The net with a small search against random play and UCT at equal simulations.

    Writes ``workdir/eval.json`` when ``workdir`` is given and prints a table.
    Returns one row per opponent: ``opponent, games, wins, losses, draws,
    win_rate, ci95``. ``variables``: the state's parameters on the host, when
    the caller gathered them already (in a multi-process job every process must
    take part in that gather, while only one evaluates).
    """
    e, b = config.eval, config.board
    spec = model_lib.spec_from_config(config.model)
    search_config = _search_config(
        config.selfplay,
        num_simulations=e.num_simulations,
        temperature_moves=e.temperature_moves,
        move_temperature=None,  # evaluation's own temperature_moves
        move_temperature_early=None,
        gumbel_scale=e.gumbel_scale,
    ).without_root_exploration()
    if variables is None:
        variables = _host_variables(state)
    net = search_agent(spec, model_lib.build(spec), variables, search_config)
    # The UCT baseline searches the same move set as the net: equal knowledge of Go.
    uct = uct_agent(e.num_simulations, moves=config.selfplay.moves)
    opponents = {"random": random_agent(), f"uct{e.num_simulations}": uct}
    # The games are split over this process's devices; an arena game does not depend on
    # how the games are split (tests/test_arena.py), so neither do the results.
    local = jax.local_devices()
    mesh = jax.sharding.Mesh(np.asarray(local), (GAMES_AXIS,)) if len(local) > 1 else None
    rows = []
    for i, (name, opponent) in enumerate(opponents.items()):
        result = play_arena(
            net,
            opponent,
            jax.random.fold_in(key, i),
            size=b.size,
            num_games=e.num_games,
            komi=b.komi,
            rules=b.rules,
            max_moves=b.max_moves or None,
            mesh=mesh,
        )
        rows.append({"opponent": name, **result.summary()})
    lines = [f"{'opponent':<10} {'games':>5} {'wins':>5} {'win rate':>8}  95% CI"]
    for r in rows:
        lo, hi = r["ci95"]
        lines.append(
            f"{r['opponent']:<10} {r['games']:>5} {r['wins']:>5} {r['win_rate']:>8.3f}"
            f"  [{lo:.3f}, {hi:.3f}]"
        )
    print("\n".join(lines))
    if workdir is not None:
        step = int(jax.device_get(state.step))
        report = json.dumps({"step": step, "results": rows}, indent=2) + "\n"
        write_atomic(workdir / "eval.json", report)
    return rows


def gate_candidate(config: ml_collections.ConfigDict, candidate, best, key: jax.Array):
    """AlphaGo Zero's gate (``train.gating.gate``): the learner's net against the best one.

    Both search with ``gating.num_simulations`` (no noise, the most visited
    move) over ``gating.num_games`` games; returns the ``GateResult``.
    """
    from train.agents import search_agent as arena_search_agent
    from train.gating import gate

    g, b = config.gating, config.board
    spec = model_lib.spec_from_config(config.model)
    search_config = _search_config(
        config.selfplay,
        num_simulations=g.num_simulations,
        temperature_moves=0,
        move_temperature=None,  # the best move
        move_temperature_early=None,
        gumbel_scale=0.0,
    ).without_root_exploration()
    return gate(
        arena_search_agent(spec, candidate, search_config, name="candidate"),
        arena_search_agent(spec, best, search_config, name="best"),
        key,
        num_games=g.num_games,
        threshold=g.threshold,
        size=b.size,
        komi=b.komi,
        rules=b.rules,
        max_moves=b.max_moves or None,
    )


# ----------------------------------------------------------------------------
# The loop.


def train(config: ml_collections.ConfigDict, workdir: str | os.PathLike) -> dict[str, Any]:
    """Train from ``config`` in ``workdir`` (resuming from its newest checkpoint).

    Returns a summary: ``step``, ``iteration``, ``games``, ``replay_size``,
    ``resumed_from`` (step or None), ``stopped`` (``"total_steps"`` or
    ``"max_minutes"``), ``losses`` (total loss of every learner step this
    call ran, in order), ``eval`` (the final evaluation rows, or None).
    Raises ``ValueError`` if the checkpoint's config differs in keys other
    than ``train.*`` and ``eval.*``.
    """
    check_run_config(config)  # before anything is written
    workdir = Path(workdir)
    chief = jax.process_index() == 0
    workdir.mkdir(parents=True, exist_ok=True)
    t = config.train
    spec = model_lib.spec_from_config(config.model)
    sp_config = selfplay_config(config)
    lconfig = learner_config(config)
    mesh = make_mesh(lconfig)
    step_fn = _train_step(spec, lconfig, mesh)
    evaluator_fn, encode_fn = selfplay_functions(spec)
    config_json = config_to_json(config)

    root = jax.random.PRNGKey(config.seed)
    key_init, key_selfplay, key_sample, key_eval = jax.random.split(root, 4)
    key_gate = jax.random.fold_in(root, 1)
    gating = config.gating.every_iterations > 0
    # Each host plays its own games and samples its own slice of the batch.
    key_selfplay = jax.random.fold_in(key_selfplay, jax.process_index())
    key_sample = jax.random.fold_in(key_sample, jax.process_index())
    local_batch = lconfig.batch_size // jax.process_count()

    ckpt = Checkpointer(
        workdir / "checkpoints", save_every=t.checkpoint_every, keep=t.keep_checkpoints
    )
    snapshots = (
        Checkpointer(workdir / SNAPSHOTS, save_every=t.snapshot_every, keep=2**31 - 1)
        if t.snapshot_every
        else None
    )
    replay = ReplayBuffer(config.replay.capacity)
    # Check the config before restoring: a different net would fail to restore
    # and read as a damaged checkpoint, and the run would silently start afresh.
    latest = ckpt.latest_step()
    if latest is not None:
        _check_resumable(_saved_config(ckpt.directory, latest), config_json, workdir, latest)
    template = abstract_train_state(spec, lconfig, sp_config.size, mesh)
    restored = ckpt.restore_latest(template)
    # Cumulative over the run's whole lineage (continuations included): the compute
    # behind its nets. cpu_seconds is this process's (every thread's) CPU time.
    counters = {
        "iteration": 0,
        "pending_updates": 0,
        "games": 0,
        "positions": 0,
        "cpu_seconds": 0.0,
        "wall_seconds": 0.0,
    }
    best = None  # with gating: the variables self-play uses
    lineage: list[dict[str, Any]] = []
    if restored is None and latest is None and t.init_from:
        restored = continue_from(t.init_from, template, config_json)
        state, lineage = restored.state, restored.info["lineage"]
        for k, v in restored.info.get("counters", {}).items():
            if k in counters and k != "pending_updates":  # the new replay fills first
                counters[k] = type(counters[k])(v)
        if chief:
            write_lineage(workdir, lineage)
        resumed_from = None
    elif restored is None:
        if latest is not None:
            raise ValueError(f"{ckpt.directory}: no checkpoint could be restored (see warnings)")
        state = create_train_state(spec, lconfig, key_init, sp_config.size, mesh)
        resumed_from = None
    else:
        lineage = list(restored.info.get("lineage", []))
        _check_resumable(restored.config, config_json, workdir, restored.step)
        state = restored.state
        extra = restored.extra or {}
        if "replay" in extra:  # absent: a multi-host process whose file was lost refills it
            replay.load_state_dict(dict(extra["replay"]))
        best = extra.get("best")
        for k in counters:
            if k in extra.get("counters", {}):
                counters[k] = type(counters[k])(extra["counters"][k])
        resumed_from = restored.step
    if gating and best is None:
        best = _host_variables(state)  # the first network is the first best
    if chief:
        # The step it starts from: a continuation's (train.init_from) is its source's.
        record_start(workdir, config_json, int(jax.device_get(state.step)))

    def info() -> dict[str, Any]:
        """What a checkpoint or snapshot carries beside the state: counters, lineage."""
        return {"counters": dict(counters), "lineage": lineage}

    def save(force: bool, pending: Sequence[dict[str, Any]] = ()) -> None:
        """A checkpoint if one is due (or ``force``), of a finite state only: a
        non-finite loss among ``pending`` (this iteration's steps so far) or value in the
        state stops the run before anything is written, so the newest checkpoint stays
        the newest finite one."""
        step = int(jax.device_get(state.step))
        if not (force or ckpt.should_save(step)):
            return
        if pending:
            host = jax.device_get(list(pending))
            check_finite({k: np.stack([m[k] for m in host]) for k in host[0]}, step=step)
        _check_state_finite(state, step, ckpt)
        count_time()
        extra = {
            "counters": {k: np.asarray(v) for k, v in counters.items()},
            **({"best": best} if gating else {}),
        }
        # Each host's replay is its own (its games, its share of every batch).
        local = {"replay": replay.state_dict()}
        ckpt.save(
            step, state, extra=extra, local=local, config=config_json, info=info(), force=force
        )

    def snapshot() -> None:
        step = int(jax.device_get(state.step))
        if snapshots is not None and snapshots.should_save(step):
            _check_state_finite(state, step, snapshots)
            count_time()
            snapshots.save(step, state, config=config_json, info=info())

    guard = install_signal_handlers(lambda signum: (save(True), ckpt.close()), defer=True)

    def evaluate_now() -> list[dict[str, Any]] | None:
        """The chief evaluates the current net and records it; returns its rows (None
        elsewhere). Every process takes part in gathering the parameters (a collective)."""
        variables = _host_variables(state)
        if not chief:
            return None
        rows = evaluate(config, state, jax.random.fold_in(key_eval, step), workdir, variables)
        metrics_out.write(_eval_record(rows, step))
        return rows

    metrics_out = _Metrics(workdir, enabled=chief)
    start = time.perf_counter()
    deadline = start + 60.0 * t.max_minutes if t.max_minutes else math.inf
    step = int(jax.device_get(state.step))
    losses: list[float] = []
    clock = [time.perf_counter(), time.process_time()]  # when the counters last grew

    def count_time() -> None:
        now = [time.perf_counter(), time.process_time()]
        counters["wall_seconds"] += now[0] - clock[0]
        counters["cpu_seconds"] += now[1] - clock[1]
        clock[:] = now

    bar = None
    if chief and t.progress:
        from tqdm import tqdm

        bar = tqdm(total=t.total_steps, initial=step, unit="step", dynamic_ncols=True)
    try:
        while step < t.total_steps:
            if _past(deadline):
                break
            record: dict[str, Any] = {}
            iteration = counters["iteration"]
            if counters["pending_updates"] == 0:
                # Self-play a batch with the current params.
                variables = best if gating else _host_variables(state)
                traj, stats = play_games(
                    evaluator_fn,
                    encode_fn,
                    variables,
                    jax.random.fold_in(key_selfplay, iteration),
                    sp_config,
                )
                added = replay.add(traj)
                # Every host's games count, and the learner starts when every host's
                # replay is big enough: its steps are collectives all hosts must join.
                finished, added, replay_size = _across_processes(
                    [int(stats["games_finished"]), added, len(replay)]
                ).T
                if finished.sum() == 0:
                    # Unfinished games give no targets: the run would self-play forever.
                    raise ValueError(
                        f"no self-play game ended within selfplay.num_steps={sp_config.steps} "
                        "moves; raise it, or set 0 to play whole games"
                    )
                counters["games"] += int(finished.sum())
                counters["positions"] += int(added.sum())
                record.update({f"selfplay.{k}": v for k, v in stats.items()})
                record["selfplay.games_per_second"] = stats["games"] / max(stats["seconds"], 1e-9)
                if chief and t.sgf_games > 0:
                    _write_sgf(traj, sp_config, workdir / "sgf", iteration, t)
                counters["iteration"] = iteration + 1
                if replay_size.min() >= config.replay.min_size:
                    counters["pending_updates"] = t.updates_per_iteration
            # Learner steps (possibly the rest of an iteration a stop interrupted).
            step_metrics = []
            learn_start = time.perf_counter()
            while counters["pending_updates"] > 0 and step < t.total_steps:
                sample = replay.sample(
                    jax.random.fold_in(key_sample, step),
                    local_batch,
                    one_per_game=config.replay.one_per_game,
                    augment=config.replay.augment,
                )
                batch = shard_batch(_to_learner_batch(sample, spec), mesh)
                state, metrics = step_fn(state, batch)
                step += 1
                counters["pending_updates"] -= 1
                step_metrics.append(metrics)
                every_gate = config.gating.every_iterations
                if gating and counters["pending_updates"] == 0:
                    if counters["iteration"] % every_gate == 0:
                        # Before the save: a checkpoint here must hold the decision.
                        candidate = _host_variables(state)
                        key = jax.random.fold_in(key_gate, counters["iteration"])
                        outcome = gate_candidate(config, candidate, best, key)
                        if outcome.promoted:
                            best = candidate
                        record["gating.win_rate"] = outcome.win_rate
                        record["gating.promoted"] = float(outcome.promoted)
                if bar is not None:
                    bar.update(1)
                save(False, step_metrics)
                snapshot()
                guard.check()
                if _past(deadline):
                    break
            if step_metrics:
                host = jax.device_get(step_metrics)
                check_finite({k: np.stack([m[k] for m in host]) for k in host[0]}, step=step)
                seconds = time.perf_counter() - learn_start
                losses.extend(float(m["total_loss"]) for m in host)
                for k in host[0]:
                    record[f"learner.{k}"] = float(np.mean([m[k] for m in host]))
                record["learner.samples_per_second"] = len(host) * lconfig.batch_size / seconds
                record["learner.steps"] = len(host)
                record["learner.seconds"] = seconds
                if bar is not None:
                    bar.set_postfix(loss=f"{record['learner.total_loss']:.3f}", refresh=False)
            count_time()
            record.update(
                step=step,
                iteration=counters["iteration"],
                games=counters["games"],
                positions=counters["positions"],
                cpu_hours=counters["cpu_seconds"] / 3600,
                wall_hours=counters["wall_seconds"] / 3600,
                replay_size=len(replay),
                replay_bytes=replay.nbytes,
                wall_seconds=time.perf_counter() - start,
            )
            metrics_out.write(record)
            if t.plot_every and counters["iteration"] % t.plot_every == 0:
                metrics_out.plot()
            every = config.eval.every_iterations
            if every and config.eval.num_games and counters["iteration"] % every == 0:
                evaluate_now()
            guard.check()
        stopped = "total_steps" if step >= t.total_steps else "max_minutes"
        save(True)
        ckpt.wait()
    finally:
        guard.uninstall()
        if bar is not None:
            bar.close()
    rows = evaluate_now() if config.eval.num_games > 0 else None
    metrics_out.plot()
    metrics_out.close()
    ckpt.close()
    if snapshots is not None:
        snapshots.close()
    return {
        "step": step,
        "iteration": counters["iteration"],
        "games": counters["games"],
        "replay_size": len(replay),
        "resumed_from": resumed_from,
        "stopped": stopped,
        "losses": losses,
        "eval": rows,
    }


def _check_state_finite(state, step: int, ckpt: Checkpointer) -> None:
    """Raise ``FloatingPointError`` naming the first non-finite part of the train state
    (parameters, BatchNorm statistics, optimiser state), which is then not saved."""
    bad = first_non_finite((state.params, state.batch_stats, state.opt_state))
    if bad is not None:
        newest = ckpt.latest_step()
        kept = f"the newest checkpoint is still step {newest}" if newest is not None else "none"
        raise FloatingPointError(
            f"training stopped at step {step}: the train state holds NaN or inf in "
            f"{bad}; not saved ({kept})"
        )
