"""KataGo's score utility: what a final margin is worth to its search, besides the win.

KataGo's search does not maximise the win probability alone: each playout's
*utility* is its win-loss value plus a bounded reward for the score,

    utility = (win - loss) + 0.1 * sv(score; 0, 2) + 0.3 * sv(score; center, 0.75)

with ``sv(s; c, k) = 2/pi * atan((s - c) / (k * sqrt(board area)))``, in
(-1, 1), taken in expectation over the net's distribution of the final
margin (a normal of mean ``scoreMean`` and deviation ``scoreStdev``). The
*static* term (centred on 0) prefers winning by more; the *dynamic* one is
centred near the score the search expected at its root (``center``), so that
a won or lost game still plays for points around where it stands. All
numbers here are for one player (the one to move at the position evaluated);
both terms are odd in ``s - c``, so the opponent's utility is the negation
with the centre negated too.

The expectation is KataGo's quadrature: 101 points from -5 to +5 deviations,
weighted by the normal density (KataGo tabulates it on a grid and
interpolates; this computes it directly, so the two differ by the
interpolation, well under 1e-3).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

# KataGo's GTP defaults (cpp/program/setup.cpp).
STATIC_SCORE_UTILITY = 0.1  # staticScoreUtilityFactor
DYNAMIC_SCORE_UTILITY = 0.3  # dynamicScoreUtilityFactor
DYNAMIC_CENTER_ZERO_WEIGHT = 0.2  # dynamicScoreCenterZeroWeight
DYNAMIC_CENTER_SCALE = 0.75  # dynamicScoreCenterScale
STATIC_SCALE = 2.0  # the static term's scale (fixed in KataGo)

# Quadrature nodes in deviations, and their normal weights (normalised). NumPy, not jnp:
# a jnp array made at import starts the XLA backend, and a multi-process job must join
# its coordinator (jax.distributed.initialize) before that.
_STEPS = np.arange(-50, 51, dtype=np.float32) / np.float32(10.0)
_WEIGHTS = np.exp(-0.5 * _STEPS**2) / np.sum(np.exp(-0.5 * _STEPS**2))


def expected_score_value(mean, stdev, center, scale: float, sqrt_area: float):
    """``E[2/pi * atan((X - center) / (scale * sqrt_area))]``, ``X ~ N(mean, stdev)`` cut at 5
    deviations; any broadcastable arrays, the result in (-1, 1)."""
    mean, stdev, center = (jnp.asarray(x, jnp.float32) for x in (mean, stdev, center))
    x = (mean - center)[..., None] + stdev[..., None] * _STEPS
    values = jnp.arctan(x / (scale * sqrt_area)) * (2.0 / math.pi)
    return jnp.sum(values * _WEIGHTS, axis=-1)


def score_utility(
    mean,
    stdev,
    center,
    size: int,
    static: float = STATIC_SCORE_UTILITY,
    dynamic: float = DYNAMIC_SCORE_UTILITY,
):
    """KataGo's ``getScoreUtility`` for one player: ``static`` times the value of the score
    around 0 plus ``dynamic`` times its value around ``center`` (points, same player)."""
    sqrt_area = float(size)
    utility = static * expected_score_value(mean, stdev, 0.0, STATIC_SCALE, sqrt_area)
    if dynamic:
        utility = utility + dynamic * expected_score_value(
            mean, stdev, center, DYNAMIC_CENTER_SCALE, sqrt_area
        )
    return utility


def dynamic_center(expected_score, size: int):
    """KataGo's ``recentScoreCenter`` from the score the search expects at its root: pulled
    a fifth of the way toward 0, but never more than ``0.75 * sqrt(area)`` from it."""
    expected = jnp.asarray(expected_score, jnp.float32)
    cap = DYNAMIC_CENTER_SCALE * size
    center = expected * (1.0 - DYNAMIC_CENTER_ZERO_WEIGHT)
    return jnp.clip(center, expected - cap, expected + cap)


def final_score_stdev(margin):
    """The spread KataGo gives a finished game's score: 0.5 for a whole-number margin (a
    draw is worth half a point either way, ``whiteScoreMeanSqOfScoreGridded``), else 0."""
    margin = jnp.asarray(margin, jnp.float32)
    return jnp.where(margin == jnp.round(margin), 0.5, 0.0).astype(jnp.float32)
