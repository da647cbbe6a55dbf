"""Evaluators for :func:`gojax.search.search`: the functions that give a search's leaves
their prior logits, value and (for nets with a score head) score, score distribution and
ownership, and the helpers that call one whatever it returns.

Separate from the search because an evaluator is the search's only contact with a
network: the tree code never sees a net, and the nets' own code (``gojax.evaluate``,
``gojax.nn``) never sees a tree. Public through ``gojax.search``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from gojax._board import WHITE, GoState, legal_moves
from gojax._features import agz_planes
from gojax._tree_reuse import ILLEGAL_LOGIT
from gojax.evaluate import check_symmetry, evaluate, has_score_head

# ``(states, key) -> (prior_logits, value)``, ``(prior_logits, value, score)``,
# ``(prior_logits, value, score, score_mean, score_stdev)`` or that and ``ownership``
# (``[B, P]``, Black's view; see ``katago_evaluator``).
Evaluator = Callable[[GoState, jax.Array], tuple[jax.Array, ...]]

# Legal logits are kept within this distance of the best one, so that a
# legal move whose probability underflowed (log 0 = -inf) stays distinguishable
# from an illegal one; exp(-1e4) is 0 in float32 anyway.
_LEGAL_LOGIT_FLOOR = -1e4


def _mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """``[B, A]`` logits → legal ones shifted to max 0 and clipped, illegal ones float32 min.

    mctx's own masking uses the float32 minimum too; it keeps softmaxes
    NaN-free when no move is legal (a finished game).
    """
    best = jnp.max(jnp.where(legal, logits, -jnp.inf), axis=-1, keepdims=True)
    best = jnp.where(jnp.isfinite(best), best, 0.0)
    shifted = jnp.clip(logits - best, _LEGAL_LOGIT_FLOOR, 0.0)
    return jnp.where(legal, shifted, ILLEGAL_LOGIT).astype(jnp.float32)


def uniform_evaluator() -> Evaluator:
    """An evaluator with a uniform prior over legal moves and value 0 (no knowledge).

    With it a search learns only from finished games in its tree.
    """

    def evaluate(states: GoState, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        del key
        legal = jax.vmap(legal_moves)(states)
        value = jnp.zeros(states.to_play.shape, jnp.float32)
        return _mask_logits(jnp.zeros(legal.shape, jnp.float32), legal), value

    return evaluate


def policy_logits(policy: jax.Array) -> jax.Array:
    """``[..., A]`` probabilities (0 on illegal moves) -> their logs, illegal moves at
    ``ILLEGAL_LOGIT``: a network's policy as a search's prior logits."""
    policy = jnp.asarray(policy)
    tiny = jnp.finfo(policy.dtype).tiny
    return jnp.where(policy > 0, jnp.log(jnp.maximum(policy, tiny)), ILLEGAL_LOGIT)


def katago_evaluator(
    model: Any,
    *,
    symmetry: int | str = "random",
    dtype: Any = jnp.float32,
    policy_optimism: float = 0.0,
    ownership: bool = False,
) -> Evaluator:
    """An evaluator running a KataGo net (``gojax.evaluate.evaluate``) on the leaves.

    Args:
      model: a loaded ``KataGoModel`` (``gojax.katago_model.load_model``) or
        a tuple ``(net, variables, version)``.
      symmetry: ``"random"``: each leaf under its own random board symmetry
        (drawn from the search's key), as KataGo and AlphaGo Zero do;
        ``"average"``: the mean of all 8; an int 0..7: that one.
      dtype: compute dtype of the net built from a ``KataGoModel``.
      policy_optimism: mix of the optimistic policy into the prior, for a
        ``KataGoModel`` of version >= 12 (``gojax.nn.KataGoNet``; KataGo searches
        with 1.0 below the root and 0.2 at it). A tuple's net carries its own.
      ownership: also give each leaf's ownership (``[B, P]``, Black's view), which
        the search keeps per node for :func:`tree_ownership` (analysis; not worth
        its memory in self-play). Nets without a score head give none.

    Returns an evaluator whose logits are the log of KataGo's masked policy
    (illegal moves at the float32 minimum), whose value is ``win - loss``,
    whose score is the lead (``scoreLead``) and whose score distribution is
    ``scoreMean`` and its deviation, all for the player to move; no score
    from nets without a score head (AlphaGo Zero's, AlphaGo's).
    """
    if isinstance(model, tuple):
        net, variables, version = model
    else:
        net = model.module(dtype=dtype, policy_optimism=policy_optimism)
        variables, version = model.variables, model.output_spec
    symmetry = check_symmetry(symmetry)
    scored = has_score_head(version)

    def evaluate_leaves(states: GoState, key: jax.Array) -> tuple[jax.Array, ...]:
        out = evaluate(
            net,
            variables,
            states,
            version=version,
            symmetry=symmetry,
            key=key if symmetry == "random" else None,
        )
        logits = policy_logits(out["policy"])
        if not scored:
            return logits, out["value"]
        sign = jnp.where(states.to_play == WHITE, 1.0, -1.0)
        mean = out["white_score_selfplay"]
        stdev = jnp.sqrt(jnp.maximum(out["white_score_selfplay_sq"] - mean**2, 0.0))
        scores = (
            logits,
            out["value"],
            (sign * out["white_lead"]).astype(jnp.float32),
            (sign * mean).astype(jnp.float32),
            stdev.astype(jnp.float32),
        )
        if not ownership:
            return scores
        return scores + ((-out["white_ownership"]).astype(jnp.float32),)

    return evaluate_leaves


def agz_evaluator(net: Any, variables: Any) -> Evaluator:
    """An evaluator for a ``gojax.nn.AlphaGoZeroNet`` on AlphaGo Zero's 17 input planes.

    The net's ``policy_logits`` are used as they are (the search masks
    illegal moves) and its tanh ``value`` is already for the player to move.
    """

    def evaluate_leaves(states: GoState, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        del key
        planes = jax.vmap(agz_planes)(states)
        out = net.apply(variables, planes, train=False)
        return out["policy_logits"], out["value"]

    return evaluate_leaves


def _num_outputs(evaluator: Evaluator, states: GoState, key: jax.Array) -> int:
    """How many arrays ``evaluator`` returns: 2, 3 (a score), 5 (a score distribution too)
    or 6 (and ownership); found by tracing it, nothing runs."""
    return len(jax.eval_shape(lambda s: evaluator(s, key), states))


def evaluate_with_score(
    evaluator: Evaluator, states: GoState, key: jax.Array
) -> tuple[jax.Array, ...]:
    """``evaluator``'s ``(prior_logits, value, score, score_mean, score_stdev, ownership)``,
    each ``[B]`` but the logits and the ownership (``[B, P]``, Black's view); zeros for the
    scores it does not give, ``[B, 0]`` for an ownership it does not give."""
    out = tuple(evaluator(states, key))
    if len(out) not in (2, 3, 5, 6):
        raise ValueError(f"an evaluator returns 2, 3, 5 or 6 arrays, not {len(out)}")
    zeros = jnp.zeros(out[1].shape, jnp.float32)
    scores = out[:5] + (zeros,) * (5 - len(out[:5]))
    ownership = out[5] if len(out) == 6 else jnp.zeros(out[1].shape + (0,), jnp.float32)
    return scores + (ownership,)
