"""Checkpoints: orbax ``CheckpointManager`` with fallback past a damaged newest step.

A checkpoint holds three items under ``<directory>/<step>/``:

* ``state``: the whole ``TrainState`` (step, params, batch_stats, optimiser
  state, rng), sharded arrays written by every process;
* ``extra``: an optional dict of numpy arrays (replay contents, counters);
* ``meta``: JSON: the run's config (any JSON-able dict) and whether ``extra`` exists.

Orbax writes a step into a temporary directory and renames it when complete,
so an interrupted save never looks like a checkpoint; a finished step that
cannot be read back (a truncated or deleted file) is reported with a warning
naming it and the previous step is restored instead::

    ckpt = Checkpointer(workdir / "checkpoints", save_every=1000, keep=3)
    restored = ckpt.restore_latest(abstract_train_state(spec, config, size, mesh))
    state = restored.state if restored else create_train_state(...)
    guard = install_signal_handlers(lambda signum: ckpt.save(int(state.step), state, force=True))
    for ...:
        state, metrics = step(state, batch)
        ckpt.save(int(state.step), state, extra=..., config=...)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

log = logging.getLogger(__name__)

_TMP_MARKER = ".orbax-checkpoint-tmp"


@dataclasses.dataclass
class Restored:
    """What ``restore_latest`` found."""

    step: int  # the checkpoint's step number
    state: Any  # the state pytree, on the template's shardings
    extra: dict[str, np.ndarray] | None  # the extra arrays, on the host
    config: dict[str, Any] | None  # the JSON config saved with it
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # ``save``'s JSON ``info``


class Checkpointer:
    """Save every ``save_every`` steps (or on demand), keep the newest ``keep``.

    Args:
      directory: where step directories go (created if missing). On several
        hosts it must be a filesystem they share.
      save_every: ``save`` without ``force`` writes only when ``step`` is a multiple.
      keep: how many checkpoints to keep (older ones are deleted after a save).
      async_save: write in a background thread (``save`` returns once the arrays
        are copied off the devices, so the state may be donated right after).
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        save_every: int = 1000,
        keep: int = 3,
        async_save: bool = False,
    ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self.save_every = save_every
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=True,
            enable_async_checkpointing=async_save,
        )
        self._manager = ocp.CheckpointManager(
            self.directory, item_names=("state", "extra", "meta"), options=options
        )

    def all_steps(self) -> list[int]:
        """Steps of the complete checkpoints on disk, oldest first."""
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        steps = self.all_steps()
        return steps[-1] if steps else None

    def should_save(self, step: int) -> bool:
        return self.save_every > 0 and step % self.save_every == 0

    def save(
        self,
        step: int,
        state: Any,
        *,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
        force: bool = False,
    ) -> bool:
        """Write a checkpoint at ``step`` if it is due (or ``force``); returns whether it did.

        ``extra`` is a flat or nested dict of arrays (converted to numpy);
        ``config`` a JSON-able dict; ``info`` more JSON kept beside it (small things a
        copy without ``extra`` still needs: the training loop's counters and lineage).
        A step already on disk is not rewritten.
        """
        if not (force or self.should_save(step)):
            return False
        if step in self.all_steps():
            return False
        items = {
            "state": ocp.args.StandardSave(state),
            "meta": ocp.args.JsonSave(
                {"config": config, "has_extra": bool(extra), "info": info or {}}
            ),
        }
        if extra:
            host = jax.tree.map(np.asarray, extra)
            items["extra"] = ocp.args.StandardSave(host)
        saved = self._manager.save(step, args=ocp.args.Composite(**items), force=True)
        log.info("checkpoint step %d -> %s", step, self.directory)
        return bool(saved)

    def wait(self) -> None:
        """Block until an asynchronous save has finished."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()

    def restore(self, step: int, template: Any, *, with_extra: bool = True) -> Restored:
        """Restore ``step`` onto ``template``'s shapes, dtypes and shardings.

        ``template`` is a pytree of arrays or ``jax.ShapeDtypeStruct``s with
        ``sharding`` set (``train.learner.abstract_train_state(..., mesh)``).
        ``with_extra=False`` leaves the extra arrays (the replay) unread.
        """
        meta = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))[
            "meta"
        ]
        with_extra = with_extra and bool(meta.get("has_extra"))
        items = {"state": ocp.args.StandardRestore(template)}
        if with_extra:
            items["extra"] = ocp.args.StandardRestore()
        out = self._manager.restore(step, args=ocp.args.Composite(**items))
        extra = None
        if with_extra:
            extra = jax.tree.map(np.asarray, out["extra"])
        return Restored(
            step=step,
            state=out["state"],
            extra=extra,
            config=meta.get("config"),
            info=meta.get("info") or {},
        )

    def restore_latest(self, template: Any) -> Restored | None:
        """The newest checkpoint that reads back whole, or ``None`` if there is none.

        A newest step that fails to restore is reported (``warnings.warn``
        naming its directory and the error) and the one before it is tried;
        leftover temporary directories of interrupted saves are reported too.
        """
        for name in sorted(os.listdir(self.directory)) if os.path.isdir(self.directory) else []:
            if _TMP_MARKER in name:
                warnings.warn(
                    f"ignoring partial checkpoint {os.path.join(self.directory, name)} "
                    "(an interrupted save)",
                    stacklevel=2,
                )
        for step in reversed(self.all_steps()):
            try:
                return self.restore(step, template)
            except Exception as error:  # noqa: BLE001 - any failure means "unreadable"
                warnings.warn(
                    f"checkpoint {os.path.join(self.directory, str(step))} is corrupt or "
                    f"incomplete ({type(error).__name__}: {error}); trying the previous one",
                    stacklevel=2,
                )
        return None


class SignalGuard:
    """What ``install_signal_handlers`` returns: the request flag and a way to undo it."""

    def __init__(self, callback: Callable[[int], None] | None, defer: bool) -> None:
        self.callback = callback
        self.defer = defer
        self.signum: int | None = None
        self._lock = threading.Lock()
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether SIGTERM or SIGINT has arrived."""
        return self.signum is not None

    def _handle(self, signum: int, frame: Any) -> None:
        del frame
        if self.signum is not None and not self.defer:
            return  # a second signal while saving: let the first finish
        self.signum = signum
        if not self.defer:
            self._finish()

    def check(self) -> None:
        """With ``defer=True``: call between steps; saves and exits if a signal arrived."""
        if self.signum is not None:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            signum = self.signum
            log.warning("signal %s: saving a final checkpoint, then exiting", signum)
            if self.callback is not None:
                self.callback(signum)
            self.uninstall()
            sys.exit(128 + signum)

    def uninstall(self) -> None:
        """Put back the handlers that were there before."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


def install_signal_handlers(
    callback: Callable[[int], None] | None, *, defer: bool = False
) -> SignalGuard:
    """Turn SIGTERM and SIGINT into ``callback(signum)`` (a final save) and ``sys.exit``.

    ``defer=False``: the callback runs in the handler, between two Python
    bytecodes of the main thread. ``defer=True``: the handler only records the
    signal; the training loop calls ``guard.check()`` after each step, so the
    save never sees a state whose buffers a step has just donated. The exit
    status is ``128 + signum``, as a shell reports a killed process. Must be
    called from the main thread.
    """
    guard = SignalGuard(callback, defer)
    for signum in (signal.SIGTERM, signal.SIGINT):
        guard._previous[signum] = signal.signal(signum, guard._handle)
    return guard


# ----------------------------------------------------------------------------
# Reading a training run's networks (evaluation, sweeps).


@dataclasses.dataclass
class RunVariables:
    """One checkpoint's network, as evaluation needs it."""

    step: int
    config: dict[str, Any]  # the run's config (JSON), as saved with the checkpoint
    variables: dict[str, Any]  # {"params", "batch_stats"}: host numpy arrays


