"""Bradley-Terry (Elo) ratings of a pool of agents from their game results.

The model: agent ``i`` beats agent ``j`` with probability
``1 / (1 + 10 ** ((elo_j - elo_i) / 400))``; a draw counts as half a win and
half a loss. :func:`fit_ratings` finds the maximum-likelihood ratings by
Newton's method (the log-likelihood is concave in the ratings), with one
agent held at ``anchor_elo`` (ratings are only defined up to a shift), and
95% intervals from the inverse Fisher information: ``elo +- 1.96 * se``,
where ``se`` is relative to the anchor (the anchor's own interval is a
point).

A perfect record has no finite maximum-likelihood rating, so every pair of
agents that met gets ``prior_draws`` virtual draws (1 by default, a weak
prior in the spirit of BayesElo's): an agent that won all of its 100 games
against one opponent ends up about 920 Elo above it, not at infinity.

    >>> games = [("net", "random", 1.0)] * 30 + [("net", "random", 0.0)] * 10
    >>> ratings = fit_ratings(games, anchor="random")
    >>> round(ratings["net"].elo)
    185
    >>> ratings["random"].elo
    0.0
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from gojax.atomic import atomic_file

__all__ = ["PairCounts", "Rating", "fit_ratings", "pair_counts", "plot_ratings", "ratings_table"]

ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo points per unit of the logistic's argument
Z95 = 1.959964


@dataclasses.dataclass(frozen=True)
class Rating:
    """One agent's rating with its 95% interval (Elo) and the real games behind it."""

    elo: float
    lo: float
    hi: float
    games: int


@dataclasses.dataclass(frozen=True)
class PairCounts:
    """Aggregated results of agent ``a`` against agent ``b`` (``a``'s wins, draws, losses)."""

    a: str
    b: str
    wins: float
    draws: float
    losses: float


def pair_counts(results: Iterable[PairCounts | tuple]) -> list[PairCounts]:
    """Normalise results to :class:`PairCounts`.

    Accepts ``PairCounts``, ``(a, b, score_of_a)`` with the score 1, 0.5 or 0
    (one game), or ``(a, b, wins, draws, losses)`` tuples. Raises ValueError
    for anything else, naming it.
    """
    out = []
    for item in results:
        if isinstance(item, PairCounts):
            out.append(item)
        elif len(item := tuple(item)) == 3:
            a, b, score = item
            if score not in (0, 0.5, 1):
                raise ValueError(f"a game's result must be 1, 0.5 or 0 for its first agent: {item}")
            s = float(score)
            out.append(PairCounts(str(a), str(b), float(s == 1), float(s == 0.5), float(s == 0)))
        elif len(item) == 5:
            a, b, wins, draws, losses = item
            counts = (float(wins), float(draws), float(losses))
            out.append(PairCounts(str(a), str(b), *counts))
        else:
            raise ValueError(f"expected (a, b, result) or (a, b, wins, draws, losses): {item}")
        last = out[-1]
        if last.a == last.b:
            raise ValueError(f"an agent cannot play itself in a rating pool: {item}")
        if min(last.wins, last.draws, last.losses) < 0:
            raise ValueError(f"negative game counts: {item}")
    return out


def _components(n: int, edges: Sequence[tuple[int, int]]) -> list[set[int]]:
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in edges:
        parent[find(i)] = find(j)
    groups: dict[int, set[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), set()).add(i)
    return list(groups.values())


