"""KataGo's output post-processing: raw net outputs to probabilities and White's view.

Follows ``reference/KATAGO_NOTES.md`` section 4 (KataGo's
``NNEvaluator::evaluate``), batched and jittable:

* policy: softmax over legal moves only (``logits * 1/temperature``);
  illegal moves get probability 0 (KataGo stores -1 and prints NaN);
* value: softmax of ``[win, loss, noResult]`` for the side to move; unless
  the ko rule is simple (or scoring is territory) the noResult logit is
  lowered by 1e5 and its probability forced to 0, so it is a 2-way softmax;
* score (multipliers 20, 20, 20, 40, 0.25, 30 up to model version 12; from
  13 the file stores them, see ``OutputSpec``): ``scoreMean = 20 raw0``,
  ``stdev = 20 softplus(raw1)``, ``scoreMeanSq = scoreMean^2 + stdev^2``,
  ``lead = 20 raw2``, the first, second and lead scaled by ``1 - noResult``;
  ``varTimeLeft = 40 softplus(raw3)`` and the short-term errors (``raw4``,
  ``raw5``) exist for version >= 9 (version 9: ``softplus``, ``10 softplus``;
  10-13: ``sqrt(0.25 softplus)``, ``sqrt(30 softplus)``; from 14 the softplus
  is of half the raw value and squared), and are -1 for version 8;
* perspective: for Black to move win/loss swap and scoreMean/lead change
  sign; ownership is ``tanh(raw)`` for White to move, ``-tanh(raw)`` for Black.

KataGo does the value part in float64; float32 here agrees to ~1e-7.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax
import jax.numpy as jnp

from gojax._board import BLACK

SCORE_MEAN_MULTIPLIER = 20.0
SCORE_STDEV_MULTIPLIER = 20.0
LEAD_MULTIPLIER = 20.0
VARIANCE_TIME_MULTIPLIER = 40.0
SHORTTERM_VALUE_ERROR_MULTIPLIER = 0.25
SHORTTERM_SCORE_ERROR_MULTIPLIER = 30.0
NO_RESULT_LOGIT_REDUCTION = 1e5
# KataGo model versions whose outputs ``postprocess`` reads.
VERSIONS = tuple(range(8, 18))


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """How to read a KataGo net's raw outputs: its model version and, from version 13,
    the multipliers its file stores (KataGo's ``ModelPostProcessParams``; earlier
    versions use the defaults). Hashable: a static argument of jitted functions."""

    version: int
    score_mean_multiplier: float = SCORE_MEAN_MULTIPLIER
    score_stdev_multiplier: float = SCORE_STDEV_MULTIPLIER
    lead_multiplier: float = LEAD_MULTIPLIER
    variance_time_multiplier: float = VARIANCE_TIME_MULTIPLIER
    shortterm_value_error_multiplier: float = SHORTTERM_VALUE_ERROR_MULTIPLIER
    shortterm_score_error_multiplier: float = SHORTTERM_SCORE_ERROR_MULTIPLIER
    td_score_multiplier: float = 20.0  # stored, unused: no output here reads it

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            supported = f"{VERSIONS[0]}-{VERSIONS[-1]}"
            raise ValueError(f"model version {self.version} is not supported ({supported})")


def score_channels(version: int) -> int:
    """Raw score-head outputs of a model ``version``: 4 in version 8, and from version 9
    the two short-term error predictions as well."""
    return 4 if version == 8 else 6


def softplus(x: jax.Array) -> jax.Array:
    """``log(1 + e^x)``, or ``x`` above 40, as KataGo computes it."""
    return jnp.where(x > 40.0, x, jnp.log1p(jnp.exp(jnp.minimum(x, 40.0))))


def policy_probs(logits: jax.Array, legal_mask: jax.Array, temperature: float = 1.0) -> jax.Array:
    """``[B, P]`` logits -> probabilities over legal moves, 0 on illegal ones."""
    legal = legal_mask.astype(bool)
    scaled = jnp.where(legal, logits.astype(jnp.float32) / temperature, -jnp.inf)
    top = jnp.max(scaled, axis=-1, keepdims=True)
    e = jnp.where(legal, jnp.exp(scaled - top), 0.0)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def postprocess(
    raw: Mapping[str, jax.Array],
    legal_mask: jax.Array,
    to_play: jax.Array,
    *,
    rules_ko_simple: bool | jax.Array,
    version: int | OutputSpec = 8,
    territory_scoring: bool | jax.Array = False,
    on_board: jax.Array | None = None,
    temperature: float = 1.0,
) -> dict[str, jax.Array]:
    """Raw ``KataGoNet`` outputs -> KataGo's reported numbers, from White's view.

    Args:
      raw: ``policy_logits [B, P+1]``, ``value_logits [B, 3]``, ``score [B, 4|6]``,
        ``ownership [B, P]`` (``P`` points, row-major from the top row).
      legal_mask: ``[B, P+1]`` bool, pass last (pass is always legal in KataGo).
      to_play: ``[B]`` player to move, ``gojax.BLACK`` (+1) or ``gojax.WHITE`` (-1).
      rules_ko_simple: simple ko rule (bool or ``[B]``); otherwise noResult is 0.
      version: model version (8-17), or the ``OutputSpec`` of a loaded file
        (``KataGoModel.output_spec``: versions >= 13 store their multipliers), static.
      territory_scoring: territory scoring also keeps noResult (bool or ``[B]``).
      on_board: optional ``[B, P]`` mask; ownership is 0 off the board.
      temperature: policy temperature.

    Returns float32 arrays: ``policy [B, P+1]``; ``white_win``, ``white_loss``,
    ``no_result``, ``white_lead``, ``white_score_selfplay`` (scoreMean),
    ``white_score_selfplay_sq``, ``score_stdev``, ``var_time_left``,
    ``shortterm_winloss_error``, ``shortterm_score_error`` ``[B]``;
    ``white_ownership [B, P]``.
    """
    spec = version if isinstance(version, OutputSpec) else OutputSpec(version)
    version = spec.version
    value_logits = raw["value_logits"].astype(jnp.float32)
    score = raw["score"].astype(jnp.float32)
    expected = score_channels(version)
    if score.shape[-1] != expected:
        raise ValueError(f"version {version} has {expected} score outputs, got {score.shape[-1]}")
    batch = value_logits.shape[0]
    black = jnp.broadcast_to(jnp.asarray(to_play) == BLACK, (batch,))
    keep_no_result = jnp.broadcast_to(
        jnp.logical_or(jnp.asarray(rules_ko_simple), jnp.asarray(territory_scoring)), (batch,)
    )

    policy = policy_probs(raw["policy_logits"], legal_mask, temperature)

    win, loss, no_result = value_logits[:, 0], value_logits[:, 1], value_logits[:, 2]
    no_result = jnp.where(keep_no_result, no_result, no_result - NO_RESULT_LOGIT_REDUCTION)
    top = jnp.maximum(jnp.maximum(win, loss), no_result)
    e_win, e_loss = jnp.exp(win - top), jnp.exp(loss - top)
    e_nr = jnp.where(keep_no_result, jnp.exp(no_result - top), 0.0)
    total = e_win + e_loss + e_nr
    p_win, p_loss, p_nr = e_win / total, e_loss / total, e_nr / total

    score_mean = spec.score_mean_multiplier * score[:, 0]
    stdev = spec.score_stdev_multiplier * softplus(score[:, 1])
    score_mean_sq = score_mean * score_mean + stdev * stdev
    lead = spec.lead_multiplier * score[:, 2]
    # Scores are conditional on a result; noResult counts as score 0.
    has_result = 1.0 - p_nr
    score_mean, score_mean_sq, lead = (
        score_mean * has_result,
        score_mean_sq * has_result,
        lead * has_result,
    )

    minus_one = jnp.full((batch,), -1.0, jnp.float32)
    if version == 8:
        var_time_left = st_winloss = st_score = minus_one
    else:
        var_time_left = spec.variance_time_multiplier * softplus(score[:, 3])
        value_error, score_error = (
            spec.shortterm_value_error_multiplier,
            spec.shortterm_score_error_multiplier,
        )
        if version == 9:
            st_winloss = softplus(score[:, 4])
            st_score = 10.0 * softplus(score[:, 5])
        elif version < 14:
            st_winloss = jnp.sqrt(value_error * softplus(score[:, 4]))
            st_score = jnp.sqrt(score_error * softplus(score[:, 5]))
        else:  # "squared softplus for error variance predictions"
            s4, s5 = softplus(0.5 * score[:, 4]), softplus(0.5 * score[:, 5])
            st_winloss = jnp.sqrt(s4 * s4 * value_error)
            st_score = jnp.sqrt(s5 * s5 * score_error)

    sign = jnp.where(black, -1.0, 1.0)
    ownership = sign[:, None] * jnp.tanh(raw["ownership"].astype(jnp.float32))
    if on_board is not None:
        ownership = jnp.where(on_board.astype(bool), ownership, 0.0)

    return {
        "policy": policy,
        "white_win": jnp.where(black, p_loss, p_win),
        "white_loss": jnp.where(black, p_win, p_loss),
        "no_result": p_nr,
        "white_lead": sign * lead,
        "white_score_selfplay": sign * score_mean,
        "white_score_selfplay_sq": score_mean_sq,
        "score_stdev": stdev,
        "var_time_left": var_time_left,
        "shortterm_winloss_error": st_winloss,
        "shortterm_score_error": st_score,
        "white_ownership": ownership,
    }
