"""KataGo's JSON analysis protocol over batched search: ``gojax analysis``.

One query per line on stdin, one JSON reply per analysed position on stdout,
as KataGo's ``analysis`` command speaks it (see ``docs/analysis.md`` for the
subset supported and the differences). What makes it fast is batching: the
engine takes every query already waiting on stdin (up to ``batch_size``),
replays all their games on the device at once (a jitted ``lax.scan`` over
moves, vmapped over games, in segments of ``REPLAY_SEGMENT`` moves), and
analyses every requested position of the same board size, rule set and visit
budget in one batched search, or in one network evaluation at one visit.
Batches are padded to powers of two so that a handful of compiled programs
serve every batch.

Pipeline for one batch of lines::

    lines --parse_query--> Query --_replay_start/_segment (device)--> GoState [S]
          --_take, search / evaluate (device)--> numbers --_reply--> JSON lines

(``parse_query`` and the rest of the query checking live in ``eval.analysis_query``.)

Every number inside is from the view of the player to move (as in
``eval.players``); replies turn them to the perspective of
``reportAnalysisWinratesAs`` (``BLACK``, ``WHITE`` or ``SIDETOMOVE``).

The pieces live in private modules, this one is the entry point that names them:
``eval._analysis_engine`` (:class:`AnalysisEngine`: settings, the protocol's lines and
actions, terminates, the stream), ``eval._analysis_batches`` (the analysis of a batch:
grouping, priorities, replay and search in turn), ``eval._analysis_replay`` (the games
replayed on the device), ``eval._analysis_search`` (the jitted search and evaluation, a
search run in parts), ``eval._analysis_reply`` (the JSON replies),
``eval._analysis_stream`` (stdin read in batches, lines arriving meanwhile) and
``eval._analysis_cli`` (the ``gojax analysis`` command line).
"""

from eval._analysis_cli import cmd_analysis, register
from eval._analysis_engine import AnalysisEngine
from eval._analysis_replay import REPLAY_SEGMENT, SHORT_SEGMENT
from eval._analysis_stream import _LineReader as _LineReader

__all__ = [
    "REPLAY_SEGMENT",
    "SHORT_SEGMENT",
    "AnalysisEngine",
    "cmd_analysis",
    "register",
]
