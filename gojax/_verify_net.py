"""Checking a network's outputs against KataGo's own evaluation of the same positions.

Input: a file in the format of ``reference/katago/positions.jsonl``, one
position a line: ``size``, ``komi``, ``rules``, ``moves`` (``[colour, GTP
vertex]`` pairs from the empty board) and ``katago`` (KataGo's ``kata-raw-nn``
numbers at one symmetry: ``policy`` with ``null`` on illegal points,
``policyPass``, ``whiteWin``, ``whiteLoss``, ``noResult``, ``whiteLead``,
``whiteScoreSelfplay``, ``whiteScoreSelfplaySq``, ``whiteOwnership``, and
where given ``varTimeLeft``, ``shorttermWinlossError``, ``shorttermScoreError``:
-1 for model version 8).

Positions of one board size and rule preset are evaluated together in one
batch. For every output the largest absolute difference over all positions is
kept with the position and the point where it occurs; the legal set (the
``null`` pattern of the policy) must be identical.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gojax._coords import action_to_gtp
from gojax._game import state_from_moves
from gojax._verify import read_games
from gojax.evaluate import make_evaluator
from gojax.katago_model import KataGoModel

# Largest absolute differences accepted, per output. KataGo prints the value
# outputs with 6 decimals and the scores with 3, so float32 agreement shows
# as ~1e-6 and ~5e-4 here; the tolerances leave room for summation order only.
TOLERANCES = {
    "policy": 1e-3,
    "whiteWin": 1e-3,
    "whiteLoss": 1e-3,
    "noResult": 1e-3,
    "whiteLead": 0.02,
    "whiteScoreSelfplay": 0.02,
    "whiteScoreSelfplaySq": 0.5,
    "varTimeLeft": 0.02,
    "shorttermWinlossError": 0.02,
    "shorttermScoreError": 0.02,
    "whiteOwnership": 2e-3,
}

_SCALARS = {
    "whiteWin": "white_win",
    "whiteLoss": "white_loss",
    "noResult": "no_result",
    "whiteLead": "white_lead",
    "whiteScoreSelfplay": "white_score_selfplay",
    "whiteScoreSelfplaySq": "white_score_selfplay_sq",
    "varTimeLeft": "var_time_left",
    "shorttermWinlossError": "shortterm_winloss_error",
    "shorttermScoreError": "shortterm_score_error",
}


@dataclasses.dataclass
class Worst:
    """The largest difference of one output and where it occurs."""

    output: str
    difference: float = 0.0
    position: str = ""
    point: str = ""
    ours: float = float("nan")
    theirs: float = float("nan")

    @property
    def tolerance(self) -> float:
        return TOLERANCES[self.output]

    @property
    def ok(self) -> bool:
        return self.difference <= self.tolerance

    def update(self, difference, position, point, ours, theirs) -> None:
        if difference > self.difference or not self.position:
            self.difference = float(difference)
            self.position, self.point = position, point
            self.ours, self.theirs = float(ours), float(theirs)


@dataclasses.dataclass
class NetCheck:
    """The outcome of evaluating a file of positions."""

    num_positions: int
    worst: dict[str, Worst]
    legal_disagreements: list[str]

    @property
    def ok(self) -> bool:
        return not self.legal_disagreements and all(w.ok for w in self.worst.values())


def _expected_policy(record: dict, size: int) -> np.ndarray:
    """``[P + 1]`` KataGo policy with NaN on illegal points, pass last."""
    policy = record["katago"]["policy"]
    if len(policy) != size * size:
        raise ValueError(f"katago.policy has {len(policy)} entries, expected {size * size}")
    values = [np.nan if v is None else float(v) for v in policy]
    return np.array([*values, float(record["katago"].get("policyPass", np.nan))])


def _compare(record: dict, ours: dict[str, np.ndarray], check: NetCheck) -> None:
    """Fold one position's differences into ``check``."""
    size = int(record["size"])
    name = str(record.get("id", "?"))
    katago = record["katago"]
    expected = _expected_policy(record, size)
    policy = ours["policy"]
    their_legal = ~np.isnan(expected[:-1])
    our_legal = ours["legal"][:-1]
    for point in np.flatnonzero(their_legal != our_legal):
        verdict = "legal" if our_legal[point] else "illegal"
        check.legal_disagreements.append(
            f"{name}: {action_to_gtp(int(point), size)} is {verdict} for us, not for KataGo"
        )
    policy = policy.astype(np.float64)
    diff = np.abs(np.where(np.isnan(expected), policy, policy - expected))
    diff = np.where(np.isnan(diff), 0.0, diff)
    at = int(np.argmax(diff))
    check.worst["policy"].update(
        diff[at],
        name,
        action_to_gtp(at, size),
        policy[at],
        0.0 if np.isnan(expected[at]) else expected[at],
    )
    for key, ours_key in _SCALARS.items():
        if key in katago and katago[key] is not None:
            value = float(ours[ours_key])
            check.worst[key].update(abs(value - katago[key]), name, "", value, katago[key])
    if "whiteOwnership" in katago:
        theirs = np.asarray(katago["whiteOwnership"], np.float64)
        diff = np.abs(ours["white_ownership"].astype(np.float64) - theirs)
        at = int(np.argmax(diff))
        check.worst["whiteOwnership"].update(
            diff[at], name, action_to_gtp(at, size), ours["white_ownership"][at], theirs[at]
        )


def verify_net_file(
    model: KataGoModel,
    path: str | Path,
    *,
    symmetry: int = 0,
    policy_optimism: float = 0.0,
    report: Callable[[int, int], None] | None = None,
) -> NetCheck:
    """Evaluate every position of ``path`` with ``model`` and compare with KataGo's numbers.

    ``report(done, total)`` is called after each batch.
    """
    records = []
    groups: dict[tuple[int, str], list[int]] = defaultdict(list)
    for number, record in read_games(path):
        if not isinstance(record.get("katago"), dict) or "policy" not in record["katago"]:
            raise ValueError(f"{path}:{number}: no katago.policy to compare with")
        groups[(int(record["size"]), str(record["rules"]))].append(len(records))
        records.append((number, record))

    run = make_evaluator(model, symmetry=symmetry, policy_optimism=policy_optimism)
    check = NetCheck(len(records), {k: Worst(k) for k in TOLERANCES}, [])
    done = 0
    for (size, rules), members in sorted(groups.items()):
        longest = max(len(records[i][1]["moves"]) for i in members)
        cap = max(2 * size * size, longest + 1)
        states = []
        for i in members:
            number, record = records[i]
            try:
                states.append(
                    state_from_moves(
                        size, record["moves"], komi=record["komi"], rules=rules, max_moves=cap
                    )
                )
            except ValueError as err:
                raise ValueError(f"{path}:{number}: {err}") from None
        batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
        # Full float32 products: on GPUs JAX's default lets float32 convolutions run in
        # TF32 (10-bit mantissas), which moved ownership by 2.2e-3 and the score lead by
        # 0.025 on an H200 -- past the tolerances that check exact features.
        with jax.default_matmul_precision("highest"):
            out = jax.device_get(run(model.variables, batch))
        for row, i in enumerate(members):
            ours = {k: np.asarray(v[row]) for k, v in out.items()}
            _compare(records[i][1], ours, check)
        done += len(members)
        if report is not None:
            report(done, len(records))
    return check
