"""Checkpoints: orbax ``CheckpointManager`` with fallback past a damaged newest step.

A checkpoint holds three items under ``<directory>/<step>/``:

* ``state``: the whole ``TrainState`` (step, params, batch_stats, optimiser
  state, rng), sharded arrays written by every process;
* ``extra``: an optional dict of numpy arrays (replay contents, counters);
* ``meta``: JSON: the run's config (any JSON-able dict) and whether ``extra`` exists.

Arrays that differ by process (a multi-host run's replay buffers: ``save``'s
``local``) are written by each process to its own file beside the step
(:mod:`train.process_arrays`); in a one-process run they go into ``extra``.

Orbax writes a step into a temporary directory and renames it when complete,
so an interrupted save never looks like a checkpoint. Every save also records
a digest of its payload (:func:`payload_digest`, in ``meta``) and reads the
state back to check it, so damage on disk is found where orbax alone would
load it silently (a flipped byte in an uncompressed array). On restore, a step
whose payload no longer matches its digest is moved aside into
``<directory>/corrupt/`` and the previous step is restored instead; one that
cannot be read at all (a truncated or deleted file) is reported with a warning
naming it and skipped the same way.

Rotation keeps the newest ``keep`` steps and, whatever else happens, the newest
step known to be good (read back and matched against its digest): a run whose
later saves are all damaged still has the last good one to resume from::

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
import hashlib
import logging
import os
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from train import process_arrays

log = logging.getLogger(__name__)

_TMP_MARKER = ".orbax-checkpoint-tmp"
CORRUPT_FOLDER = "corrupt"  # under a checkpoint directory: steps that failed their digest


class CorruptCheckpointError(ValueError):
    """A checkpoint's payload does not match the digest written with it."""


