"""``gojax report``'s index of the papers we reproduce: one row per experiment, its number
read from ``results/``.

The rows are declared in a JSON file (``docs/papers/claims.json``), one object each::

    {
      "paper": "AlphaGo (Silver et al. 2016)",
      "experiment": "Fig. 2b: value net against rollouts, 9×9",
      "link": "alphago.md#alphago-value-network-against-rollouts-silver-et-al-2016-fig-2b",
      "claim": "one pass of the value net predicts the winner better than rollouts",
      "paper_number": "value net near RL-policy rollouts, far below random ones",
      "setting": "9×9, KataGo g170 b6c96, 2,135 positions; 2-core CPU, 4 min",
      "quantities": {
        "value": {"kind": "field", "files": "value_mse_9x9.json", "field": "overall.value"},
        "rollouts": {"kind": "field", "files": "value_mse_9x9.json",
                     "field": "overall.rollouts_64"}
      },
      "ours": "MSE {value:.3f} against {rollouts:.3f} for 64 random rollouts",
      "verdict": [
        {"when": [["value", "<", "rollouts"]], "then": "reproduced"},
        {"then": "not reproduced"}
      ]
    }

``quantities`` are read in order, each of one kind (paths are relative to the
results folder):

- ``field``: the mean of a dotted ``field`` over the JSON files ``files`` (a glob)
  matches, e.g. the held-out accuracy of every seed's run;
- ``games``: the pooled score (wins + draws / 2 over games) of the JSON files
  ``files`` matches, each with ``wins``, ``draws`` and ``games``;
- ``sweep``: the pooled score of nets matching the regular expression ``a`` against
  nets matching ``b`` over the cells of the sweeps ``sweeps`` (a cell with a ``b``
  agent against an ``a`` opponent counts from ``a``'s side), optionally only the
  cells whose ``search`` fields (``kind``, ``simulations``, ``rollout_lambda``) match;
- ``match``: the pooled score of engine A over the ``gojax match`` folders ``matches``;
- ``elo``: the mean Bradley-Terry Elo of the ratings of the sweeps ``sweeps`` whose
  names match the regular expression ``net`` (compare two of one pool);
- ``difference``: ``of[0] - of[1]``, two quantities named before it.

A score has ``lo`` and ``hi`` (its 95% Wilson interval, every game counted as
independent), ``games``, ``cells`` (pairings or matches), ``won`` (those above
50%) and ``share`` (``won / cells``), usable in ``ours`` (a ``str.format``
template: ``{x:.1%}``, ``{x.games:,}``) and in ``verdict``: the ``then`` of the
first rule whose conditions (``[left, op, right]``, each side a number, a
quantity or ``quantity.attribute``) all hold; the last rule has no ``when``. So
the verdict follows the results when they change.

A row whose result is missing from the results folder says so in its cells (and
in a warning); one whose result lacks what the row reads is an error.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import operator
import os
import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval._report_markdown import markdown_table
from eval._report_results import _read_json

__all__ = [
    "BLOCK",
    "PapersIndex",
    "Score",
    "load_claims",
    "render_papers",
    "verdict",
]

BLOCK = "papers"  # the marker name of the index: <!-- report:papers -->
COLUMNS = ["paper", "experiment", "claim", "paper's number", "ours", "our setting", "verdict"]
_TEXT_KEYS = ("paper", "experiment", "link", "claim", "paper_number", "setting")
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
}
_KINDS = {
    "field": {"files", "field"},
    "games": {"files"},
    "sweep": {"sweeps", "a", "b", "search"},
    "match": {"matches"},
    "elo": {"sweeps", "net"},
    "difference": {"of"},
}
_REQUIRED = {
    "field": {"files", "field"},
    "games": {"files"},
    "sweep": {"sweeps", "a", "b"},
    "match": {"matches"},
    "elo": {"sweeps", "net"},
    "difference": {"of"},
}


class MissingResult(Exception):
    """A result a row reads is not in the results folder."""


@dataclasses.dataclass(frozen=True)
class Score:
    """A pooled win rate: ``value`` = (wins + draws / 2) / games, with its 95% interval."""

    value: float
    lo: float
    hi: float
    games: int
    cells: int  # the pairings (sweep cells) or matches pooled
    won: int  # those of them above 50%

    @property
    def share(self) -> float:
        """The fraction of the cells won."""
        return self.won / self.cells if self.cells else math.nan

    def __float__(self) -> float:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclasses.dataclass
class PapersIndex:
    """The index rendered: its markdown and what went wrong on the way, one line each."""

    markdown: str
    warnings: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)


# ---------------------------------------------------------------------------- the claims file


def load_claims(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a claims file, checked. Raises ValueError, one line naming the row."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: no list of rows")
    for number, row in enumerate(rows, start=1):
        try:
            _check_row(row)
        except ValueError as err:
            name = row.get("experiment", "") if isinstance(row, dict) else ""
            raise ValueError(f"{path}: row {number} ({name}): {err}") from None
    return rows


def _check_row(row: Any) -> None:
    if not isinstance(row, dict):
        raise ValueError("not an object")
    known = {*_TEXT_KEYS, "quantities", "ours", "verdict"}
    if unknown := set(row) - known:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}")
    for key in (*_TEXT_KEYS, "ours"):
        if not isinstance(row.get(key), str):
            raise ValueError(f"{key!r} must be a string")
    quantities = row.get("quantities")
    if not isinstance(quantities, dict) or not quantities:
        raise ValueError("'quantities' must be an object naming at least one")
    seen: set[str] = set()
    for name, spec in quantities.items():
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ValueError(f"quantity {name!r}: not an identifier")
        _check_quantity(name, spec, seen)
        seen.add(name)
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(row["ours"]) if f is not None]
    except ValueError as err:
        raise ValueError(f"'ours' is no template ({err})") from None
    for field in fields:
        if re.split(r"[.\[]", field)[0] not in seen:
            raise ValueError(f"'ours' names no quantity {field!r}")
    rules = row.get("verdict")
    if not isinstance(rules, list) or not rules:
        raise ValueError("'verdict' must be a list of rules")
    for i, rule in enumerate(rules):
        last = i == len(rules) - 1
        if not isinstance(rule, dict) or not isinstance(rule.get("then"), str):
            raise ValueError(f"verdict rule {i + 1}: needs a 'then' string")
        if set(rule) - {"when", "then"}:
            raise ValueError(f"verdict rule {i + 1}: only 'when' and 'then'")
        if last != ("when" not in rule):
            raise ValueError("verdict: every rule but the last has a 'when', the last none")
        for condition in rule.get("when", []):
            if not (isinstance(condition, list) and len(condition) == 3):
                raise ValueError(f"verdict rule {i + 1}: a condition is [left, op, right]")
            left, op, right = condition
            if op not in _OPS:
                raise ValueError(f"verdict rule {i + 1}: unknown operator {op!r}")
            for side in (left, right):
                if isinstance(side, str) and side.split(".")[0] not in seen:
                    raise ValueError(f"verdict rule {i + 1}: no quantity {side!r}")


def _check_quantity(name: str, spec: Any, seen: set[str]) -> None:
    if not isinstance(spec, dict) or spec.get("kind") not in _KINDS:
        raise ValueError(f"quantity {name!r}: 'kind' must be one of {', '.join(_KINDS)}")
    kind = spec["kind"]
    keys = set(spec) - {"kind"}
    if unknown := keys - _KINDS[kind]:
        raise ValueError(f"quantity {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
    if missing := _REQUIRED[kind] - keys:
        raise ValueError(f"quantity {name!r}: missing {', '.join(sorted(missing))}")
    if kind in ("sweep", "elo"):
        for key in ("a", "b") if kind == "sweep" else ("net",):
            try:
                re.compile(spec[key])
            except (re.error, TypeError) as err:
                raise ValueError(f"quantity {name!r}: {key!r} is no pattern ({err})") from None
    if kind == "difference" and (
        not isinstance(spec["of"], list)
        or len(spec["of"]) != 2
        or any(other not in seen for other in spec["of"])
    ):
        raise ValueError(f"quantity {name!r}: 'of' names two quantities defined before it")


# ---------------------------------------------------------------------------- reading results


def _files(results: Path, pattern: str) -> list[Path]:
    found = sorted(Path(p) for p in glob.glob(str(results / pattern)))
    if not found:
        raise MissingResult(f"results/{pattern}")
    return found


def _field(data: Any, dotted: str, where: Path) -> float:
    value = data
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"{where}: no field {dotted!r}")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {dotted!r} is not a number")
    return float(value)


def _score(points: list[tuple[float, int]]) -> Score:
    """Pooled ``(points, games)`` of each cell, a draw counting half."""
    from train.arena import wilson_interval

    total = sum(p for p, _ in points)
    games = sum(n for _, n in points)
    lo, hi = wilson_interval(total, games)
    return Score(
        value=total / games if games else math.nan,
        lo=lo,
        hi=hi,
        games=games,
        cells=len(points),
        won=sum(1 for p, n in points if n and p / n > 0.5),
    )


def _sweep_points(results: Path, spec: dict[str, Any]) -> list[tuple[float, int]]:
    a, b = re.compile(spec["a"]), re.compile(spec["b"])
    search = spec.get("search", {})
    points = []
    for sweep in spec["sweeps"]:
        path = results / sweep / "results.json"
        if not path.is_file():
            raise MissingResult(f"results/{sweep}")
        for cell in _read_json(path)["cells"]:
            if any(cell.get(key) != value for key, value in search.items()):
                continue
            agent, opponent = cell["agent"], cell["opponent_name"]
            points_a = cell["wins"] + 0.5 * cell["draws"]
            if a.search(agent) and b.search(opponent):
                points.append((points_a, cell["games"]))
            elif b.search(agent) and a.search(opponent):
                points.append((cell["games"] - points_a, cell["games"]))
    if not points:
        raise ValueError(
            f"no cell of {', '.join(spec['sweeps'])} plays {spec['a']} against {spec['b']}"
        )
    return points


def _elo(results: Path, spec: dict[str, Any]) -> float:
    net = re.compile(spec["net"])
    elos = []
    for sweep in spec["sweeps"]:
        path = results / sweep / "results.json"
        if not path.is_file():
            raise MissingResult(f"results/{sweep}")
        ratings = _read_json(path).get("ratings") or {}
        elos += [float(r["elo"]) for name, r in ratings.items() if net.search(name)]
    if not elos:
        raise ValueError(f"no rating of {', '.join(spec['sweeps'])} matches {spec['net']}")
    return sum(elos) / len(elos)


def _match_points(results: Path, spec: dict[str, Any]) -> list[tuple[float, int]]:
    from eval.match import read_match

    points = []
    for name in spec["matches"]:
        folder = results / name
        if not folder.is_dir():
            raise MissingResult(f"results/{name}")
        match = read_match(folder)
        points.append((match.wins("A") + 0.5 * match.draws, len(match.games)))
    return points


def _quantity(results: Path, spec: dict[str, Any], known: dict[str, Any]) -> Any:
    kind = spec["kind"]
    if kind == "field":
        values = [_field(_read_json(p), spec["field"], p) for p in _files(results, spec["files"])]
        return sum(values) / len(values)
    if kind == "games":
        points = []
        for path in _files(results, spec["files"]):
            data = _read_json(path)
            wins, draws = _field(data, "wins", path), _field(data, "draws", path)
            points.append((wins + 0.5 * draws, int(_field(data, "games", path))))
        return _score(points)
    if kind == "sweep":
        return _score(_sweep_points(results, spec))
    if kind == "match":
        return _score(_match_points(results, spec))
    if kind == "elo":
        return _elo(results, spec)
    first, second = (float(known[name]) for name in spec["of"])  # difference
    return first - second


def _operand(side: Any, values: dict[str, Any]) -> Any:
    if not isinstance(side, str):
        return side
    name, _, attribute = side.partition(".")
    value = values[name]
    if attribute:
        return getattr(value, attribute)
    return value.value if isinstance(value, Score) else value


def verdict(rules: list[dict[str, Any]], values: dict[str, Any]) -> str:
    """The ``then`` of the first rule whose conditions all hold."""
    for rule in rules:
        conditions = rule.get("when", [])
        if all(
            _OPS[op](_operand(left, values), _operand(right, values))
            for left, op, right in conditions
        ):
            return rule["then"]
    raise ValueError("no verdict rule applies")  # the last rule has no conditions


# ---------------------------------------------------------------------------- the table


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(results: Path, row: dict[str, Any], index: PapersIndex, where: str) -> list[str]:
    experiment = f"[{_cell(row['experiment'])}]({row['link']})"
    text = [_cell(row[key]) for key in ("claim", "paper_number")]
    head = [_cell(row["paper"]), experiment, *text]
    values: dict[str, Any] = {}
    try:
        for name, spec in row["quantities"].items():
            values[name] = _quantity(results, spec, values)
        ours = row["ours"].format(**values)
        judged = verdict(row["verdict"], values)
    except MissingResult as missing:
        index.warnings.append(f"{where}: {row['experiment']}: no result {missing}")
        return [*head, f"no result: `{missing}`", _cell(row["setting"]), "not measured"]
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        what = f"no {err} field" if isinstance(err, KeyError) else str(err)
        index.errors.append(f"{where}: {row['experiment']}: {what}")
        return [*head, "unreadable (see the errors)", _cell(row["setting"]), "–"]
    return [*head, _cell(ours), _cell(row["setting"]), f"**{_cell(judged)}**"]


def render_papers(claims: str | os.PathLike, results: str | os.PathLike = "results") -> PapersIndex:
    """The index table of ``claims`` with our numbers read from ``results``.

    Raises ValueError if the claims file is missing or malformed; a row whose
    result is missing or unreadable is rendered as such and named in the
    index's ``warnings`` or ``errors``.
    """
    claims = Path(claims)
    if not claims.is_file():
        raise ValueError(f"{claims}: no such file")
    rows = load_claims(claims)
    index = PapersIndex("")
    body = [_row(Path(results), row, index, str(claims)) for row in rows]
    right = [False] * len(COLUMNS)
    index.markdown = markdown_table(COLUMNS, body, right=right)
    return index
