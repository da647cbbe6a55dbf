"""What :func:`gojax.search.search` does at its roots alone: before the simulations, the
root's prior tempered and noised (KataGo's root policy temperature, Dirichlet noise);
after them, the move played without temperature (the most visited, or KataGo's lower
confidence bound).

Separate from the simulation loop, which treats the root as any other node once its
prior is set, and small on purpose: the arithmetic of the choices a search makes for
self-play and for strength. ``lower_confidence_bounds`` is public through
``gojax.search``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gojax import _selection
from gojax._search_evaluators import _mask_logits


def _tempered_logits(logits: jax.Array, legal: jax.Array, temperature: jax.Array) -> jax.Array:
    """``[B, A]`` masked logits with the legal ones divided by ``temperature [B]``: the
    prior raised to ``1 / T`` (normalised by the softmax that reads it), as KataGo
    tempers the root's policy; ``T = 1`` returns ``logits`` bit for bit."""
    return jnp.where(legal, logits / temperature[:, None], logits)


def _dirichlet_logits(key, logits, legal, alpha: float, fraction: float):
    """Root logits with Dirichlet noise mixed into the prior, over the legal moves only.

    Normalised Gamma draws restricted to the legal moves are a Dirichlet on
    them, as KataGo and AlphaGo Zero spread noise; mctx spreads it over all
    actions and then drops the illegal ones' share. The probability → logit
    round trip is mctx's, so that fraction 0 reproduces ``muzero_policy``.
    """
    probs = jax.nn.softmax(logits, axis=-1)
    if fraction > 0:
        gamma = jax.random.gamma(key, alpha, logits.shape) * legal
        noise = gamma / jnp.maximum(jnp.sum(gamma, axis=-1, keepdims=True), 1e-30)
        probs = (1 - fraction) * probs + fraction * noise
    noisy = jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
    return _mask_logits(noisy, legal)


def _greedy(visits, q, invalid):
    """``[B]`` most visited legal action, ties to the higher Q (visits are integers)."""
    score = visits.astype(jnp.float32) + 0.25 * (jnp.clip(q, -1.0, 1.0) + 1.0)
    return _selection.first_argmax(score, invalid)


# KataGo's ``lcbStdevs``: how many standard errors below the mean a bound lies.
LCB_STDEVS = 5.0


def lower_confidence_bounds(q, visits, q_stdev, stdevs: float = LCB_STDEVS, radius: float = 1.0):
    """Lower confidence bounds of mean values, KataGo's way; any matching shapes.

    ``q - stdevs * sqrt(variance / n)`` over the ``n = visits`` values in
    ``[-radius, radius]`` averaged into ``q``, whose standard deviation is
    ``q_stdev``. As KataGo does (``getSelfUtilityLCBAndRadius``, one weight
    per visit), the variance takes a prior of weight ``1 / n**2`` that it is
    the largest possible (``radius**2``: 1 for values, 1.4 with KataGo's score
    utility), so that one or two equal samples do not claim certainty; it
    fades as ``n`` grows. Unvisited moves get ``q - 2 * stdevs * radius``, KataGo's
    bound without visits. NumPy arrays in, NumPy out; jax arrays in, jax out.
    """
    xp = jnp if isinstance(q, jax.Array) else np
    n = xp.maximum(xp.asarray(visits, q.dtype), 1.0)
    prior = 1.0 / n**2
    variance = q_stdev**2 + radius**2 * prior / (n + prior)
    ess = (n + prior) ** 2 / (n + prior**2)  # effective sample size with the prior
    bound = q - stdevs * xp.sqrt(variance / ess)
    return xp.where(xp.asarray(visits) > 0, bound, q - 2.0 * stdevs * radius)


def _lcb_choice(
    visits,
    q,
    q_stdev,
    invalid,
    min_fraction: float,
    radius: float = 1.0,
    stdevs: float = LCB_STDEVS,
    stdev_floor: float = 0.0,
):
    """``[B]`` KataGo's LCB move: the best bound (``stdevs`` standard errors below the
    mean, the spread at least ``stdev_floor``) among the moves with at least
    ``min_fraction`` of the most visits (the most visited one is always among them)."""
    most = jnp.max(jnp.where(invalid, 0, visits), axis=-1, keepdims=True)
    eligible = ~invalid & (visits > 0) & (visits >= min_fraction * most)
    spread = jnp.maximum(q_stdev, stdev_floor)
    bounds = lower_confidence_bounds(q, visits, spread, stdevs=stdevs, radius=radius)
    # Ties (equal bounds) to the more visited move.
    score = bounds + 1e-6 * visits.astype(jnp.float32) / jnp.maximum(most, 1)
    choice = _selection.first_argmax(score, ~eligible)
    return jnp.where(jnp.any(eligible, axis=-1), choice, _greedy(visits, q, invalid))
