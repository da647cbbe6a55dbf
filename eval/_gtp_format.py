"""The text of GTP replies that carry numbers: analysis lines and raw network outputs.

:func:`format_analysis` writes one ``info ...`` line in Leela Zero's (``lz-analyze``) or
KataGo's (``kata-analyze``, ``analyze``) format, numbers printed as KataGo's C++ streams
print them (:func:`_fmt`, :func:`_fmt_point`); :func:`format_raw_nn` writes
``kata-raw-nn``'s reply. Pure functions of an analysis or a network's outputs, apart
from the server (``eval._gtp_server``) and the commands that stream them
(``eval._gtp_analysis``), so that the formats can be read and tested alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from eval._gtp_args import AnalyzeOptions
from eval.players import Analysis
from gojax import action_to_gtp


def _fmt(x: float) -> str:
    """A number as KataGo's C++ streams print it: 6 significant digits, no trailing zeros."""
    return f"{x:.6g}" if math.isfinite(x) else "0"


def _fmt_point(x: float) -> str:
    """The same with C++'s ``showpoint`` (KataGo's ``analyze`` for Sabaki): trailing zeros
    kept, so that every number has a decimal point (0.5 is ``0.500000``, 12 ``12.0000``)."""
    return f"{x:#.6g}" if math.isfinite(x) else "0.00000"


def format_analysis(analysis: Analysis, size: int, *, kata: bool, opts: AnalyzeOptions) -> str:
    """One analysis report line in Leela Zero's (``lz``) or KataGo's (``kata``) format.

    ``lz``: win rate, prior and lcb as integers in 0..10000. ``kata``: floats,
    scores in points, KataGo's fields in its order; what the options ask for
    (``pvVisits``, ``pvEdgeVisits``, ``noResultValue``, ``movesOwnership``,
    ``movesOwnershipStdev``, ``rootInfo``, ``ownership``, ``ownershipStdev``).
    Boards are ``[P]`` values, row-major from the top left. All from the mover's
    view. Every visit weighs the same in gojax's searches: a move's ``weight`` is
    its visits, and without graph search its ``edgeVisits`` and ``pvEdgeVisits``
    are its visits and ``pvVisits``. With ``opts.showpoint`` (Sabaki's ``analyze``) the
    numbers keep their trailing zeros, as KataGo prints them there.
    """
    fmt = _fmt_point if opts.showpoint else _fmt
    listed = analysis.moves[: max(opts.max_moves, 1)]
    per_move = opts.moves_ownership or opts.moves_ownership_stdev
    if kata and per_move and analysis.moves_ownership is not None:
        moves_means, moves_stdevs = analysis.moves_ownership()
    else:  # one evaluation: no subtree below any move, so nothing to print
        per_move = False
    parts = []
    for k, info in enumerate(listed):
        vertex = action_to_gtp(info.action, size)
        pv = " ".join(action_to_gtp(a, size) for a in info.pv)
        if not kata:
            parts.append(
                f"info move {vertex} visits {info.visits} "
                f"winrate {_per10000(info.winrate)} prior {_per10000(info.prior)} "
                f"lcb {_per10000(info.lcb)} order {info.order} pv {pv}"
            )
            continue
        fields = [
            f"info move {vertex} visits {info.visits} edgeVisits {info.visits}",
            f"utility {fmt(info.utility)} winrate {fmt(info.winrate)}",
            f"scoreMean {fmt(info.score_lead)} scoreStdev {fmt(info.score_stdev)}",
            f"scoreLead {fmt(info.score_lead)} scoreSelfplay {fmt(info.score_selfplay)}",
        ]
        if opts.no_result_value:
            fields.append(f"noResultValue {fmt(info.no_result)}")
        fields += [
            f"prior {fmt(info.prior)} lcb {fmt(info.lcb)} utilityLcb {fmt(info.utility_lcb)}",
            f"weight {fmt(float(info.visits))}",
        ]
        if info.symmetry_of is not None:
            fields.append(f"isSymmetryOf {action_to_gtp(info.symmetry_of, size)}")
        fields.append(f"order {info.order} pv {pv}")
        visits_along = " ".join(map(str, info.pv_visits))
        if opts.pv_visits:
            fields.append(f"pvVisits {visits_along}")
        if opts.pv_edge_visits:
            fields.append(f"pvEdgeVisits {visits_along}")
        if per_move and opts.moves_ownership:
            fields.append("movesOwnership " + _board_values(moves_means[k], fmt))
        if per_move and opts.moves_ownership_stdev:
            fields.append("movesOwnershipStdev " + _board_values(moves_stdevs[k], fmt))
        parts.append(" ".join(fields))
    if kata and opts.root_info:
        lead = fmt(analysis.score_lead)
        parts.append(
            f"rootInfo visits {analysis.visits} utility {fmt(analysis.utility)} "
            f"winrate {fmt(analysis.winrate)} scoreMean {lead} "
            f"scoreStdev {fmt(analysis.score_stdev)} scoreLead {lead} "
            f"scoreSelfplay {fmt(analysis.score_selfplay)} weight {fmt(float(analysis.visits))}"
        )
        if analysis.raw_errors is not None:  # the root evaluation's, as KataGo adds them
            wl_error, score_error, time_left = analysis.raw_errors
            parts.append(
                f"rawStWrError {fmt(wl_error)} rawStScoreError {fmt(score_error)} "
                f"rawVarTimeLeft {fmt(time_left)}"
            )
    if kata and opts.ownership:
        parts.append("ownership " + _board_values(analysis.ownership, fmt))
    if kata and opts.ownership_stdev:
        spread = analysis.ownership_stdev
        spread = np.zeros_like(analysis.ownership) if spread is None else spread
        parts.append("ownershipStdev " + _board_values(spread, fmt))
    return " ".join(parts)


