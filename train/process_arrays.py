"""Arrays each process of a multi-host run keeps for itself, saved beside a checkpoint.

A replay buffer is local to its host: each host self-plays its own games and
samples its own share of every batch. Orbax writes host (numpy) arrays once,
from process 0, so a checkpoint's ``extra`` holds one host's buffer; restored
on every host it would leave an N-host run training on N copies of the same
data. Arrays that differ by process therefore go to their own files::

    <checkpoints>/local/<step>/process-<i>-of-<n>.npz

each written atomically by process ``i`` with a digest of its contents, before
the step's orbax save (a step on disk thus has its processes' files, unless one
was lost later). A process restores its own file; one that is missing or damaged
is reported and that process starts with nothing (its self-play refills the
buffer): it never falls back to another step, which would leave the hosts on
different steps. A run resumed with another number of processes gives process
``i`` the file of saved process ``i`` when there is one.

A one-process run keeps these arrays in ``extra``, as before (nothing here).

Shapes: any nested ``dict[str, ...]`` of numpy arrays, its keys free of ``"|"``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np

from gojax.atomic import atomic_file

FOLDER = "local"  # under a checkpoint directory
_DIGEST_KEY = "|digest"  # stored beside the arrays (no array path starts with "|")


def step_folder(directory: str | os.PathLike, step: int) -> str:
    return os.path.join(os.fspath(directory), FOLDER, str(step))


def process_file(directory: str | os.PathLike, step: int, index: int, count: int) -> str:
    return os.path.join(step_folder(directory, step), f"process-{index}-of-{count}.npz")


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    """``{"a": {"b": x}}`` -> ``{"a|b": x}``."""
    flat: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        if "|" in key:
            raise ValueError(f"array name {key!r} contains '|'")
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "|"))
        else:
            flat[name] = np.asarray(value)
    return flat


def unflatten(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split("|")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree


def write(
    directory: str | os.PathLike, step: int, tree: dict[str, Any], index: int, count: int, digest
) -> None:
    """Write process ``index``'s arrays of ``step`` (``digest``: ``payload_digest``)."""
    flat = flatten(tree)
    flat[_DIGEST_KEY] = np.asarray(digest(tree) or "")
    # Streamed to the file (a replay is large: no second copy in memory).
    with atomic_file(process_file(directory, step, index, count), "wb") as handle:
        np.savez(handle, **flat)


def read(
    directory: str | os.PathLike, step: int, index: int, count: int, saved_count: int, digest
) -> tuple[dict[str, Any] | None, str | None]:
    """Process ``index``'s arrays of ``step`` (``count`` processes now, ``saved_count`` then).

    Returns ``(tree, None)``, or ``(None, why)`` when this process has nothing to
    restore (a missing or damaged file, or no saved process of its index).
    """
    if index >= saved_count:
        return None, f"step {step} was saved by {saved_count} processes; this is process {index}"
    path = process_file(directory, step, index, saved_count)
    try:
        with np.load(path) as data:
            flat = {name: data[name] for name in data.files}
    except FileNotFoundError:
        return None, f"{path} is missing"
    except Exception as error:  # noqa: BLE001 - any failure to read means "damaged"
        return None, f"{path} cannot be read ({type(error).__name__}: {error})"
    expected = str(flat.pop(_DIGEST_KEY, ""))
    tree = unflatten(flat)
    if expected and digest(tree) != expected:
        return None, f"{path} does not match the digest written with it (damaged on disk)"
    return tree, None


def delete(directory: str | os.PathLike, step: int, index: int) -> None:
    """Remove process ``index``'s files of ``step`` (and the step's folder once empty)."""
    folder = step_folder(directory, step)
    if not os.path.isdir(folder):
        return
    for name in os.listdir(folder):
        if name.startswith(f"process-{index}-of-"):
            try:
                os.remove(os.path.join(folder, name))
            except FileNotFoundError:
                pass
    try:
        os.rmdir(folder)  # fails while another process's file is there: it removes it later
    except OSError:
        pass


def move(directory: str | os.PathLike, step: int, target: str) -> None:
    """Move ``step``'s files (all processes') to ``target`` (a quarantined step's folder)."""
    folder = step_folder(directory, step)
    if os.path.isdir(folder):
        shutil.move(folder, os.path.join(target, FOLDER))
