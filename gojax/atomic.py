"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Results, cells, manifests and plots are written to a temporary file beside
the target, flushed to disk, then renamed over it (``os.replace`` is atomic
on POSIX within one filesystem). A failure removes the temporary file and
leaves the target as it was.

A file that still reads back damaged (a disk fault, a copy cut short, a line
appended by a process killed mid-write) is reported by its reader with a
:class:`DamagedFileWarning` naming it, and never used as if whole.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["DamagedFileWarning", "atomic_file", "write_atomic"]


class DamagedFileWarning(UserWarning):
    """A results file (a sweep's cell, a match's game line) that is not what its writer
    writes: left out, and its work done again. ``gojax`` prints it as one line."""


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside ``path`` (``"w"`` text or ``"wb"``); on exit, rename it.

    The parent folder is created. The file gets the mode an ordinary new file
    would (``mkstemp`` makes it private), or the mode of the file it replaces.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            permissions = target.stat().st_mode & 0o777
        else:
            umask = os.umask(0)
            os.umask(umask)
            permissions = 0o666 & ~umask
        os.chmod(tmp, permissions)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically."""
    with atomic_file(path, "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)
