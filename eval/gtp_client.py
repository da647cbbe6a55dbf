"""A GTP (Go Text Protocol, version 2) client for an engine run as a subprocess.

>>> engine = GTPEngine("gnugo --mode gtp --level 0", label="gnugo")  # doctest: +SKIP
>>> engine.send("boardsize 9"); engine.send("genmove b")  # doctest: +SKIP
'E5'
>>> engine.close()  # doctest: +SKIP

Every read has a deadline: an engine that does not answer in time is killed
(with everything it started) and :class:`EngineTimeout` is raised, so a hung
engine never hangs the caller. The engine's stderr goes straight into a log
file (or nowhere), so a chatty engine can never block on a full pipe. Every
error names the engine and the command it was answering.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "EngineDied",
    "EngineError",
    "EngineProtocolError",
    "EngineTimeout",
    "GTPCommandError",
    "GTPEngine",
    "split_command",
]

# A reply line longer than this is garbage, not Go (a board of 25x25 with
# coordinates is under 100 characters a line; analysis lines are a few KB).
MAX_LINE = 1 << 20
MAX_REPLY_LINES = 10_000


class EngineError(RuntimeError):
    """An engine that failed: it died, hung, answered garbage or refused a command."""

    def __init__(self, engine: str, command: str | None, problem: str) -> None:
        self.engine = engine
        self.command = command
        self.problem = problem
        where = f" answering {command!r}" if command is not None else ""
        super().__init__(f"engine {engine}{where}: {problem}")


class EngineTimeout(EngineError):
    """The engine did not answer within the deadline; it has been killed."""


class EngineDied(EngineError):
    """The engine exited or closed its output."""


class EngineProtocolError(EngineError):
    """The engine answered something that is not a GTP reply."""


class GTPCommandError(EngineError):
    """The engine answered ``? message``: it refused the command."""

    def __init__(self, engine: str, command: str, message: str) -> None:
        self.message = message
        super().__init__(engine, command, f"refused: {message or '(no message)'}")


def split_command(command: str | Sequence[str]) -> list[str]:
    """A command line as an argument list (a string is split the way a POSIX shell does)."""
    args = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not args:
        raise ValueError("empty engine command")
    return args


class GTPEngine:
    """One engine process spoken to over GTP.

    Args:
      command: the command line, a string (split like a shell) or a list.
      label: how errors and logs name the engine (default: the program name).
      log: a file that receives the engine's stderr (appended); ``None``
        discards it.
      timeout: default seconds to wait for a reply to a command.
      start_timeout: seconds to wait for the first reply (engines that load a
        network or compile take a while to start).
      cwd, env: passed to the subprocess.

    Raises OSError (naming the engine) when the program cannot be started.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        label: str | None = None,
        log: str | os.PathLike | None = None,
        timeout: float = 60.0,
        start_timeout: float = 300.0,
        cwd: str | os.PathLike | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = split_command(command)
        self.label = label or Path(self.args[0]).name
        self.timeout = timeout
        self.log_path = Path(log) if log is not None else None
        self._first_reply_timeout: float | None = start_timeout
        self._last_timeout = timeout
        self._known: set[str] | None = None
        self._log_file = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")  # closed by close()
        try:
            self._proc = subprocess.Popen(
                self.args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log_file if self._log_file is not None else subprocess.DEVNULL,
                cwd=cwd,
                env=env,
                # Its own process group, so that killing a hung engine also ends
                # whatever it started (a wrapper script's child, say).
                start_new_session=True,
            )
        except OSError as err:
            self._close_log()
            reason = err.strerror or str(err)
            command = shlex.join(self.args)
            raise OSError(f"engine {self.label}: cannot start {command}: {reason}") from None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(
            target=self._read_stdout, name=f"gtp-{self.label}", daemon=True
        )
        self._reader.start()

    # ------------------------------------------------------------------ plumbing

    def _read_stdout(self) -> None:
        stream = self._proc.stdout
        try:
            while True:
                line = stream.readline(MAX_LINE)
                if not line:
                    break
                self._lines.put(line)
        except (OSError, ValueError):
            pass  # the pipe was closed under us by close()
        finally:
            self._lines.put(None)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _kill(self) -> None:
        """End the engine and everything in its process group, now."""
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        else:
            # The leader is gone; end stragglers of its group that still hold the pipes.
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _died(self, command: str | None) -> EngineDied:
        try:
            code = self._proc.wait(timeout=2)
            status = f"exited with code {code}"
        except subprocess.TimeoutExpired:
            self._kill()
            status = "closed its output (killed)"
        hint = ""
        tail = self._log_tail()
        if tail:
            hint = f"; its last words: {tail!r}"
        if self.log_path is not None:
            hint += f" (log: {self.log_path})"
        return EngineDied(self.label, command, f"{status}{hint}")

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        if self._log_file is not None:
            self._log_file.flush()
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 400))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip()[-200:] if lines else ""

    def _next_line(self, command: str, deadline: float) -> str:
        remaining = deadline - time.monotonic()
        try:
            line = self._lines.get(timeout=max(0.0, remaining))
        except queue.Empty:
            self._kill()
            seconds = self._last_timeout
            raise EngineTimeout(
                self.label, command, f"no answer within {seconds:g} s (engine killed)"
            ) from None
        if line is None:
            self._lines.put(None)  # keep the end-of-output mark for later reads
            raise self._died(command)
        if len(line) >= MAX_LINE and not line.endswith(b"\n"):
            self._kill()
            raise EngineProtocolError(self.label, command, f"a reply line over {MAX_LINE} bytes")
        # GTP: CR is dropped, tabs read as spaces.
        return line.decode("utf-8", "replace").replace("\r", "").replace("\t", " ").rstrip("\n")

    # ------------------------------------------------------------------ public API

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self._proc.poll() is None

    @property
    def pid(self) -> int:
        return self._proc.pid

    def request(self, command: str, *, timeout: float | None = None) -> tuple[bool, str]:
        """Send ``command``; ``(True, text)`` for ``= text``, ``(False, text)`` for ``? text``.

        ``text`` is the reply without its status mark, lines joined by ``\\n``.
        Raises EngineTimeout (the engine is then killed), EngineDied, or
        EngineProtocolError when the answer is not a GTP reply.
        """
        command = command.strip()
        if not command or "\n" in command or "\r" in command:
            raise ValueError(f"a GTP command is one non-empty line, got {command!r}")
        if timeout is None:
            timeout = self.timeout
        if self._first_reply_timeout is not None:
            timeout = max(timeout, self._first_reply_timeout)
            self._first_reply_timeout = None
        self._last_timeout = timeout
        if self._proc.poll() is not None:
            raise self._died(command)
        try:
            self._proc.stdin.write(command.encode("utf-8") + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._died(command) from None
        deadline = time.monotonic() + timeout
        line = self._next_line(command, deadline)
        while not line.strip():  # tolerate blank lines before a reply
            line = self._next_line(command, deadline)
        status = line[0]
        if status not in "=?":
            self._kill()
            raise EngineProtocolError(
                self.label, command, f"expected a reply starting '=' or '?', got {line[:80]!r}"
            )
        first = line[1:].lstrip("0123456789")  # an optional command id
        lines = [first.strip()]
        while True:
            line = self._next_line(command, deadline)
            if not line.strip():
                break
            lines.append(line.rstrip())
            if len(lines) > MAX_REPLY_LINES:
                self._kill()
                raise EngineProtocolError(
                    self.label, command, f"a reply of more than {MAX_REPLY_LINES} lines"
                )
        text = "\n".join(lines).strip("\n")
        return status == "=", text

    def send(self, command: str, *, timeout: float | None = None) -> str:
        """Send ``command`` and return the reply text; raises GTPCommandError on ``?``."""
        ok, text = self.request(command, timeout=timeout)
        if not ok:
            raise GTPCommandError(self.label, command, text)
        return text

    def known_commands(self) -> set[str]:
        """The commands ``list_commands`` names (empty if the engine lacks it); asked once."""
        if self._known is None:
            ok, text = self.request("list_commands")
            self._known = (
                {line.strip() for line in text.splitlines() if line.strip()} if ok else set()
            )
        return self._known

    def knows(self, command: str) -> bool:
        return command in self.known_commands()

    def close(self, timeout: float = 5.0) -> int | None:
        """Ask the engine to ``quit``, then terminate it, then kill it; returns its exit code."""
        if self._proc.poll() is None:
            try:
                self.request("quit", timeout=timeout)
            except (EngineError, ValueError):
                pass
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self._proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                self._proc.terminate()
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill()
        # Closing the pipe while the reader thread sits in readline() would wait
        # for it; once the process group is gone the reader sees end-of-file.
        self._reader.join(timeout=2)
        if not self._reader.is_alive():
            self._proc.stdout.close()
        self._close_log()
        return self._proc.returncode

    def __enter__(self) -> GTPEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.alive else f"exited {self._proc.returncode}"
        return f"GTPEngine({self.label!r}, {shlex.join(self.args)!r}, {state})"
