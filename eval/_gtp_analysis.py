"""The analysis commands of ``gojax gtp`` (:mod:`eval.gtp`), mixed into its server.

``lz-analyze``, ``kata-analyze`` and ``analyze`` answer ``=`` at once and then stream
one ``info ...`` line every interval from :class:`_Analysis`, a background thread the
next input line stops; the ``genmove_analyze`` forms and ``kata-search_analyze``
(cancellable or not) print the lines of one move's search and then its move;
``kata-raw-nn`` and GoGui's analyze commands (``gojax-ownership``, ``gojax-policy``,
``gojax-pv_gfx``) show one evaluation or search. :class:`AnalysisCommands` holds their
handlers, which ``eval._gtp_server.GTPServer`` inherits and names in its command table:
apart from the protocol loop and the game commands because they are a family of their
own (KataGo's and Leela Zero's analysis protocol, GoGui's displays) with their own
threads and output formats.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from eval._gtp_args import AnalyzeOptions, GTPError, _args
from eval._gtp_format import _board_rows, format_analysis, format_raw_nn
from eval.engine import RESIGN
from eval.players import Analysis, knows_ownership
from gojax import BLACK, WHITE, action_to_gtp

if TYPE_CHECKING:
    from eval._gtp_server import GTPServer

POLICY_LABEL_MIN = 0.005  # gojax-policy labels every move at least this probable (0.5%)

# GoGui's analyze commands (``type/label/command``): heat maps and the search's line.
GOGUI_ANALYZE_COMMANDS = (
    "dboard/Ownership/gojax-ownership",
    "sboard/Policy/gojax-policy",
    "gfx/Principal variation/gojax-pv_gfx",
    "plist/Dead stones/final_status_list dead",
    "hstring/Raw network/kata-raw-nn 0",
)


class _Analysis(threading.Thread):
    """Streams analysis lines until stopped; the reply's ``=`` is already written."""

    def __init__(self, server: GTPServer, opts: AnalyzeOptions, kata: bool) -> None:
        super().__init__(daemon=True, name="gtp-analysis")
        self.server = server
        self.opts = opts
        self.kata = kata
        self.stop_event = threading.Event()
        self.size = server.engine.size
        self.analyses = server.engine.ponder(opts.colour, avoid=opts.avoid)

    def run(self) -> None:
        previous = None
        next_report = time.monotonic()
        # KataGo's maxTimePondering: the search stops growing then; its analysis stays.
        grow_until = next_report + self.server.engine.max_ponder_time
        try:
            while not self.stop_event.is_set():
                if previous is None or time.monotonic() < grow_until:
                    analysis = next(self.analyses)
                if self.stop_event.is_set():
                    break
                now = time.monotonic()
                if self.opts.interval > 0 and now >= next_report:
                    line = format_analysis(analysis, self.size, kata=self.kata, opts=self.opts)
                    self.server.write(line + "\n")
                    next_report = now + max(self.opts.interval, 0.01)
                if analysis is previous or self.opts.interval <= 0:
                    # Nothing new to search for: sleep until the next report (or a stop).
                    self.stop_event.wait(max(next_report - now, 0.01))
                previous = analysis
        except Exception as err:  # a failed analysis ends the stream, never the server
            print(f"gojax gtp: analysis stopped: {err!r}", file=sys.stderr)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