def fit_ratings(
    results: Iterable[PairCounts | tuple],
    anchor: str,
    anchor_elo: float = 0.0,
    *,
    prior_draws: float = 1.0,
    max_iterations: int = 100,
) -> dict[str, Rating]:
    """Maximum-likelihood Bradley-Terry ratings in Elo, with 95% intervals.

    Args:
      results: games as accepted by :func:`pair_counts` (single games or counts).
      anchor: the agent held at ``anchor_elo`` (e.g. ``"random"`` at 0 or a
        GnuGo level at its known rating).
      prior_draws: virtual draws added to every pair that played (see the
        module doc); 0 gives the plain maximum likelihood, which diverges
        for a perfect record.

    Returns ``{name: Rating}`` for every agent in ``results``, best first.
    Raises ValueError when the anchor did not play or the agents do not form
    one connected pool (ratings across separate pools mean nothing).
    """
    counts = pair_counts(results)
    names = sorted({c.a for c in counts} | {c.b for c in counts})
    if anchor not in names:
        raise ValueError(f"the anchor {anchor!r} played no game; agents: {names}")
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    wins = np.zeros((n, n))  # wins[i, j]: points i scored against j (draws count half)
    games = np.zeros((n, n))
    real_games = np.zeros(n, np.int64)
    for c in counts:
        i, j = index[c.a], index[c.b]
        wins[i, j] += c.wins + 0.5 * c.draws
        wins[j, i] += c.losses + 0.5 * c.draws
        total = c.wins + c.draws + c.losses
        games[i, j] += total
        games[j, i] += total
        real_games[i] += round(total)
        real_games[j] += round(total)
    met = games > 0
    wins += 0.5 * prior_draws * met
    games += prior_draws * met
    pool = _components(n, [(i, j) for i in range(n) for j in range(i + 1, n) if met[i, j]])
    if len(pool) > 1:
        groups = sorted(sorted(names[i] for i in group) for group in pool)
        raise ValueError(f"the agents form {len(pool)} separate pools, not one: {groups}")

    free = [i for i in range(n) if i != index[anchor]]
    r = np.zeros(n)  # ratings in nats (logistic units), anchor at 0

    def log_likelihood(r: np.ndarray) -> float:
        diff = r[:, None] - r[None, :]
        return float(np.sum(wins * -np.logaddexp(0.0, -diff)))

    def derivatives(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(r[:, None] - r[None, :])))  # p[i, j]: i beats j
        gradient = np.sum(wins - games * p, axis=1)
        weight = games * p * p.T
        hessian = weight - np.diag(weight.sum(axis=1))  # negative semi-definite
        return gradient, hessian

    for _ in range(max_iterations):
        gradient, hessian = derivatives(r)
        g, h = gradient[free], hessian[np.ix_(free, free)]
        step = np.linalg.solve(h, -g)
        # Newton with backtracking: the likelihood never decreases.
        current, scale = log_likelihood(r), 1.0
        while scale > 1e-6:
            trial = r.copy()
            trial[free] += scale * step
            if log_likelihood(trial) >= current - 1e-12:
                break
            scale *= 0.5
        r = trial
        if np.max(np.abs(scale * step)) < 1e-10:
            break
    _, hessian = derivatives(r)
    covariance = np.linalg.inv(-hessian[np.ix_(free, free)])
    se = np.zeros(n)
    se[free] = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    elo = anchor_elo + ELO_PER_NAT * r
    half = Z95 * ELO_PER_NAT * se
    ratings = {
        names[i]: Rating(
            elo=float(elo[i]),
            lo=float(elo[i] - half[i]),
            hi=float(elo[i] + half[i]),
            games=int(real_games[i]),
        )
        for i in range(n)
    }
    return dict(sorted(ratings.items(), key=lambda kv: -kv[1].elo))


def ratings_table(ratings: dict[str, Rating]) -> str:
    """A printable table, best first: rank, agent, Elo, 95% interval, games."""
    width = max([5] + [len(name) for name in ratings])
    lines = [f"{'rank':>4}  {'agent':<{width}}  {'Elo':>7}  {'95% interval':>17}  {'games':>6}"]
    ordered = sorted(ratings.items(), key=lambda kv: -kv[1].elo)
    for rank, (name, r) in enumerate(ordered, start=1):
        elo, lo, hi = (round(x, 6) + 0.0 for x in (r.elo, r.lo, r.hi))  # no "-0.0"
        interval = f"[{lo:7.1f}, {hi:7.1f}]"
        lines.append(f"{rank:>4}  {name:<{width}}  {elo:>7.1f}  {interval:>17}  {r.games:>6}")
    return "\n".join(lines)


def plot_ratings(
    ratings: dict[str, Rating], path: str | os.PathLike, *, title: str = "Elo ratings"
) -> Path:
    """A horizontal bar of each agent's Elo with its 95% interval, best on top; a PNG.

    Written atomically (a temporary file renamed into place); returns the path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = sorted(ratings.items(), key=lambda kv: kv[1].elo)
    names = [name for name, _ in ordered]
    elo = np.array([r.elo for _, r in ordered])
    errors = np.array([[r.elo - r.lo for _, r in ordered], [r.hi - r.elo for _, r in ordered]])
    fig, ax = plt.subplots(figsize=(7, 1.0 + 0.4 * len(names)))
    ax.errorbar(elo, np.arange(len(names)), xerr=errors, fmt="o", capsize=3)
    ax.set_yticks(np.arange(len(names)), names)
    ax.set_xlabel("Elo (95% interval)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    target = Path(path)
    try:
        with atomic_file(target, "wb") as handle:
            fig.savefig(handle, format="png", dpi=90)
    finally:
        plt.close(fig)
    return target