def _board_values(values: np.ndarray, fmt: Callable[[float], str] = _fmt) -> str:
    return " ".join(fmt(float(x)) for x in values)


# ``kata-raw-nn``'s single numbers: (KataGo's key, ``gojax.evaluate``'s output, format).
_RAW_NN_VALUES = (
    ("whiteWin", "white_win", "{:.6f}"),
    ("whiteLoss", "white_loss", "{:.6f}"),
    ("noResult", "no_result", "{:.6f}"),
)
_RAW_NN_SCORES = (
    ("whiteLead", "white_lead", "{:.3f}"),
    ("whiteScoreSelfplay", "white_score_selfplay", "{:.3f}"),
    ("whiteScoreSelfplaySq", "white_score_selfplay_sq", "{:.3f}"),
    ("varTimeLeft", "var_time_left", "{:.3f}"),
    ("shorttermWinlossError", "shortterm_winloss_error", "{:.3f}"),
    ("shorttermScoreError", "shortterm_score_error", "{:.3f}"),
)


def _board_rows(cells: list[str], size: int) -> str:
    """GoGui's board reply: ``size`` rows of ``size`` cells, the top line first (after an
    empty first line, which GoGui skips, as ``showboard``'s)."""
    return "\n" + "\n".join(" ".join(cells[r * size : (r + 1) * size]) for r in range(size))


def format_raw_nn(
    symmetry: int, out: dict[str, np.ndarray], size: int, *, scores: bool, ownership: bool
) -> str:
    """One evaluation in ``kata-raw-nn``'s format: ``symmetry N``, then ``key value``
    lines, ``policy`` and ``whiteOwnership`` as ``size`` rows from the top line (policy
    ``NAN`` on illegal points), numbers printed as KataGo prints them.

    ``out``: one position's ``gojax.evaluate`` outputs. A net without a score head
    (``scores``) has no score lines, one that never learned ownership no ownership.
    """
    lines = [f"symmetry {symmetry}"]
    for key, name, fmt in _RAW_NN_VALUES + (_RAW_NN_SCORES if scores else ()):
        if name in out:
            lines.append(f"{key} {fmt.format(float(out[name]))}")
    policy, legal = out["policy"], out["legal"]
    cells = [f"{p:8.6f}" if ok else "     NAN" for p, ok in zip(policy, legal, strict=True)]
    lines.append("policy")
    lines += [" ".join(cells[r * size : (r + 1) * size]) for r in range(size)]
    lines.append(f"policyPass {cells[-1]}")
    if ownership:
        own = [f"{x:9.7f}" for x in out["white_ownership"]]
        lines.append("whiteOwnership")
        lines += [" ".join(own[r * size : (r + 1) * size]) for r in range(size)]
    return "\n".join(lines)


def _per10000(x: float) -> int:
    return int(round(min(max(x if math.isfinite(x) else 0.0, 0.0), 1.0) * 10000))
