"""One interface over the net families: build, encode, initialise, run, evaluate.

A :class:`ModelSpec` names a preset of ``gojax.nn.PRESETS`` and its input
encoder. Everything the learner and self-play need goes through here, so that
neither cares whether the net is AlphaGo Zero's (17 planes, tanh value),
AlphaGo's (48 + 1 feature planes, tanh value) or KataGo's (22 spatial + 19
global features; win/loss/noResult logits, score, ownership)::

    spec = ModelSpec("tiny")
    module = build(spec)
    variables = init_variables(spec, key, size=9)
    out = forward(spec, module, variables, encode(spec, states), train=False)
    out["policy_logits"]  # [B, N*N+1]
    out["value"]          # [B] in [-1, 1], side to move
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from gojax import GoState
from gojax.evaluate import PLANE_ENCODERS, batch_inputs
from gojax.katago_outputs import (
    SHORTTERM_SCORE_ERROR_MULTIPLIER,
    SHORTTERM_VALUE_ERROR_MULTIPLIER,
)
from gojax.nn import ACTIVATIONS, PRESETS, AlphaGoNet, AlphaGoZeroNet, KataGoNet, example_inputs

# The input encoding each net class takes (the planes encoders are gojax.evaluate's).
_ENCODER_OF = {AlphaGoZeroNet: "agz", AlphaGoNet: "alphago", KataGoNet: "katago"}
ENCODERS = ("agz", "alphago", "katago")
DTYPES = ("float32", "bfloat16", "float16")

# KataGo's score head is in units of 20 points; index 2 is the lead, index 1 the
# standard deviation of the final score (20 softplus(raw), as KataGo's engine reads it),
# index 0 KataGo's scoreMean (not trained here: see ``score_mean_from_lead``).
SCORE_SCALE = 20.0
SCORE_MEAN_INDEX = 0
SCORE_STDEV_INDEX = 1
SCORE_LEAD_INDEX = 2

Evaluator = Callable[[GoState, jax.Array], tuple[jax.Array, ...]]


def score_mean_from_lead(params: dict[str, Any]) -> dict[str, Any]:
    """A KataGo net's ``params`` with its trained score channel copied into ``scoreMean``.

    gojax trains one score output, KataGo's lead channel, on the game's final
    score (KataGo's ``scoreMean`` target); the ``scoreMean`` channel stays as
    initialised. Whatever reads ``scoreMean`` -- a model file (``gojax
    export``), the score utility of ``gojax.search``'s ``kind="katago"`` --
    should read the trained prediction. Host-side (NumPy) arrays out.
    """
    head = dict(params["value"]["sv3"])
    for name in ("kernel", "bias"):
        values = np.array(head[name], np.float32)
        values[..., SCORE_MEAN_INDEX] = values[..., SCORE_LEAD_INDEX]
        head[name] = values
    return {**params, "value": {**params["value"], "sv3": head}}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Which net, which inputs, which compute dtype. Hashable: usable as a static argument.

    Attributes:
      preset: a key of ``gojax.nn.PRESETS`` (``"tiny"``, ``"b6c96"``, ``"agz_tiny"``, ...).
      encoder: ``"agz"`` (``gojax.agz_planes``, for ``AlphaGoZeroNet``), ``"alphago"``
        (``gojax.alphago_planes``, for ``AlphaGoNet``) or ``"katago"``
        (``gojax.evaluate.batch_inputs``, for ``KataGoNet``); ``None`` picks the one the
        preset's net takes.
      dtype: compute dtype name; parameters stay float32 whatever it is.
      opponent_policy: KataGo nets only: a second policy output that predicts the
        opponent's reply (KataGo's auxiliary policy target; ``forward`` returns it as
        ``opponent_policy_logits``). Its parameters differ in shape from a plain
        net's, so a checkpoint restores only into the spec it was trained with.
      activation: KataGo nets only: the activation after every BatchNorm and in the
        value head's hidden layer, one of ``gojax.nn.ACTIVATIONS`` (KataGo's current
        runs use ``"mish"``); ``""`` keeps the preset's (``"relu"``).
      short_term_heads: KataGo nets only: KataGo's short-term outputs (its model
        version 12): the value and score lead at three temporal-difference horizons
        (training targets, in no model file), the expected squared error of the
        short-term value and score (score channels 4 and 5, read by KataGo's search
        as uncertainty) and the optimistic policy (policy channel 1; the
        opponent's reply, if any, moves to channel 2). Exports as version 12.
    """

    preset: str = "tiny"
    encoder: str | None = None
    dtype: str = "float32"
    opponent_policy: bool = False
    activation: str = ""
    short_term_heads: bool = False

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; known: {sorted(PRESETS)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, not {self.dtype!r}")
        natural = _natural_encoder(self.preset)
        if self.encoder is None:
            object.__setattr__(self, "encoder", natural)
        elif self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, not {self.encoder!r}")
        elif self.encoder != natural:
            raise ValueError(
                f"preset {self.preset!r} takes {natural!r} inputs, not {self.encoder!r}"
            )
        if self.opponent_policy and natural != "katago":
            raise ValueError(
                f"opponent_policy needs a KataGo-architecture preset, not {self.preset!r}"
            )
        if self.activation and natural != "katago":
            raise ValueError(f"activation needs a KataGo-architecture preset, not {self.preset!r}")
        if self.activation and self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, not {self.activation!r}")
        if self.short_term_heads and natural != "katago":
            raise ValueError(
                f"short_term_heads needs a KataGo-architecture preset, not {self.preset!r}"
            )

    @property
    def is_katago(self) -> bool:
        return self.encoder == "katago"


def spec_from_config(model: Any) -> ModelSpec:
    """The spec of a run config's ``model`` group (a ConfigDict or a saved config's dict;
    a group saved before ``opponent_policy``, ``activation`` or ``short_term_heads``
    existed has none)."""
    get = model.get
    return ModelSpec(
        get("preset"),
        dtype=get("dtype", "float32"),
        opponent_policy=get("opponent_policy", False),
        activation=get("activation", ""),
        short_term_heads=get("short_term_heads", False),
    )


def _natural_encoder(preset: str) -> str:
    ctor = PRESETS[preset]
    return _ENCODER_OF[getattr(ctor, "func", ctor)]


def build(spec: ModelSpec) -> nn.Module:
    """The flax module of ``spec`` (a ``KataGoNet``, ``AlphaGoZeroNet`` or ``AlphaGoNet``)."""
    module = PRESETS[spec.preset](dtype=jnp.dtype(spec.dtype))
    assert isinstance(module, KataGoNet | AlphaGoZeroNet | AlphaGoNet)
    if spec.opponent_policy:
        module = module.clone(config=dataclasses.replace(module.config, policy_outputs=2))
    if spec.activation:
        module = module.clone(config=dataclasses.replace(module.config, activation=spec.activation))
    if spec.short_term_heads:
        config = dataclasses.replace(
            module.config,
            score_channels=6,
            optimistic_policy=True,
            policy_outputs=3 if spec.opponent_policy else 2,
            td_outputs=True,
        )
        module = module.clone(config=config)
    return module


def encode(spec: ModelSpec, states: GoState) -> tuple[jax.Array, ...]:
    """Net inputs of ``[B]`` states, as a tuple of positional arguments.

    ``agz``: ``(planes [B, N, N, 17],)``; ``alphago``: ``(planes [B, N, N, 49],)``;
    ``katago``: ``(spatial [B, N, N, 22], global [B, 19])``. All float32.
    """
    if spec.is_katago:
        spatial, global_features = batch_inputs(states)
        return spatial.astype(jnp.float32), global_features.astype(jnp.float32)
    return (jax.vmap(PLANE_ENCODERS[spec.encoder])(states).astype(jnp.float32),)


def dummy_inputs(spec: ModelSpec, batch: int, size: int) -> tuple[jax.Array, ...]:
    """All-on-board zero inputs of ``encode``'s shapes (for init and tests)."""
    return example_inputs(build(spec), batch, size)


def init_variables(spec: ModelSpec, key: jax.Array, size: int) -> dict[str, Any]:
    """``{"params", "batch_stats"}`` for ``size x size`` boards (the dense layers of AlphaGo
    Zero's and AlphaGo's nets fix it); ``batch_stats`` is empty for nets without BN."""
    module = build(spec)
    variables = module.init(key, *dummy_inputs(spec, 1, size), train=False)
    return {"params": variables["params"], "batch_stats": variables.get("batch_stats", {})}


def win_loss(logits: jax.Array) -> jax.Array:
    """Expected win minus loss ``[...]`` of KataGo's ``[..., 3]`` value logits (win, loss,
    noResult), in [-1, 1]: the value a search backs up."""
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    return probs[..., 0] - probs[..., 1]


def forward(
    spec: ModelSpec,
    module: nn.Module,
    variables: dict[str, Any],
    inputs: tuple[jax.Array, ...],
    train: bool,
) -> dict[str, Any]:
    """Run the net; outputs for the side to move.

    Returns a dict with ``policy_logits [B, A]`` (``A = N*N + 1``, pass last) and
    ``value [B]`` in [-1, 1]; KataGo nets add ``value_logits [B, 3]`` (win, loss,
    noResult), ``score_lead [B]`` (points), ``score_stdev [B]`` (points, the
    predicted spread of the final score) and ``ownership [B, N*N]`` (tanh, in
    [-1, 1]); ``ownership_logits [B, N*N]`` is the raw head, ``tanh`` of which is
    ``ownership``; with ``spec.opponent_policy``, ``opponent_policy_logits [B, A]``
    (the opponent's reply). With ``spec.short_term_heads``:
    ``optimistic_policy_logits [B, A]``, ``td_value_logits [B, 3, 3]`` (horizons long,
    mid, short; win, loss, noResult), ``td_score [B, 3]`` (points),
    ``shortterm_value_error [B]`` and ``shortterm_score_error [B]`` (predicted
    squared errors of the short-term value and of the short-term score, points^2).
    With ``train=True`` the BNs use batch statistics and the dict also holds the
    updated ``batch_stats``.
    """
    if train:
        raw, updates = module.apply(variables, *inputs, train=True, mutable=["batch_stats"])
    else:
        raw, updates = module.apply(variables, *inputs, train=False), None
    out: dict[str, Any] = {"policy_logits": raw["policy_logits"]}
    if spec.is_katago:
        out["value"] = win_loss(raw["value_logits"])
        out["value_logits"] = raw["value_logits"]
        score = raw["score"].astype(jnp.float32)
        out["score_lead"] = score[:, SCORE_LEAD_INDEX] * SCORE_SCALE
        out["score_stdev"] = jax.nn.softplus(score[:, SCORE_STDEV_INDEX]) * SCORE_SCALE
        out["ownership_logits"] = raw["ownership"]
        out["ownership"] = jnp.tanh(raw["ownership"])
        if spec.opponent_policy:
            out["opponent_policy_logits"] = raw["opponent_policy_logits"]
        if spec.short_term_heads:
            out["optimistic_policy_logits"] = raw["optimistic_policy_logits"]
            out["td_value_logits"] = raw["td_value_logits"]
            out["td_score"] = raw["td_score"] * SCORE_SCALE
            # Variances, as KataGo's engine reads channels 4 and 5 up to model version 12
            # (it reports their square roots).
            errors = jax.nn.softplus(score[:, 4:6])
            out["shortterm_value_error"] = SHORTTERM_VALUE_ERROR_MULTIPLIER * errors[:, 0]
            out["shortterm_score_error"] = SHORTTERM_SCORE_ERROR_MULTIPLIER * errors[:, 1]
    else:
        out["value"] = raw["value"]
    if updates is not None:
        out["batch_stats"] = updates.get("batch_stats", {})
    return out


def evaluator(spec: ModelSpec, module: nn.Module, variables: dict[str, Any]) -> Evaluator:
    """A ``gojax.search`` evaluator ``(states [B], key) -> (prior_logits [B, A], value [B])``;
    KataGo nets add ``score_lead [B]`` (the search averages it over the tree) and the score
    distribution KataGo's search weighs (``SearchConfig.weighs_scores``): its mean, the
    trained lead channel as ``score_mean_from_lead`` reads it, and ``score_stdev [B]``
    (trained only with ``learner.score_stdev_weight > 0``; else as initialised).

    Inference mode (running BN statistics), no symmetry. The logits are the
    net's own; the search masks illegal moves. Build it inside the jitted
    function that searches so that ``variables`` are traced, not baked in.
    """

    def evaluate_leaves(states: GoState, key: jax.Array) -> tuple[jax.Array, ...]:
        del key
        out = forward(spec, module, variables, encode(spec, states), train=False)
        if spec.is_katago:
            lead = out["score_lead"]
            return out["policy_logits"], out["value"], lead, lead, out["score_stdev"]
        return out["policy_logits"], out["value"]

    return evaluate_leaves
