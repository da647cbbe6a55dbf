"""Batched network evaluation of Go positions: features, symmetry, net, post-processing.

``evaluate(net, variables, states)`` takes ``[B]`` stacked ``GoState`` (one
board size and rule preset per batch) and returns KataGo's numbers, from
White's view, for every position:

* ``policy [B, P+1]``: move probabilities over legal moves, pass last;
* ``white_win``, ``white_loss``, ``no_result``, ``white_lead``,
  ``white_score_selfplay``, ``score_stdev`` ... ``[B]``;
* ``white_ownership [B, P]`` in [-1, 1];
* ``value [B]``: ``white_win - white_loss`` seen by the player to move
  (``+1`` a sure win for the player to move), what tree search backs up;
* ``legal [B, P+1]`` bool: the moves the policy is spread over (KataGo's
  legality: a finished game is judged as if it went on; pass always legal).

Symmetry (``symmetry=``): an int 0..7 evaluates every position under that
board symmetry (KataGo numbering, see ``gojax.transform_planes``) and maps the
outputs back; ``"random"`` draws one per position from ``key``; ``"average"``
evaluates all 8 and averages the post-processed outputs (probabilities,
values, ownership), as KataGo does when it averages symmetries.

AlphaGo Zero nets (``gojax.nn.AlphaGoZeroNet``, e.g. one trained by ``gojax
train``) are evaluated with ``version="agz"``: 17 input planes, the policy
and the tanh value; AlphaGo's (``gojax.nn.AlphaGoNet``) with
``version="alphago"``: its 49 feature planes. They have no score or ownership
head, so ``white_lead``, ``white_score_selfplay`` and ``score_stdev`` are 0,
``white_ownership`` is 0 everywhere and ``no_result`` is 0; ``white_win`` is
``(1 + v) / 2`` for White's value ``v``.

Everything is jittable; ``net``, ``version`` and ``symmetry`` are static:

>>> model = load_model("g170-b6c96.bin.gz")                  # doctest: +SKIP
>>> run = make_evaluator(model, symmetry="average")          # doctest: +SKIP
>>> out = run(model.variables, states)                       # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from gojax._alphago_features import alphago_planes
from gojax._board import GoState, legal_moves
from gojax._features import agz_planes
from gojax._symmetry import NUM_SYMMETRIES, inverse_symmetry, transform_board, transform_planes
from gojax.katago_features import katago_inputs
from gojax.katago_outputs import OutputSpec, postprocess
from gojax.nn import KataGoNet, apply_in_chunks, default_chunk

SYMMETRY_MODES = ("random", "average")
AGZ = "agz"  # the ``version`` of AlphaGo Zero nets
ALPHAGO = "alphago"  # the ``version`` of AlphaGo's nets
# Nets on input planes of one state (no KataGo features): the planes function by ``version``.
PLANE_ENCODERS = {AGZ: agz_planes, ALPHAGO: alphago_planes}

# Outputs that are maps over the board and must be mapped back through the symmetry.
_BOARD_OUTPUTS = ("policy_logits", "ownership")

# KataGo's search settings for nets with an optimistic policy head (model version >= 12)
# in its GTP and analysis engines: the prior mixes in that head, a little at the root
# (rootPolicyOptimism) and fully below it (policyOptimism). See gojax.nn.KataGoNet.
KATAGO_ROOT_POLICY_OPTIMISM = 0.2
KATAGO_POLICY_OPTIMISM = 1.0


def has_score_head(version: Any) -> bool:
    """Whether nets of this ``version`` predict a score (KataGo's do; AlphaGo Zero's and
    AlphaGo's, ``version`` ``"agz"`` / ``"alphago"``, do not)."""
    return not (isinstance(version, str) and version in PLANE_ENCODERS)


def check_symmetry(symmetry: int | str) -> int | str:
    """Validate a ``symmetry`` argument: an int 0..7, ``"random"`` or ``"average"``."""
    if isinstance(symmetry, str):
        if symmetry not in SYMMETRY_MODES:
            raise ValueError(f"symmetry must be 0..7, 'random' or 'average', not {symmetry!r}")
        return symmetry
    if isinstance(symmetry, bool) or not 0 <= int(symmetry) < NUM_SYMMETRIES:
        raise ValueError(f"symmetry must be 0..7, 'random' or 'average', not {symmetry!r}")
    return int(symmetry)


# On a CPU, batches smaller than this compute their features position after position.
MIN_SHARED_BATCH_CPU = 8


def batch_inputs(states: GoState) -> tuple[jax.Array, jax.Array]:
    """KataGo inputs of ``[B]`` states: ``spatial [B, N, N, 22]``, ``global [B, 19]``.

    The ladder searches of the whole batch (three boards a position) go in one
    call: on an accelerator one loop whose lanes take chains from any board as
    they come free, on a CPU a native search with the boards shared out over
    the threads (``gojax._ladders``). On a CPU a small batch goes position after
    position (``lax.map``) instead: below 8 positions that was as fast or faster
    with either search (native, 19x19: 0.25 vs 0.30 ms a position at 1, equal
    at 4, 0.30 vs 0.20 at 8; with the JAX loop, batches of 32 reference
    positions: 2.4 vs 3.0 ms a 19x19 position). The features are identical
    either way.
    """
    if jax.default_backend() == "cpu" and states.board.shape[0] < MIN_SHARED_BATCH_CPU:
        return jax.lax.map(katago_inputs, states)
    return jax.vmap(katago_inputs)(states)


def _apply_net(
    net: KataGoNet,
    variables: Any,
    spatial: jax.Array,
    global_features: jax.Array,
    symmetries: jax.Array,
) -> dict[str, jax.Array]:
    """Run ``net`` on inputs turned by per-position ``symmetries [B]``; outputs turned back."""
    turned = jax.vmap(transform_planes)(spatial, symmetries)
    chunk = default_chunk(spatial.shape[1])  # spatial: [B, size, size, planes]
    raw = apply_in_chunks(net, variables, turned, global_features, chunk=chunk)
    back = inverse_symmetry(symmetries)
    out = dict(raw)
    out["ownership"] = jax.vmap(transform_board)(raw["ownership"], back)
    for name in raw:
        if name.endswith("policy_logits"):  # the move's, and the optimistic one if any
            board = jax.vmap(transform_board)(raw[name][:, :-1], back)
            out[name] = jnp.concatenate([board, raw[name][:, -1:]], axis=-1)
    return out


def _tile8(x: jax.Array) -> jax.Array:
    """``[B, ...]`` -> ``[8 * B, ...]``, the batch repeated once per symmetry."""
    return jnp.tile(x, (NUM_SYMMETRIES,) + (1,) * (x.ndim - 1))


def _postprocess(
    raw: dict[str, jax.Array], states: GoState, legal: jax.Array, version: int | OutputSpec
) -> dict[str, jax.Array]:
    out = postprocess(
        raw,
        legal,
        states.to_play,
        rules_ko_simple=~jnp.asarray(states.rule_values.superko),
        territory_scoring=states.rule_values.territory,
        version=version,
    )
    white_value = out["white_win"] - out["white_loss"]
    out["value"] = jnp.where(states.to_play == 1, -white_value, white_value)
    return out


def _planes_outputs(
    net: Any,
    variables: Any,
    states: GoState,
    legal: jax.Array,
    symmetries: jax.Array,
    version: str,
) -> dict[str, jax.Array]:
    """An AlphaGo Zero or AlphaGo net's outputs in ``evaluate``'s format (see the module
    docstring)."""
    planes = jax.vmap(PLANE_ENCODERS[version])(states)
    raw = net.apply(variables, jax.vmap(transform_planes)(planes, symmetries), train=False)
    logits = raw["policy_logits"].astype(jnp.float32)
    board = jax.vmap(transform_board)(logits[:, :-1], inverse_symmetry(symmetries))
    logits = jnp.concatenate([board, logits[:, -1:]], axis=-1)
    policy = jax.nn.softmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
    value = raw["value"].astype(jnp.float32)  # the player to move's
    white_win = (1.0 + jnp.where(states.to_play == 1, -value, value)) / 2.0
    zeros = jnp.zeros_like(value)
    return {
        "policy": policy,
        "white_win": white_win,
        "white_loss": 1.0 - white_win,
        "no_result": zeros,
        "white_lead": zeros,
        "white_score_selfplay": zeros,
        "white_score_selfplay_sq": zeros,
        "score_stdev": zeros,
        "white_ownership": jnp.zeros(states.board.shape, jnp.float32),
        "value": value,
    }


def _outputs(net, variables, states, spatial, global_features, legal, syms, version):
    """Post-processed outputs of ``[B]`` positions under per-position symmetries ``syms``."""
    if version in PLANE_ENCODERS:
        return _planes_outputs(net, variables, states, legal, syms, version)
    raw = _apply_net(net, variables, spatial, global_features, syms)
    return _postprocess(raw, states, legal, version)


def evaluate(
    net: KataGoNet,
    variables: Any,
    states: GoState,
    *,
    version: int | str | OutputSpec = 8,
    symmetry: int | str = 0,
    key: jax.Array | None = None,
    symmetries: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """Evaluate ``[B]`` positions; see the module docstring for the outputs.

    Args:
      net: a ``KataGoNet`` (for a loaded file, ``model.module()``).
      variables: its ``{"params", "batch_stats"}``.
      states: ``[B]`` stacked states of one board size and rule preset.
      version: KataGo model version of the net (8-17) or, for a loaded file,
        ``model.output_spec`` (versions >= 13 store their output multipliers);
        ``"agz"`` for an AlphaGo Zero net or ``"alphago"`` for an AlphaGo net; static.
      symmetry: 0..7, ``"random"`` (needs ``key``) or ``"average"``, static.
      key: PRNG key for ``symmetry="random"``.
      symmetries: optional ``[B]`` int, one symmetry per position (may be
        traced); overrides ``symmetry``.
    """
    symmetry = check_symmetry(symmetry)
    batch = states.to_play.shape[0]
    if version in PLANE_ENCODERS:  # no KataGo features to compute
        spatial = global_features = jnp.zeros((batch, 0), jnp.float32)
    else:
        spatial, global_features = batch_inputs(states)
    # KataGo judges legality in a finished game as if it went on, and always allows pass.
    live = states.replace(terminated=jnp.zeros_like(states.terminated))
    legal = jax.vmap(legal_moves)(live).at[:, -1].set(True)

    if symmetries is not None:
        syms = jnp.asarray(symmetries, jnp.int32).reshape(batch)
        out = _outputs(net, variables, states, spatial, global_features, legal, syms, version)
        return {**out, "legal": legal}

    if symmetry == "average":
        spatial8 = _tile8(spatial)
        global8 = _tile8(global_features)
        syms = jnp.repeat(jnp.arange(NUM_SYMMETRIES, dtype=jnp.int32), batch)
        states8 = jax.tree.map(_tile8, states)
        outs = _outputs(net, variables, states8, spatial8, global8, _tile8(legal), syms, version)
        mean = {k: v.reshape(NUM_SYMMETRIES, batch, *v.shape[1:]).mean(0) for k, v in outs.items()}
        return {**mean, "legal": legal}

    if symmetry == "random":
        if key is None:
            raise ValueError("symmetry='random' needs a PRNG key")
        syms = jax.random.randint(key, (batch,), 0, NUM_SYMMETRIES, dtype=jnp.int32)
    else:
        syms = jnp.full((batch,), symmetry, jnp.int32)
    out = _outputs(net, variables, states, spatial, global_features, legal, syms, version)
    return {**out, "legal": legal}


def make_evaluator(
    model: Any,
    *,
    symmetry: int | str = 0,
    dtype: Any = jnp.float32,
    policy_optimism: float = 0.0,
) -> Callable[..., dict[str, jax.Array]]:
    """A jitted ``run(variables, states, key=None)`` for a loaded ``KataGoModel``
    (``policy_optimism``: see ``gojax.nn.KataGoNet``; versions >= 12 only)."""
    net = model.module(dtype=dtype, policy_optimism=policy_optimism)
    fn = functools.partial(
        evaluate, net, version=model.output_spec, symmetry=check_symmetry(symmetry)
    )
    return jax.jit(fn)
