"""KataGo's own engine as a peer in the one-game benchmark, driven over GTP.

The engine gets the same net, the same position (the moves played from an empty
board), the same rules and komi and the same visits as our search, with
``threads`` search threads (KataGo's virtual-loss parallelism) and as many
backend threads. Each timed search starts from nothing: ``clear_cache`` drops
KataGo's tree and its network cache, as our timed search has neither, then
``kata-search`` searches without playing the move.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import gojax

# Settings that make KataGo's search what ours is: a fixed visit count, no
# pondering, no time-saving rules after a pass, no root noise, no resigning;
# random symmetry per evaluation as ours (nnRandomize, KataGo's default).
CONFIG = """\
logFile = {log}
logToStderr = false
logSearchInfo = false
logAllGTPCommunication = false
ponderingEnabled = false
maxVisits = {visits}
maxPlayouts = 1000000000
maxTime = 1000000
numSearchThreads = {threads}
numEigenThreadsPerModel = {threads}
numNNServerThreadsPerModel = 1
nnMaxBatchSize = {threads}
nnRandomize = true
searchFactorAfterOnePass = 1.0
searchFactorAfterTwoPass = 1.0
allowResignation = false
resignThreshold = -0.99
resignConsecTurns = 3
rules = tromp-taylor
"""


class KataGoError(RuntimeError):
    """The KataGo process refused a command or died; the message says which."""


class KataGoGTP:
    """A running ``katago gtp`` process with the bench's config (a context manager)."""

    def __init__(self, binary: str, model: Path, *, visits: int, threads: int):
        self._dir = tempfile.TemporaryDirectory(prefix="katago-bench-")
        config = Path(self._dir.name) / "bench.cfg"
        log = Path(self._dir.name) / "katago.log"
        config.write_text(CONFIG.format(log=log, visits=visits, threads=threads))
        self.visits, self.threads = visits, threads
        self._proc = subprocess.Popen(
            [binary, "gtp", "-model", str(model), "-config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.version = self.command("version")

    def command(self, line: str) -> str:
        """Send one GTP command; its reply without the ``= ``; KataGoError on ``?``."""
        if self._proc.poll() is not None:
            raise KataGoError(f"katago exited ({self._proc.returncode}) before {line!r}")
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()
        reply = []
        while True:
            text = self._proc.stdout.readline()
            if not text:
                raise KataGoError(f"katago closed its output after {line!r}")
            if text.strip() == "" and reply:
                break
            if text.strip():
                reply.append(text.strip())
        answer = "\n".join(reply)
        if answer.startswith("?"):
            raise KataGoError(f"katago refused {line!r}: {answer}")
        return answer[1:].strip()

    def set_position(self, size: int, komi: float, moves: list[tuple[str, int]]) -> str:
        """An empty ``size`` board, ``komi``, then ``moves`` ((colour, action) pairs);
        returns the colour to move (``"B"``/``"W"``)."""
        self.command(f"boardsize {size}")
        self.command("clear_board")
        self.command(f"komi {komi:g}")
        self.command("kata-set-rules tromp-taylor")
        to_play = "B"
        for colour, action in moves:
            self.command(f"play {colour} {gojax.action_to_gtp(action, size)}")
            to_play = "W" if colour == "B" else "B"
        return to_play

    def search(self, colour: str) -> str:
        """One search of ``self.visits`` visits from an empty tree and cache; the move."""
        self.command("clear_cache")
        return self.command(f"kata-search {colour}")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.write("quit\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
        self._dir.cleanup()

    def __enter__(self) -> KataGoGTP:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