class AnalysisCommands:
    """The analysis commands' handlers, for :class:`eval._gtp_server.GTPServer` to inherit
    (they use its ``engine``, ``write``, ``_analysis`` and ``_start_search``)."""

    def cmd_kata_raw_nn(self, args, _id):
        from gojax.evaluate import has_score_head

        which = _args(args, 1)[0].lower()
        if which == "all":
            symmetries = list(range(8))
        elif which in {str(s) for s in range(8)}:
            symmetries = [int(which)]
        else:
            raise GTPError("syntax error")  # KataGo's: 'all' or a symmetry 0..7
        outputs = self.engine.raw_nn(symmetries)
        model = self.engine.player.model
        return "\n".join(
            format_raw_nn(
                s,
                out,
                self.engine.size,
                scores=has_score_head(model.output_spec),
                ownership=knows_ownership(model),
            )
            for s, out in zip(symmetries, outputs, strict=True)
        )

    def _evaluation(self) -> tuple[Analysis, int]:
        """The player's evaluation of the position to play, and who is to play."""
        return self.engine.evaluate(), self.engine.to_play

    def cmd_gojax_ownership(self, args, _id):
        _args(args, 0)
        if not self.engine.player.has_ownership:
            raise GTPError("this player has no ownership")
        analysis, colour = self._evaluation()
        black = analysis.ownership * colour  # GoGui: black positive
        return _board_rows([f"{x:.3f}" for x in black], self.engine.size)

    def cmd_gojax_policy(self, args, _id):
        _args(args, 0)
        analysis, _ = self._evaluation()
        size = self.engine.size
        # Every move's probability: ``analysis.moves`` lists only the likeliest few.
        policy = analysis.policy
        if policy is None:
            policy = np.zeros(size * size + 1)
            for info in analysis.moves:
                policy[info.action] = info.prior
        cells = ['""'] * (size * size)  # GoGui's empty label
        for point in np.flatnonzero(policy[: size * size] >= POLICY_LABEL_MIN):
            # Halves round up, so that no labelled move reads 0 (round() takes 0.5 to 0).
            cells[point] = str(math.floor(100 * float(policy[point]) + 0.5))
        return _board_rows(cells, size)

    def cmd_gojax_pv_gfx(self, args, _id):
        _args(args, 0)
        colour = self.engine.to_play
        analysis = self.engine.analyze()
        size = self.engine.size
        names = {BLACK: "b", WHITE: "w"}
        line = [
            f"{names[colour * (-1) ** i]} {action_to_gtp(a, size).upper()}"
            for i, a in enumerate(analysis.best.pv)
        ]
        labels = [
            f"{action_to_gtp(info.action, size)} {round(100 * info.winrate)}"
            for info in analysis.moves[:10]
            if info.visits > 0 and info.action < size * size
        ]
        mover = "Black" if colour == BLACK else "White"
        text = (
            f"{mover} to play: win rate {100 * analysis.winrate:.1f}%, "
            f"lead {analysis.score_lead:+.1f}, {analysis.visits} visits, "
            f"best {action_to_gtp(analysis.best.action, size)}"
        )
        return "\n".join(
            ["VAR " + " ".join(line)]
            + (["LABEL " + " ".join(labels)] if labels else [])
            + ["TEXT " + text]
        )

    def _start_analysis(self, args, ident, *, kata: bool, sabaki: bool = False):
        opts = AnalyzeOptions.parse(args, self.engine.size, sabaki=sabaki)
        analysis = _Analysis(self, opts, kata)  # may fail (bad position): before the "="
        self.write(f"={ident}\n")
        self._analysis = analysis
        analysis.start()
        return None

    def cmd_lz_analyze(self, args, ident):
        return self._start_analysis(args, ident, kata=False)

    def cmd_kata_analyze(self, args, ident):
        return self._start_analysis(args, ident, kata=True)

    def cmd_analyze(self, args, ident):
        """KataGo's ``analyze`` (Sabaki's): ``kata-analyze``'s lines, numbers with a decimal
        point, without the options only ``kata-analyze`` has."""
        return self._start_analysis(args, ident, kata=True, sabaki=True)

    def _genmove_analyze(
        self, opts: AnalyzeOptions, ident, *, kata: bool, play: bool = True, stop=None
    ):
        colour = self.engine.to_play if opts.colour is None else opts.colour
        size = self.engine.size
        lines: list[str] = []
        last = [-math.inf]

        def progress(analysis: Analysis) -> None:
            now = time.monotonic()
            if opts.interval > 0 and now - last[0] >= opts.interval:
                last[0] = now
                lines.append(format_analysis(analysis, size, kata=kata, opts=opts))

        # A failure here is reported as an ordinary error: nothing was written yet.
        action, analysis = self.engine.genmove(
            colour, progress=progress, avoid=opts.avoid, play=play, stop=stop
        )
        final = format_analysis(analysis, size, kata=kata, opts=opts)
        if not lines or lines[-1] != final:
            lines.append(final)
        move = "resign" if action == RESIGN else action_to_gtp(action, size)
        self.write(f"={ident}\n" + "".join(line + "\n" for line in lines) + f"play {move}\n\n")
        return None

    def cmd_lz_genmove_analyze(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)
        return self._genmove_analyze(opts, ident, kata=False)

    def cmd_kata_genmove_analyze(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)
        return self._genmove_analyze(opts, ident, kata=True)

    def cmd_genmove_analyze(self, args, ident):
        """``kata-genmove_analyze`` in ``analyze``'s form (see :meth:`cmd_analyze`)."""
        opts = AnalyzeOptions.parse(args, self.engine.size, sabaki=True)
        return self._genmove_analyze(opts, ident, kata=True)

    def cmd_kata_search_analyze(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)
        return self._genmove_analyze(opts, ident, kata=True, play=False)

    def cmd_kata_search_analyze_cancellable(self, args, ident):
        opts = AnalyzeOptions.parse(args, self.engine.size)  # a bad argument: answered now
        self._start_search(
            ident, lambda stop: self._genmove_analyze(opts, ident, kata=True, play=False, stop=stop)
        )
        return None
