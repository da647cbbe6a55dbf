"""AlphaGo Zero's dual-head residual net and AlphaGo's pair of policy and value nets
(``gojax.nn.AlphaGoZeroNet``, ``gojax.nn.AlphaGoNet``), as their papers describe them.

Separate from KataGo's net: they read other inputs (``gojax.agz_planes``,
``gojax.alphago_planes``), return a tanh value rather than KataGo's heads, and have no
model file format. Public through ``gojax.nn``.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from gojax._nn_layers import BN_EPSILON, _conv, _InputConv, _SameConv


class _AGZResBlock(nn.Module):
    """AlphaGo Zero residual block: ``relu(x + bn(conv(relu(bn(conv(x))))))``. ``[B,N,N,C]``.

    ``residual=False``: the same two layers without the skip, ``relu(bn(conv(relu(bn(conv(x))))))``.
    """

    channels: int
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99
    bn_epsilon: float = BN_EPSILON
    residual: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        bn = functools.partial(
            nn.BatchNorm,
            use_running_average=not train,
            momentum=self.bn_momentum,
            epsilon=self.bn_epsilon,
            dtype=self.dtype,
        )
        h = nn.relu(bn(name="bn1")(_SameConv(self.channels, 3, self.dtype, name="conv1")(x)))
        h = bn(name="bn2")(_SameConv(self.channels, 3, self.dtype, name="conv2")(h))
        return nn.relu(x + h if self.residual else h)


class AlphaGoZeroNet(nn.Module):
    """AlphaGo Zero's dual-head residual net (Silver et al. 2017, Methods).

    Input ``planes [B, N, N, 17]`` (``gojax.agz_planes``); returns float32
    ``policy_logits [B, N*N+1]`` (row-major from the top row, then pass) and
    ``value [B]`` in [-1, 1] for the side to move. The dense layers fix ``N``
    at ``init``.

    The variants the paper compares in its Fig. 4: ``residual=False`` ("conv")
    drops the blocks' skip connections, leaving a plain stack of
    ``2 * num_blocks + 1`` convolutions; ``separate=True`` ("sep") gives the
    value head a tower of its own (``value_tower_*``), so that the policy and
    the value are two networks in one module, each trained by its own loss
    alone. The default is the paper's "dual-res".
    """

    num_blocks: int = 19
    channels: int = 256
    value_hidden: int = 256
    num_planes: int = 17
    dtype: Any = jnp.float32
    bn_momentum: float = 0.99
    bn_epsilon: float = BN_EPSILON
    residual: bool = True
    separate: bool = False

    @nn.compact
    def __call__(self, planes: jax.Array, train: bool = False) -> dict[str, jax.Array]:
        if planes.shape[-1] != self.num_planes:
            raise ValueError(f"expected {self.num_planes} input planes, got {planes.shape[-1]}")
        bn = functools.partial(
            nn.BatchNorm,
            use_running_average=not train,
            momentum=self.bn_momentum,
            epsilon=self.bn_epsilon,
            dtype=self.dtype,
        )
        b, n, m, _ = planes.shape

        def tower(prefix: str) -> jax.Array:
            conv = _InputConv(self.channels, 3, self.dtype, name=f"{prefix}conv")
            x = nn.relu(bn(name=f"{prefix}bn")(conv(planes)))
            for i in range(self.num_blocks):
                x = _AGZResBlock(
                    self.channels,
                    self.dtype,
                    self.bn_momentum,
                    self.bn_epsilon,
                    residual=self.residual,
                    name=f"{prefix}block{i + 1}",
                )(x, train)
            return x

        x = tower("")
        value_x = tower("value_tower_") if self.separate else x
        p = nn.relu(bn(name="policy_bn")(_conv(2, 1, "policy_conv", self.dtype)(x)))
        policy = nn.Dense(n * m + 1, dtype=self.dtype, name="policy_fc")(p.reshape(b, -1))
        v = nn.relu(bn(name="value_bn")(_conv(1, 1, "value_conv", self.dtype)(value_x)))
        v = nn.relu(
            nn.Dense(self.value_hidden, dtype=self.dtype, name="value_fc1")(v.reshape(b, -1))
        )
        value = jnp.tanh(nn.Dense(1, dtype=self.dtype, name="value_fc2")(v))[:, 0]
        return {"policy_logits": policy.astype(jnp.float32), "value": value.astype(jnp.float32)}


class _ConvTower(nn.Module):
    """AlphaGo's convolutional layers: a 5x5 convolution, then ``num_layers - 1`` 3x3 ones,
    ``filters`` each, with biases and ReLU, no normalisation. ``[B, N, N, C] -> [B, N, N, F]``."""

    filters: int
    num_layers: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(self.num_layers):
            if i == 0:
                conv = _InputConv(self.filters, 5, self.dtype, name="conv1")
            else:
                conv = _SameConv(self.filters, 3, self.dtype, name=f"conv{i + 1}")
            bias = self.param(f"bias{i + 1}", nn.initializers.zeros, (self.filters,), jnp.float32)
            x = nn.relu(conv(x) + bias.astype(self.dtype))
        return x


class AlphaGoNet(nn.Module):
    """AlphaGo's policy and value networks (Silver et al. 2016, Methods), side by side.

    Input ``planes [B, N, N, 49]`` (``gojax.alphago_planes``). Returns float32
    ``policy_logits [B, N*N+1]`` (pass last) and ``value [B]`` in [-1, 1] for the
    side to move, from two networks that share nothing:

    * policy: the first 48 planes; a 5x5 convolution and ``num_layers - 2`` 3x3
      ones (``filters`` each, ReLU), then a 1x1 convolution to one filter with a
      bias of its own at every point. The paper's net has no pass output; here
      pass gets one logit, linear in the last hidden layer's mean over the board.
    * value: all 49 planes; the same convolutions, a 1x1 convolution to one
      filter (ReLU), a dense layer of ``value_hidden`` (ReLU), one tanh unit.

    The paper's nets: ``num_layers=13`` and ``filters=192`` (the match version;
    it also tried 128, 256 and 384). No batch norm. The per-point biases and the
    dense layer fix ``N`` at ``init``.

    ``raw_inputs`` ablates the hand-made features as the paper did: the net
    zeroes planes 12-47 and sees only the board, the move history (turns since)
    and the colour, the same parameters (the paper: 57.0% of expert moves
    predicted with every feature, 55.7% with these).
    """

    filters: int = 192
    num_layers: int = 13
    value_hidden: int = 256
    num_planes: int = 49
    raw_inputs: bool = False
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, planes: jax.Array, train: bool = False) -> dict[str, jax.Array]:
        del train  # nothing behaves differently in training: no BN, no dropout
        if planes.shape[-1] != self.num_planes:
            raise ValueError(f"expected {self.num_planes} input planes, got {planes.shape[-1]}")
        b, n, m, _ = planes.shape
        planes = planes.astype(self.dtype)
        if self.raw_inputs:  # planes 0-11 (stones, ones, turns since) and the colour
            planes = planes * (jnp.arange(self.num_planes) < 12).at[48].set(True)
        hidden = self.num_layers - 1

        p = _ConvTower(self.filters, hidden, self.dtype, name="policy")(planes[..., :48])
        board = nn.Dense(1, use_bias=False, dtype=self.dtype, name="policy_out")(p)
        point_bias = self.param("policy_bias", nn.initializers.zeros, (n * m,), jnp.float32)
        board = board.reshape(b, n * m).astype(jnp.float32) + point_bias
        pass_logit = nn.Dense(1, dtype=self.dtype, name="policy_pass")(p.mean(axis=(1, 2)))
        policy = jnp.concatenate([board, pass_logit.astype(jnp.float32)], axis=-1)

        v = _ConvTower(self.filters, hidden, self.dtype, name="value")(planes)
        v = nn.relu(nn.Dense(1, dtype=self.dtype, name="value_conv")(v))
        v = nn.Dense(self.value_hidden, dtype=self.dtype, name="value_fc")(v.reshape(b, -1))
        v = nn.relu(v)
        value = jnp.tanh(nn.Dense(1, dtype=self.dtype, name="value_out")(v))[:, 0]
        return {"policy_logits": policy, "value": value.astype(jnp.float32)}
