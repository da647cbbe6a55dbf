"""What a run was made with: the code, the libraries and the machine, one line per start.

A training run is reproducible to the bit only with the same code and the same
libraries (a change in how keys are split, or a new XLA, changes the games
played from the first iteration), so every start of a run -- the first and each
resume -- appends a line to ``provenance.jsonl`` in its workdir: the gojax
version and git commit (with whether the checkout had uncommitted changes), the
versions of the libraries that decide the numbers, the devices, the command
line, the environment variables that change what JAX or gojax compute, and the
step the run started from.

    {"started": "2026-12-04T19:30:00Z", "step": 0, "gojax": "0.1.0",
     "git_commit": "97110e0...", "git_dirty": false, "python": "3.12.3",
     "libraries": {"jax": "0.10.2", ...}, "backend": "cpu", "devices": 2,
     "device_kind": "cpu", "processes": 1, "argv": [...], "env": {...}}
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax

from gojax.atomic import write_atomic

__all__ = ["PROVENANCE_FILE", "provenance", "read_provenance", "record_start"]

PROVENANCE_FILE = "provenance.jsonl"

# The distributions whose versions decide what a run computes.
LIBRARIES = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "mctx",
    "chex",
    "orbax-checkpoint",
    "numpy",
    "ml_collections",
)
# Environment variables that change what is computed (XLA's flags, JAX's defaults,
# gojax's own switches such as GOJAX_EIGEN_CONVOLUTIONS).
ENV_PREFIXES = ("GOJAX_", "XLA_", "JAX_")

_SOURCE = Path(__file__).resolve().parents[1]  # the checkout (or site-packages) holding gojax


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    """``git args`` in the source checkout, or None when it is not one (an installed
    package) or git is missing or slow."""
    if not (_SOURCE / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(_SOURCE), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def provenance(step: int = 0) -> dict[str, Any]:
    """The code, libraries and machine of this process, starting a run at ``step``."""
    commit = _git("rev-parse", "HEAD")
    # Tracked files only: a run's own workdir inside the checkout must not count.
    changes = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    devices = jax.devices()
    return {
        "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "step": int(step),
        "gojax": _version("gojax"),
        "git_commit": commit,
        "git_dirty": None if changes is None else bool(changes),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in LIBRARIES},
        "backend": jax.default_backend(),
        "devices": len(devices),
        "device_kind": devices[0].device_kind,
        "processes": jax.process_count(),
        "host": platform.machine(),
        # The program by its name: where it is installed says nothing about the run.
        "argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]] if sys.argv else [],
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)},
    }


def read_provenance(workdir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every start recorded in ``workdir``, the first first; [] when there is none."""
    path = Path(workdir) / PROVENANCE_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def record_start(workdir: str | os.PathLike, config_json: dict[str, Any], step: int = 0) -> None:
    """Write the run's ``config.json`` and append this start to ``provenance.jsonl``,
    both atomically (a reader or a kill never sees half a file)."""
    workdir = Path(workdir)
    write_atomic(workdir / "config.json", json.dumps(config_json, indent=2) + "\n")
    path = workdir / PROVENANCE_FILE
    before = path.read_text() if path.exists() else ""
    if before and not before.endswith("\n"):
        before += "\n"
    write_atomic(path, before + json.dumps(provenance(step)) + "\n")
