"""KataGo's residual net (``gojax.nn.KataGoNet``): its config, its residual blocks
(ordinary, global-pooling, nested bottleneck), its policy and value heads and the trunk
that joins them. The module docstring of ``gojax.nn`` describes the architecture, the
masking and the outputs.

Separate from the AlphaGo nets (``gojax._alphago_nets``) and from the presets: this is
the one net whose layout must match KataGo's model files (``gojax.katago_model`` reads
and writes its parameters). Public through ``gojax.nn``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from gojax._nn_layers import (
    ACTIVATIONS,
    BLOCK_KINDS,
    BN_EPSILON,
    NESTED,
    ORDINARY,
    _bn_relu_in,
    _conv,
    _conv_by,
    _Kernel,
    _SameConv,
    activate,
    global_pool,
    value_pool,
)


@dataclasses.dataclass(frozen=True)
class KataGoConfig:
    """Shape of a KataGo net (hashable, so it can be a Flax module attribute).

    Attributes:
      blocks: kind of each residual block in order, ``"ordinary"``, ``"gpool"`` or a
        nested bottleneck block ``("nested", kind, ...)`` (KataGo's
        ``nested_bottleneck_block``, the "nbt" nets): a 1x1 convolution from ``C`` down
        to ``mid_channels``, the inner ordinary/gpool blocks on a ``mid_channels``-wide
        stream, a 1x1 convolution back up to ``C``, all one residual step.
      trunk_channels: residual stream width ``C``.
      mid_channels: inner width of ordinary blocks (and the stream of nested ones).
      regular_channels: inner width of the regular path of gpool blocks.
      gpool_channels: width of the pooled path of gpool blocks.
      policy_channels: policy head conv width (``p1``).
      policy_gpool_channels: policy head pooled-path width (``g1``).
      value_channels: value head conv width (``v1``).
      value_hidden: value head hidden layer width (``v2``).
      score_channels: raw score outputs: 4 for model version 8, 6 from version 9.
      num_spatial: spatial input planes (22 for KataGo's input version 7).
      num_global: global inputs (19 for input version 7).
      initial_kernel: side of the first conv (5 in g170 nets).
      block_kernel: side of the convs inside residual blocks (3).
      bn_epsilon: BatchNorm epsilon.
      policy_outputs: policy head output channels: 1 (the move to play), or 2 (and
        the opponent's reply after it, KataGo's auxiliary target; Wu 2019, sec. 4.1);
        with ``optimistic_policy`` 2 or 4 (KataGo model versions 12-15 and 16), or 3
        (a net in training: channel 2 is the opponent's reply).
      optimistic_policy: channel 1 is KataGo's "optimistic" policy (model version >= 12)
        rather than the opponent's reply; channels 2 and 3 of a version-16 net (Q-value
        predictions) are computed and not returned, as KataGo's engine ignores them.
      td_outputs: the value head also predicts, from its hidden layer, the value
        (``[win, loss, noResult]`` logits) and the score lead (units of 20 points) at
        KataGo's three temporal-difference horizons (long, mid, short): training
        targets only, for the short-term error outputs (``score_channels`` 6).
      activation: the activation after every BatchNorm and of the value head's hidden
        layer: ``"relu"`` (every net before model version 11), ``"mish"``, ``"silu"``.
      pass_activation: ``None``: the pass logits are one bias-free matmul of the policy
        head's pooled vector (model version < 15); else (version >= 15) a hidden layer
        of ``policy_channels`` units with a bias and this activation comes first.
    """

    blocks: tuple[str | tuple[str, ...], ...]
    trunk_channels: int
    mid_channels: int
    regular_channels: int
    gpool_channels: int
    policy_channels: int
    policy_gpool_channels: int
    value_channels: int
    value_hidden: int
    score_channels: int = 4
    num_spatial: int = 22
    num_global: int = 19
    initial_kernel: int = 5
    block_kernel: int = 3
    bn_epsilon: float = BN_EPSILON
    policy_outputs: int = 1
    optimistic_policy: bool = False
    td_outputs: bool = False
    activation: str = "relu"
    pass_activation: str | None = None

    def __post_init__(self) -> None:
        for block in self.blocks:
            inner = block[1:] if isinstance(block, tuple) and block[:1] == (NESTED,) else (block,)
            unknown = [kind for kind in inner if kind not in BLOCK_KINDS]
            if unknown or not inner:
                raise ValueError(
                    f"unknown block {block!r} (known: {BLOCK_KINDS}, or ({NESTED!r}, kind, ...) "
                    "of those)"
                )
        if self.score_channels not in (4, 6):
            raise ValueError(f"score_channels must be 4 or 6, not {self.score_channels}")
        allowed = (2, 3, 4) if self.optimistic_policy else (1, 2)
        if self.policy_outputs not in allowed:
            with_optimistic = " with optimistic_policy" if self.optimistic_policy else ""
            choices = ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}"
            raise ValueError(
                f"policy_outputs must be {choices}{with_optimistic}, not {self.policy_outputs}"
            )
        for name in ("activation", "pass_activation"):
            value = getattr(self, name)
            if value not in ACTIVATIONS and not (name == "pass_activation" and value is None):
                raise ValueError(f"{name} must be one of {ACTIVATIONS}, not {value!r}")


class _OrdinaryBlock(nn.Module):
    """Pre-activation residual block: ``x + w2(bnrelu(w1(bnrelu(x))))``. ``[B,H,W,C]``.

    ``C`` is the trunk's width, or ``mid_channels`` inside a nested bottleneck block.
    """

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, train: bool) -> jax.Array:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        k = cfg.block_kernel
        h = bnr("norm1", x)
        h = _SameConv(cfg.mid_channels, k, self.dtype, name="w1")(h)
        h = bnr("norm2", h)
        h = _SameConv(x.shape[-1], k, self.dtype, name="w2")(h)
        return x + h


class _GPoolBlock(nn.Module):
    """Residual block whose regular path gets a channel bias from a pooled path. ``[B,H,W,C]``
    (``C`` as in ``_OrdinaryBlock``)."""

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, train: bool) -> jax.Array:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        k = cfg.block_kernel
        a = bnr("norm1", x)
        # The regular and pooled paths read the same input: one convolution with both
        # kernels side by side (bit-identical outputs; 96 -> 64 + 32 channels on 19x19 at
        # batch 16 took 2.49 ms as two Eigen convolutions, 2.21 ms as one).
        w1a = _Kernel(cfg.regular_channels, k, name="w1a")(a.shape[-1])
        w1b = _Kernel(cfg.gpool_channels, k, name="w1b")(a.shape[-1])
        both = jnp.concatenate([w1a, w1b], axis=-1).astype(self.dtype)
        r, g = jnp.split(
            _conv_by(self, a.astype(self.dtype), both, keep_kernel=True),
            [cfg.regular_channels],
            axis=-1,
        )
        g = bnr("norm1b", g)
        pooled = global_pool(g, mask)  # [B, 3 * gpool_channels]
        bias = nn.Dense(cfg.regular_channels, use_bias=False, dtype=self.dtype, name="w1r")(pooled)
        r = r + bias[:, None, None, :].astype(r.dtype)
        h = bnr("norm2", r)
        h = _SameConv(x.shape[-1], k, self.dtype, name="w2")(h)
        return x + h


class _NestedBlock(nn.Module):
    """KataGo's nested bottleneck block ``(NESTED, kind, ...)``: ``[B,H,W,C]``.

    ``x + wq(bnrelu(blocks(wp(bnrelu(x)))))``: 1x1 convolutions ``wp`` (``C`` to
    ``mid_channels``) and ``wq`` (back), with the inner residual blocks (``inner1``,
    ...) on the ``mid_channels``-wide stream between them.
    """

    config: KataGoConfig
    kinds: tuple[str, ...]
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, train: bool) -> jax.Array:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        h = _conv(cfg.mid_channels, 1, "wp", self.dtype)(bnr("normp", x))
        kw = dict(config=cfg, dtype=self.dtype, bn_momentum=self.bn_momentum)
        for i, kind in enumerate(self.kinds):
            block = _OrdinaryBlock if kind == ORDINARY else _GPoolBlock
            h = block(**kw, name=f"inner{i + 1}")(h, mask, train)
        return x + _conv(x.shape[-1], 1, "wq", self.dtype)(bnr("normq", h))


class _PolicyHead(nn.Module):
    """Board logits ``[B, H*W, K]`` and pass logits ``[B, K]`` from the trunk ``[B,H,W,C]``
    (``K = policy_outputs``)."""

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, t: jax.Array, mask: jax.Array, train: bool) -> tuple[jax.Array, jax.Array]:
        cfg = self.config
        bnr = _bn_relu_in(self, mask, train)
        p = _conv(cfg.policy_channels, 1, "p1", self.dtype)(t)
        g = bnr("g1_norm", _conv(cfg.policy_gpool_channels, 1, "g1", self.dtype)(t))
        pooled = global_pool(g, mask)
        bias = nn.Dense(cfg.policy_channels, use_bias=False, dtype=self.dtype, name="g2")(pooled)
        p = bnr("p1_norm", p + bias[:, None, None, :].astype(p.dtype))
        k = cfg.policy_outputs
        board = _conv(k, 1, "p2", self.dtype)(p)
        if cfg.pass_activation is None:
            # Version < 15: the pass logit is one bias-free matmul of the same pooled vector.
            pass_logit = nn.Dense(k, use_bias=False, dtype=self.dtype, name="pass")(pooled)
        else:
            hidden = nn.Dense(cfg.policy_channels, dtype=self.dtype, name="pass1")(pooled)
            hidden = activate(cfg.pass_activation, hidden)
            pass_logit = nn.Dense(k, use_bias=False, dtype=self.dtype, name="pass")(hidden)
        b, h, w, _ = board.shape
        return board.reshape(b, h * w, k), pass_logit


class _ValueHead(nn.Module):
    """Value logits ``[B, 3]``, score ``[B, 4|6]`` and ownership ``[B, H*W]``; with
    ``td_outputs`` also ``td_value_logits [B, 3, 3]`` (horizon, outcome) and raw
    ``td_score [B, 3]`` (units of 20 points)."""

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99

    @nn.compact
    def __call__(self, t: jax.Array, mask: jax.Array, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        v = _conv(cfg.value_channels, 1, "v1", self.dtype)(t)
        v = _bn_relu_in(self, mask, train)("v1_norm", v)  # [B, H, W, value_channels]
        pooled = value_pool(v, mask)
        h = activate(
            cfg.activation, nn.Dense(cfg.value_hidden, dtype=self.dtype, name="v2")(pooled)
        )
        value_logits = nn.Dense(3, dtype=self.dtype, name="v3")(h)
        score = nn.Dense(cfg.score_channels, dtype=self.dtype, name="sv3")(h)
        own = _conv(1, 1, "ownership", self.dtype)(v)
        b, hh, ww, _ = own.shape
        out = {"value_logits": value_logits, "score": score, "ownership": own.reshape(b, hh * ww)}
        if cfg.td_outputs:
            td = nn.Dense(3 * 3 + 3, dtype=self.dtype, name="td")(h)
            out["td_value_logits"] = td[:, :9].reshape(b, 3, 3)
            out["td_score"] = td[:, 9:]
        return out


class KataGoNet(nn.Module):
    """KataGo's residual net with global pooling (see the module docstring).

    Call with ``spatial [B, H, W, num_spatial]`` (plane 0 = on board) and
    ``global_features [B, num_global]``; returns float32 ``policy_logits
    [B, H*W+1]``, ``value_logits [B, 3]``, ``score [B, score_channels]``,
    ``ownership [B, H*W]`` (and ``opponent_policy_logits [B, H*W+1]`` when
    ``config.policy_outputs == 2``, or 3 with the optimistic policy;
    ``optimistic_policy_logits [B, H*W+1]`` with ``config.optimistic_policy``;
    ``td_value_logits [B, 3, 3]`` and ``td_score [B, 3]`` with
    ``config.td_outputs``). With ``train=True`` the BNs use batch statistics
    and the ``batch_stats`` collection must be mutable.

    ``policy_optimism`` (KataGo model versions >= 12): ``policy_logits`` become
    ``p + (p_optimistic - p) * policy_optimism``, as KataGo's ``policyOptimism``
    (its GTP engine: 0.2 at the root of a search, 1.0 below it, 0.2 for
    ``kata-raw-nn``).
    """

    config: KataGoConfig
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99
    policy_optimism: float = 0.0

    @nn.compact
    def __call__(
        self, spatial: jax.Array, global_features: jax.Array, train: bool = False
    ) -> dict[str, jax.Array]:
        cfg = self.config
        if spatial.shape[-1] != cfg.num_spatial or global_features.shape[-1] != cfg.num_global:
            raise ValueError(
                f"expected {cfg.num_spatial} spatial and {cfg.num_global} global inputs, got "
                f"{spatial.shape[-1]} and {global_features.shape[-1]}"
            )
        mask = spatial[..., :1].astype(self.dtype)  # [B, H, W, 1]
        x = _conv(cfg.trunk_channels, cfg.initial_kernel, "conv1", self.dtype)(spatial)
        g = nn.Dense(cfg.trunk_channels, use_bias=False, dtype=self.dtype, name="ginput")(
            global_features
        )
        x = x + g[:, None, None, :].astype(x.dtype)
        kw = dict(config=cfg, dtype=self.dtype, bn_momentum=self.bn_momentum)
        for i, kind in enumerate(cfg.blocks):
            name = f"rconv{i + 1}"
            if isinstance(kind, tuple):
                x = _NestedBlock(**kw, kinds=kind[1:], name=name)(x, mask, train)
            else:
                block = _OrdinaryBlock if kind == ORDINARY else _GPoolBlock
                x = block(**kw, name=name)(x, mask, train)
        trunk = _bn_relu_in(self, mask, train)("trunk_norm", x)
        board, pass_logit = _PolicyHead(**kw, name="policy")(trunk, mask, train)
        value = _ValueHead(**kw, name="value")(trunk, mask, train)
        logits = jnp.concatenate([board, pass_logit[:, None, :]], axis=1)  # [B, H*W+1, K]
        out = {"policy_logits": logits[..., 0], **value}
        if cfg.optimistic_policy:
            optimistic = logits[..., 1]
            out["optimistic_policy_logits"] = optimistic
            if self.policy_optimism:
                # KataGo mixes the logits: p + (p_optimistic - p) * optimism.
                out["policy_logits"] = out["policy_logits"] + self.policy_optimism * (
                    optimistic - out["policy_logits"]
                )
            if cfg.policy_outputs == 3:
                out["opponent_policy_logits"] = logits[..., 2]
        elif cfg.policy_outputs == 2:
            out["opponent_policy_logits"] = logits[..., 1]
        return {k: v.astype(jnp.float32) for k, v in out.items()}
