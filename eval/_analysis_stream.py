"""The analysis engine's stream: reading stdin in batches, and what arrives meanwhile.

:class:`_LineReader` reads the lines waiting on stdin (one batch), without blocking on
the next; ``_terminate_request`` and ``_line_priority`` look at lines that arrive while
a batch is analysed (a terminate acts at once; a more urgent query pauses the batch);
:class:`_Stream` is how the batch's work talks to the stream (reports during a search,
results as made, terminates, pauses). Apart from the engine (``eval._analysis_engine``)
because it is the I/O side: file descriptors and lines, no analysis.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import select
from collections.abc import Callable
from typing import TextIO

# Seconds between looks for a terminate while a stream's search runs: every search of a
# stream runs in parts of about this long, so that a terminate stops it within one part.
_TERMINATE_POLL = 0.5


@dataclasses.dataclass
class _Stream:
    """How :meth:`AnalysisEngine.analyse` talks to a stream while a batch is analysed.

    Attributes:
      halted: per query, turns a terminate stopped meanwhile (``check`` adds to
        them): not searched yet, they are skipped; being searched, they stop growing.
      deferred: per query, turns left for a later batch after ``pause`` (filled in).
      report: ``(query index, reply)`` of a report during a search, or None: none.
      final: ``(query index, reply)`` of every final reply, as soon as it is made.
      check: reads what arrived (terminates) between parts of the work.
      pause: ``(priority of the next positions) -> bool``: True leaves them and
        everything after them to ``deferred`` (a more urgent query arrived).
      poll: seconds between calls of ``check`` during a search (it then runs in
        parts); inf: a search runs at once.
    """

    halted: list[set[int]]
    deferred: list[set[int]]
    report: Callable[[int, dict], None] | None = None
    final: Callable[[int, dict], None] = lambda i, reply: None
    check: Callable[[], None] = lambda: None
    pause: Callable[[int], bool] = lambda priority: False
    poll: float = math.inf

    @classmethod
    def quiet(cls, queries: int) -> _Stream:
        """No stream: nothing reported early, nothing arrives."""
        return cls([set() for _ in range(queries)], [set() for _ in range(queries)])


def _terminate_request(line: str) -> dict | None:
    """``line`` as a request if it is a ``terminate`` or ``terminate_all`` action."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if (
        isinstance(request, dict)
        and isinstance(request.get("id"), str)
        and request.get("action") in ("terminate", "terminate_all")
    ):
        return request
    return None


def _line_priority(line: str) -> int:
    """The highest priority a query line asks for (``priority``, ``priorities``;
    KataGo's default 0, also for a line that is not a valid query: its error is quick)."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return 0
    if not isinstance(request, dict) or "action" in request:
        return 0
    values = request.get("priorities")
    values = values if isinstance(values, list) and values else [request.get("priority", 0)]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(numbers, default=0)


class _LineReader:
    """Reads lines from a stream in batches: one line (waiting for it), then every
    further complete line that is already available, without blocking."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            self._fd = None  # an in-memory stream: everything in it is available
        self._buffer = b""
        self._eof = False
        self._unread: list[str] = []  # lines handed back, read before any other

    def _fill(self) -> None:
        data = os.read(self._fd, 1 << 16)
        if data:
            self._buffer += data
        else:
            self._eof = True

    def _ready(self) -> bool:
        return bool(select.select([self._fd], [], [], 0)[0])

    def _take(self, limit: int) -> list[str]:
        lines = []
        while len(lines) < limit and b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            lines.append(line.decode("utf-8", errors="replace"))
        return lines

    @property
    def live(self) -> bool:
        """Whether lines may still arrive while a batch is analysed (a pipe or a terminal
        not at its end; an in-memory stream has all its lines already)."""
        return self._fd is not None and not self._eof

    def take_ready(self) -> list[str]:
        """Every complete line available now, without waiting ([] for an in-memory
        stream: everything in it is the next batches')."""
        if self._fd is None:
            return []
        while not self._eof and self._ready():
            self._fill()
        return self._take(len(self._buffer) + 1)

    def give_back(self, lines: list[str]) -> None:
        """Lines taken early (``take_ready``) for the next batches, in their order."""
        self._unread = list(lines) + self._unread

    def batch(self, limit: int, wait: bool = True) -> list[str] | None:
        """Up to ``limit`` lines, or None when the stream has ended; without ``wait``
        only those already available (maybe none)."""
        lines, self._unread = self._unread[:limit], self._unread[limit:]
        if self._fd is None:
            while len(lines) < limit:
                line = self._stream.readline()
                if not line:
                    break
                lines.append(line)
            return lines or None
        lines += self._take(limit - len(lines))
        while wait and not lines and not self._eof:
            self._fill()
            lines = self._take(limit)
        while len(lines) < limit and not self._eof and self._ready():
            self._fill()
            lines += self._take(limit - len(lines))
        if not lines and self._eof:
            rest, self._buffer = self._buffer, b""
            return [rest.decode("utf-8", errors="replace")] if rest.strip() else None
        return lines
