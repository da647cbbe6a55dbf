"""KataGo's analysis replies: one analysed position as the JSON object a client reads.

``_reply`` writes ``moveInfos`` (each listed move's visits, win rate, score, prior,
principal variation, and on request its ownership), ``rootInfo`` (the position's
numbers and the network's raw ones), and on request the position's ``ownership``,
``ownershipStdev`` and ``policy``, each number turned from the mover's view to the
query's ``reportAnalysisWinratesAs``. Apart from the search (``eval._analysis_search``)
because it is host work on numbers the search already gave: the format only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from eval.analysis_query import Query
from eval.players import Analysis, raw_errors
from gojax import BLACK, action_to_gtp


def _round(values: Any, digits: int = 7) -> np.ndarray:
    """Values rounded to ``digits`` significant digits (float32 carries no more), NaN → 0."""
    x = np.nan_to_num(np.asarray(values, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    magnitude = np.floor(np.log10(np.maximum(np.abs(x), 1e-30)))
    scale = 10.0 ** (digits - 1 - magnitude)
    return np.round(x * scale) / scale


def _num(x: float) -> float:
    """One value with 7 significant digits (NaN and infinities → 0), cheaper than ``_round``."""
    x = float(x)
    return float(f"{x:.7g}") if math.isfinite(x) else 0.0


def _keeps_sign(report_as: str, mover: int) -> bool:
    """Whether numbers from the mover's view are already in the reported perspective."""
    return report_as == "SIDETOMOVE" or (report_as == "BLACK") == (mover == BLACK)


@dataclasses.dataclass(frozen=True)
class _Result:
    """One analysed position on the host."""

    analysis: Analysis  # the mover's view
    out: dict[str, np.ndarray]  # network outputs, row 0 the root, row 1 + i after move i
    mover: int
    searched: bool  # whether out has a row per listed move
    # [K, P] the mover's view: each listed move's subtree mean and its standard deviation
    # (``Analysis.moves_ownership``); None: one evaluation, the position's own from ``out``
    moves_ownership: np.ndarray | None = None
    moves_ownership_stdev: np.ndarray | None = None


def _wants_ownership(query: Query) -> bool:
    """Whether a search for ``query`` must keep its nodes' ownership for the root."""
    return query.include_ownership or query.include_ownership_stdev


def _wants_moves_ownership(query: Query) -> bool:
    """Whether it must also send them to the host, for each listed move's subtree."""
    return query.include_moves_ownership or query.include_moves_ownership_stdev


def _report_during_search(
    report: Callable[[int, dict], None],
    queries: list[Query],
    part: list[tuple[int, int, int]],
    row: int,
    result: _Result,
) -> None:
    """Hand ``report`` the reply of row ``row`` of a searched ``part`` ((query index,
    turn, position) triples) as it stands during the search."""
    i, turn, _ = part[row]
    report(i, _reply(queries[i], turn, result) | {"isDuringSearch": True})


def _reply(query: Query, turn: int, result: _Result) -> dict:
    """KataGo's analysis reply for one position."""
    size, mover, out = query.size, result.mover, result.out
    keep = _keeps_sign(query.report_as, mover)

    def rate(x):  # a probability from the mover's view
        return _num(x if keep else 1.0 - x)

    def points(x):  # a score (or a utility) from the mover's view
        return _num(x if keep else -x)

    infos = []
    for i, move in enumerate(result.analysis.moves):
        row = 1 + i if result.searched else 0
        lead = points(move.score_lead)
        infos.append(
            {
                "move": action_to_gtp(move.action, size),
                "visits": move.visits,
                "edgeVisits": move.visits,
                # Every visit weighs 1 here (KataGo's weights differ only with its
                # uncertainty-weighted playouts, which are off by default).
                "weight": float(move.visits),
                "edgeWeight": float(move.visits),
                "utility": points(move.utility),
                "winrate": rate(move.winrate),
                "scoreLead": lead,
                "scoreMean": lead,
                "scoreSelfplay": points(move.score_selfplay),
                "scoreStdev": _num(move.score_stdev),
                "prior": _num(move.prior),
                "lcb": rate(move.lcb),
                "utilityLcb": points(move.utility_lcb),
                **(
                    {}
                    if move.symmetry_of is None
                    else {"isSymmetryOf": action_to_gtp(move.symmetry_of, size)}
                ),
                "order": move.order,
                "pv": [action_to_gtp(a, size) for a in move.pv[: query.pv_length + 1]],
            }
        )
        if query.include_pv_visits:
            infos[-1]["pvVisits"] = list(move.pv_visits[: query.pv_length + 1])
            infos[-1]["pvEdgeVisits"] = infos[-1]["pvVisits"]  # no graph search: the same
        if query.include_no_result_value:
            infos[-1]["noResultValue"] = _num(move.no_result)
        if query.include_moves_ownership:
            means = result.moves_ownership  # the move's subtree, as KataGo's
            ownership = out["white_ownership"][row] * -mover if means is None else means[i]
            infos[-1]["ownership"] = _round(ownership if keep else -ownership).tolist()
        if query.include_moves_ownership_stdev:
            stdevs = result.moves_ownership_stdev
            # One evaluation (the network alone) has no spread.
            spread = np.zeros(size * size, np.float32) if stdevs is None else stdevs[i]
            infos[-1]["ownershipStdev"] = _round(spread).tolist()
    analysis = result.analysis
    raw_winrate = float(out["white_win"][0] + 0.5 * out["no_result"][0])
    raw_winrate = 1.0 - raw_winrate if mover == BLACK else raw_winrate
    # KataGo's short-term numbers, as kata-analyze's rootInfo (the engine loads KataGo
    # models only, which all have them).
    st_winloss_error, st_score_error, var_time_left = raw_errors(out)
    root = {
        "visits": analysis.visits,
        "weight": float(analysis.visits),
        "utility": points(analysis.utility),
        "winrate": rate(analysis.winrate),
        "scoreLead": points(analysis.score_lead),
        "scoreSelfplay": points(analysis.score_selfplay),
        "scoreStdev": _num(analysis.score_stdev),
        "currentPlayer": "B" if mover == BLACK else "W",
        "rawWinrate": rate(raw_winrate),
        "rawLead": points(float(out["white_lead"][0]) * -mover),
        "rawScoreSelfplay": points(float(out["white_score_selfplay"][0]) * -mover),
        "rawScoreSelfplayStdev": _num(out["score_stdev"][0]),
        "rawNoResultProb": _num(out["no_result"][0]),
        "rawStWrError": _num(st_winloss_error),
        "rawStScoreError": _num(st_score_error),
        "rawVarTimeLeft": _num(var_time_left),
    }
    reply = {
        "id": query.id,
        "isDuringSearch": False,
        "moveInfos": infos,
        "rootInfo": root,
        "turnNumber": turn,
    }
    if query.include_ownership:
        ownership = analysis.ownership if keep else -analysis.ownership
        reply["ownership"] = _round(ownership).tolist()
    if query.include_ownership_stdev:
        spread = analysis.ownership_stdev
        spread = np.zeros(size * size, np.float32) if spread is None else spread
        reply["ownershipStdev"] = _round(spread).tolist()
    if query.include_policy:
        policy = np.where(out["legal"][0], out["policy"][0], -1.0)
        reply["policy"] = _round(policy).tolist()
    return reply