def checkpoint_steps(workdir: str | os.PathLike) -> list[int]:
    """Steps of the complete checkpoints of the training run in ``workdir``, oldest first."""
    directory = os.path.join(os.fspath(workdir), "checkpoints")
    if not os.path.isdir(directory):
        return []
    return sorted(
        int(name)
        for name in os.listdir(directory)
        if name.isdigit() and os.path.isdir(os.path.join(directory, name, "state"))
    )


def restore_variables(workdir: str | os.PathLike, step: int | None = None) -> RunVariables:
    """The network variables of checkpoint ``step`` (None: the newest) of a training run.

    Only the train state is read (not the replay contents), onto the first
    local device, with the run's own config rebuilding its shapes. Raises
    ValueError naming what is missing when the run or the step is not there.
    """
    import ml_collections

    from train.learner import abstract_train_state
    from train.loop import learner_config
    from train.model import spec_from_config

    steps = checkpoint_steps(workdir)
    if not steps:
        raise ValueError(f"{workdir}: no checkpoints (expected {workdir}/checkpoints/<step>/)")
    step = steps[-1] if step is None else int(step)
    if step not in steps:
        raise ValueError(f"{workdir}: no checkpoint at step {step}; there are {steps}")
    ckpt = Checkpointer(os.path.join(os.fspath(workdir), "checkpoints"))
    try:
        meta = ckpt._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        config = meta["meta"].get("config")
        if not config:
            raise ValueError(f"{workdir}: checkpoint {step} has no config")
        run = ml_collections.ConfigDict(config)
        spec = spec_from_config(run.model)
        shapes = abstract_train_state(spec, learner_config(run), run.board.size)
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        template = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=device), shapes
        )
        out = ckpt._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(template))
        )
    finally:
        ckpt.close()
    state = out["state"]
    variables = jax.device_get({"params": state.params, "batch_stats": state.batch_stats})
    return RunVariables(step=step, config=config, variables=variables)


def restore_matching_network(
    workdir: str | os.PathLike, step: int | None, spec: Any, size: int, *, role: str
) -> RunVariables:
    """:func:`restore_variables`, checked to be ``spec``'s net on ``size`` x ``size`` boards.

    ``role`` names the run in the error ("init run", "RL policy run"): a
    ``ValueError`` says which preset and board size the run has and which
    the config asks for.
    """
    import ml_collections

    from train.model import spec_from_config

    run = restore_variables(workdir, step)
    theirs = spec_from_config(ml_collections.ConfigDict(run.config["model"]))
    theirs_size = int(run.config["board"]["size"])
    if (theirs.preset, theirs.opponent_policy, theirs_size) != (
        spec.preset,
        spec.opponent_policy,
        size,
    ):
        raise ValueError(
            f"{role} {workdir} (step {run.step}) is a {theirs.preset!r} net on "
            f"{theirs_size}x{theirs_size}; this config uses {spec.preset!r} on "
            f"{size}x{size}: set model.preset and board.size to match"
        )
    if theirs.short_term_heads != spec.short_term_heads:
        has = {True: "has", False: "has no"}
        raise ValueError(
            f"{role} {workdir} (step {run.step}) {has[theirs.short_term_heads]} short-term "
            f"heads; this config {has[spec.short_term_heads]}: set model.short_term_heads "
            "to match"
        )
    if theirs.activation != spec.activation:
        said = {"": "the preset's"}
        raise ValueError(
            f"{role} {workdir} (step {run.step}) uses activation "
            f"{said.get(theirs.activation, repr(theirs.activation))}; this config uses "
            f"{said.get(spec.activation, repr(spec.activation))}: set model.activation to match"
        )
    return run