def payload_digest(tree: Any) -> str | None:
    """A BLAKE2b digest of every leaf of ``tree``: its path, dtype, shape and bytes.

    None when a leaf is an array this process does not hold whole (a multi-host
    sharding): each host writes only its shards, so no host can check the whole.
    PRNG key arrays are digested by their key data.
    """
    digest = hashlib.blake2b(digest_size=32)
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    for path, leaf in leaves:
        if isinstance(leaf, jax.Array):
            if not leaf.is_fully_addressable:
                return None
            if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                leaf = jax.random.key_data(leaf)
        array = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{jax.tree_util.keystr(path)}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.view(np.uint8).reshape(-1) if array.size else b"")
    return digest.hexdigest()


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
      keep: how many checkpoints to keep (older ones are deleted after a save,
        except the newest verified one).
      async_save: write in a background thread (``save`` returns once the arrays
        are copied off the devices, so the state may be donated right after).
      process_index, process_count: this process and how many there are
        (``jax.process_index()``, ``jax.process_count()`` by default).
      this_process_only: read ``directory`` (which must exist) without the other
        processes of a multi-process job: orbax then holds no barriers with them,
        so each process may open and restore checkpoints on its own, at its own
        time (``restore_variables``: a sweep's processes each read the nets their
        own cells play). Not for saving, which every process takes part in.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        save_every: int = 1000,
        keep: int = 3,
        async_save: bool = False,
        process_index: int | None = None,
        process_count: int | None = None,
        this_process_only: bool = False,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self.directory = os.path.abspath(os.fspath(directory))
        self.save_every = save_every
        self.keep = keep
        self._async = async_save
        self._index = jax.process_index() if process_index is None else process_index
        self._count = jax.process_count() if process_count is None else process_count
        # Steps read back whole and matching their digest (by this process), and
        # steps found unreadable (re-saving one of those replaces it).
        self._verified: set[int] = set()
        self._unreadable: set[int] = set()
        processes = ocp.options.MultiprocessingOptions()  # every process, 0 the primary
        if this_process_only:
            # A manager over this process alone skips orbax's barriers (which would
            # wait for processes doing other work); orbax cannot create its directory then.
            processes = ocp.options.MultiprocessingOptions(
                primary_host=self._index, active_processes={self._index}
            )
        options = ocp.CheckpointManagerOptions(
            max_to_keep=None,  # rotation is ours: it must spare the newest good step
            create=not this_process_only,
            enable_async_checkpointing=async_save,
            multiprocessing_options=processes,
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
        local: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
        force: bool = False,
    ) -> bool:
        """Write a checkpoint at ``step`` if it is due (or ``force``); returns whether it did.

        ``extra`` is a flat or nested dict of arrays (converted to numpy), the same
        on every process; ``local`` one of arrays that differ by process (a replay
        buffer): each process's own are saved and restored, and in a one-process
        run they are part of ``extra``; ``config`` a JSON-able dict; ``info`` more
        JSON kept beside it (small things a copy without ``extra`` still needs: the
        training loop's counters and lineage).
        A step already on disk is not rewritten.
        """
        if not (force or self.should_save(step)):
            return False
        if step in self.all_steps():
            if step not in self._unreadable:
                return False
            self._quarantine(step, "it could not be read back")
        meta: dict[str, Any] = {"config": config, "info": info or {}}
        if local and self._count == 1:
            extra = {**(extra or {}), **local}
        elif local:
            # Each process's own file, before the step exists: a step on disk has them.
            host_local = jax.tree.map(np.asarray, local)
            process_arrays.write(
                self.directory, step, host_local, self._index, self._count, payload_digest
            )
            meta["local"] = {"processes": self._count}
        host = jax.tree.map(np.asarray, extra) if extra else None
        meta["has_extra"] = bool(extra)
        meta["digest"] = {
            "state": payload_digest(state),
            "extra": payload_digest(host) if host else None,
        }
        digest = meta["digest"]
        items = {"state": ocp.args.StandardSave(state), "meta": ocp.args.JsonSave(meta)}
        if host:
            items["extra"] = ocp.args.StandardSave(host)
        saved = self._manager.save(step, args=ocp.args.Composite(**items), force=True)
        log.info("checkpoint step %d -> %s", step, self.directory)
        if saved and not self._async:
            self._manager.wait_until_finished()
            self._check_written(step, state, digest["state"])
            self._rotate()
        return bool(saved)

    def _check_written(self, step: int, state: Any, digest: str | None) -> None:
        """Read the state just written back and compare it with its digest."""
        if digest is None:
            return
        try:
            out = self._manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(state))
            )
            ok = payload_digest(out["state"]) == digest
        except Exception as error:  # noqa: BLE001 - any failure means "not good"
            ok, digest = False, f"{type(error).__name__}: {error}"
        if ok:
            self._verified.add(step)
        else:
            warnings.warn(
                f"checkpoint {self._step_path(step)} did not read back as written ({digest}); "
                "older checkpoints are kept",
                stacklevel=3,
            )

    def _rotate(self) -> None:
        """Delete all but the newest ``keep`` steps, sparing the newest verified one."""
        steps = self.all_steps()
        doomed = steps[: -self.keep]
        if not doomed:
            return
        good = [s for s in steps if s in self._verified]
        spared = good[-1] if good else None
        if spared is None:
            # Nothing verified by this process: spare the newest step that was
            # written before digests existed or that this process never read.
            spared = steps[-1]
        for step in doomed:
            if step != spared:
                self._manager.delete(step)
                process_arrays.delete(self.directory, step, self._index)

    def _step_path(self, step: int) -> str:
        return os.path.join(self.directory, str(step))

    def _quarantine(self, step: int, why: str) -> str:
        """Move step ``step`` into ``<directory>/corrupt/`` (kept for inspection)."""
        folder = os.path.join(self.directory, CORRUPT_FOLDER)
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, str(step))
        suffix = 1
        while os.path.exists(target):
            target = os.path.join(folder, f"{step}-{suffix}")
            suffix += 1
        shutil.move(self._step_path(step), target)
        process_arrays.move(self.directory, step, target)
        self._manager.reload()
        self._unreadable.discard(step)
        self._verified.discard(step)
        warnings.warn(f"checkpoint {self._step_path(step)} moved to {target}: {why}", stacklevel=3)
        return target

    def wait(self) -> None:
        """Block until an asynchronous save has finished (then rotate, unverified)."""
        self._manager.wait_until_finished()
        if self._async:
            self._rotate()

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()

    def read_meta(self, step: int) -> dict[str, Any]:
        """Step ``step``'s JSON meta: ``config``, ``has_extra``, ``info``, ``digest``."""
        return self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))[
            "meta"
        ]

    def restore(self, step: int, template: Any, *, with_extra: bool = True) -> Restored:
        """Restore ``step`` onto ``template``'s shapes, dtypes and shardings.

        Raises :class:`CorruptCheckpointError` when what was read does not match
        the digest saved with it (checkpoints written before digests are not checked).

        ``template`` is a pytree of arrays or ``jax.ShapeDtypeStruct``s with
        ``sharding`` set (``train.learner.abstract_train_state(..., mesh)``).
        ``with_extra=False`` leaves the extra arrays (the replay) unread.
        """
        meta = self.read_meta(step)
        with_extra = with_extra and bool(meta.get("has_extra"))
        items = {"state": ocp.args.StandardRestore(template)}
        if with_extra:
            items["extra"] = ocp.args.StandardRestore()
        out = self._manager.restore(step, args=ocp.args.Composite(**items))
        extra = None
        if with_extra:
            extra = jax.tree.map(np.asarray, out["extra"])
        digest = meta.get("digest") or {}
        checks = [("state", out["state"])] + ([("extra", extra)] if with_extra else [])
        for item, tree in checks:
            expected = digest.get(item)
            if expected is not None and payload_digest(tree) != expected:
                raise CorruptCheckpointError(
                    f"checkpoint {self._step_path(step)}: its {item} does not match the "
                    "digest written with it (damaged on disk)"
                )
        if digest.get("state") is not None:
            self._verified.add(step)
        if meta.get("local") and with_extra:
            extra = {**(extra or {}), **self._restore_local(step, meta["local"]["processes"])}
        return Restored(
            step=step,
            state=out["state"],
            extra=extra,
            config=meta.get("config"),
            info=meta.get("info") or {},
        )

    def _restore_local(self, step: int, saved_count: int) -> dict[str, Any]:
        """This process's own arrays of ``step``; nothing (said once) if they are lost."""
        tree, why = process_arrays.read(
            self.directory, step, self._index, self._count, saved_count, payload_digest
        )
        if why:
            warnings.warn(
                f"process {self._index}: {why}; its per-process arrays (the replay) start "
                "empty and are refilled",
                stacklevel=3,
            )
            return {}
        if saved_count != self._count:
            warnings.warn(
                f"step {step} was saved by {saved_count} processes, restored by "
                f"{self._count}: process {self._index} takes saved process "
                f"{self._index}'s arrays",
                stacklevel=3,
            )
        return tree

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
            except CorruptCheckpointError as error:
                self._quarantine(step, f"{error}; trying the previous one")
            except Exception as error:  # noqa: BLE001 - any failure means "unreadable"
                # Left in place (a changed program, not the file, may be at fault);
                # a later save of this step replaces it.
                self._unreadable.add(step)
                warnings.warn(
                    f"checkpoint {self._step_path(step)} is corrupt or "
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
    local device, with the run's own config rebuilding its shapes, by this
    process alone (no barrier with a multi-process job's others). Raises
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
    # This process alone: a multi-process sweep's processes restore different steps
    # at different times.
    ckpt = Checkpointer(os.path.join(os.fspath(workdir), "checkpoints"), this_process_only=True)
    try:
        config = ckpt.read_meta(step).get("config")
        if not config:
            raise ValueError(f"{workdir}: checkpoint {step} has no config")
        run = ml_collections.ConfigDict(config)
        spec = spec_from_config(run.model)
        shapes = abstract_train_state(spec, learner_config(run), run.board.size)
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        template = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=device), shapes
        )
        state = ckpt.restore(step, template, with_extra=False).state
    finally:
        ckpt.close()
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
