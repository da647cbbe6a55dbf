"""KataGo's model file format at the level of its records: the versions and inputs
``gojax.katago_model`` accepts, and the reader of the decompressed bytes -- tokens,
integers, float blocks (``@BIN@`` binary or text) -- and of the layer records (conv,
BatchNorm folded to ``x * scale + bias``, activation, matmul, bias), each checked against
the shape its place in the net requires, every problem a ``ValueError`` naming the file
and the layer.

Separate from ``gojax.katago_model``, which walks the records in the net's order (trunk,
blocks, heads) and builds a ``KataGoConfig`` and the Flax parameters from them: this
module knows the file, that one knows the net.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gojax.katago_outputs import VERSIONS
from gojax.nn import BN_EPSILON

SUPPORTED_VERSIONS = VERSIONS  # what the output post-processing reads
NUM_SPATIAL_V7 = 22
NUM_GLOBAL_V7 = 19
_INNER_BLOCK_KINDS = ("ordinary_block", "gpool_block")
_BLOCK_KINDS = (*_INNER_BLOCK_KINDS, "nested_bottleneck_block")
# Activation tokens of version >= 11 files -> KataGoConfig activations.
_ACTIVATIONS = {
    "ACTIVATION_RELU": "relu",
    "ACTIVATION_MISH": "mish",
    "ACTIVATION_SILU": "silu",
    "ACTIVATION_IDENTITY": "identity",
}
_TOKEN = re.compile(rb"\S+")
_WHITESPACE = b" \t\n\r\v\f"

Params = dict[str, Any]


class _Reader:
    """Token and float-block reader over the decompressed model bytes."""

    def __init__(self, data: bytes, binary: bool, source: str) -> None:
        self.data = data
        self.pos = 0
        self.binary = binary
        self.source = source

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.source}: {message}")

    def token(self, what: str) -> str:
        match = _TOKEN.search(self.data, self.pos)
        if match is None:
            raise self.fail(f"truncated: expected {what}, found end of file")
        self.pos = match.end()
        try:
            return match.group().decode("ascii")
        except UnicodeDecodeError:
            raise self.fail(f"expected {what}, found binary data") from None

    def integer(self, what: str) -> int:
        text = self.token(what)
        try:
            return int(text)
        except ValueError:
            raise self.fail(f"expected {what} (an integer), found {text[:40]!r}") from None

    def positive(self, what: str) -> int:
        value = self.integer(what)
        if value <= 0:
            raise self.fail(f"{what} must be positive, found {value}")
        return value

    def number(self, what: str) -> float:
        text = self.token(what)
        try:
            value = float(text)
        except ValueError:
            raise self.fail(f"expected {what} (a number), found {text[:40]!r}") from None
        if not np.isfinite(value):
            raise self.fail(f"{what} is not finite: {text}")
        return value

    def floats(self, count: int, layer: str) -> np.ndarray:
        """``count`` weights of ``layer`` as float32, checked finite."""
        if self.binary:
            values = self._binary_floats(count, layer)
        else:
            values = self._text_floats(count, layer)
        if not np.all(np.isfinite(values)):
            bad = int(np.argmin(np.isfinite(values)))
            raise self.fail(f"non-finite weight in layer {layer} (value {bad} is {values[bad]})")
        return values

    def _binary_floats(self, count: int, layer: str) -> np.ndarray:
        # Only whitespace may separate the header from the @BIN@ marker.
        start = self.pos
        while self.pos < len(self.data) and self.data[self.pos] in _WHITESPACE:
            self.pos += 1
            if self.pos - start > 100:
                break
        if self.data[self.pos : self.pos + 5] != b"@BIN@":
            if self.pos >= len(self.data):
                raise self.fail(f"truncated at layer {layer}: expected {count} floats")
            found = self.data[self.pos : self.pos + 12]
            raise self.fail(
                f"layer {layer}: expected a binary float block '@BIN@', found {found!r} "
                "(is this a text model named .bin?)"
            )
        self.pos += 5
        end = self.pos + 4 * count
        if end > len(self.data):
            have = (len(self.data) - self.pos) // 4
            raise self.fail(f"truncated at layer {layer}: expected {count} floats, found {have}")
        values = np.frombuffer(self.data, dtype="<f4", count=count, offset=self.pos)
        self.pos = end
        return values.astype(np.float32)

    def _text_floats(self, count: int, layer: str) -> np.ndarray:
        tokens = []
        for _ in range(count):
            match = _TOKEN.search(self.data, self.pos)
            if match is None:
                raise self.fail(
                    f"truncated at layer {layer}: expected {count} floats, found {len(tokens)}"
                )
            tokens.append(match.group())
            self.pos = match.end()
        try:
            return np.array(tokens).astype(np.float64).astype(np.float32)
        except ValueError:
            raise self.fail(
                f"layer {layer}: weights are not all numbers (is this a binary model named .txt?)"
            ) from None

    def at_end(self) -> bool:
        return _TOKEN.search(self.data, self.pos) is None


class _Parser:
    """Walks the layer records in KataGo's order, checking shapes, building params."""

    def __init__(self, reader: _Reader, version: int) -> None:
        self.r = reader
        self.version = version
        self.activations: dict[str, str] = {}  # kind -> the first layer that uses it
        self.block_kernels: set[int] = set()

    def fail(self, message: str) -> ValueError:
        return self.r.fail(message)

    def conv(
        self, path: str, in_channels: int | None = None, out_channels: int | None = None
    ) -> tuple[np.ndarray, int]:
        """A conv record: ``({"kernel": [ky, kx, in, out]}, kernel side)``."""
        name = self.r.token(f"conv layer name at {path}")
        layer = _layer_path(path, name)
        ky = self.r.positive(f"{layer}: kernel height")
        kx = self.r.positive(f"{layer}: kernel width")
        ic = self.r.positive(f"{layer}: input channels")
        oc = self.r.positive(f"{layer}: output channels")
        dy = self.r.positive(f"{layer}: dilation y")
        dx = self.r.positive(f"{layer}: dilation x")
        if ky != kx or ky % 2 != 1:
            raise self.fail(f"layer {layer}: unsupported kernel {ky}x{kx} (must be square, odd)")
        if (dy, dx) != (1, 1):
            raise self.fail(f"layer {layer}: unsupported dilation {dy}x{dx}")
        self._check(layer, "input channels", ic, in_channels)
        self._check(layer, "output channels", oc, out_channels)
        weights = self.r.floats(ky * kx * ic * oc, layer)
        return {"kernel": weights.reshape(ky, kx, ic, oc)}, ky

    def bn(self, path: str, channels: int) -> tuple[dict, dict]:
        """A BatchNorm record, folded: ``({"scale", "bias"}, {"mean", "var"})``."""
        name = self.r.token(f"batch norm name at {path}")
        layer = _layer_path(path, name)
        n = self.r.positive(f"{layer}: channels")
        self._check(layer, "channels", n, channels)
        eps = self.r.number(f"{layer}: epsilon")
        if eps <= 0:
            raise self.fail(f"layer {layer}: epsilon must be positive, found {eps}")
        has_scale = self._flag(f"{layer}: hasScale")
        has_bias = self._flag(f"{layer}: hasBias")
        mean = self.r.floats(n, layer).astype(np.float64)
        var = self.r.floats(n, layer).astype(np.float64)
        gamma = self.r.floats(n, layer).astype(np.float64) if has_scale else np.ones(n)
        beta = self.r.floats(n, layer).astype(np.float64) if has_bias else np.zeros(n)
        if np.any(var + eps <= 0):
            raise self.fail(f"layer {layer}: variance + epsilon must be positive")
        scale = gamma / np.sqrt(var + eps)
        bias = beta - scale * mean
        return (
            {"scale": scale.astype(np.float32), "bias": bias.astype(np.float32)},
            # var + eps == 1 makes the module's BN compute exactly x * scale + bias.
            {"mean": np.zeros(n, np.float32), "var": np.full(n, 1.0 - BN_EPSILON, np.float32)},
        )

    def activation(self, path: str, main: bool = True) -> str:
        """An activation record: its kind (always ReLU before version 11). ``main``: one of
        the net's BN activations, which must all be of one kind (``KataGoConfig.activation``)."""
        name = self.r.token(f"activation name at {path}")
        if self.version < 11:
            return "relu"
        layer = _layer_path(path, name)
        token = self.r.token(f"{layer}: activation kind")
        if token not in _ACTIVATIONS:
            known = ", ".join(_ACTIVATIONS)
            raise self.fail(f"layer {layer}: unknown activation {token[:40]!r} (known: {known})")
        kind = _ACTIVATIONS[token]
        if main:
            self.activations.setdefault(kind, layer)
            if len(self.activations) > 1:
                kinds = ", ".join(f"{k} (first at {at})" for k, at in self.activations.items())
                raise self.fail(f"layer {layer}: mixed activations are not supported: {kinds}")
        return kind

    def zeros(self, count: int, what: str) -> None:
        """``count`` option slots that KataGo reserves for later use: each must be 0."""
        for i in range(count):
            value = self.r.integer(f"{what} {i + 1}")
            if value != 0:
                raise self.fail(
                    f"{what} {i + 1} is {value}: an option this reader does not know "
                    "(written by a newer KataGo?)"
                )

    def matmul(
        self, path: str, in_channels: int | None = None, out_channels: int | None = None
    ) -> np.ndarray:
        """A matmul record: ``[in, out]`` weights."""
        name = self.r.token(f"matmul layer name at {path}")
        layer = _layer_path(path, name)
        ic = self.r.positive(f"{layer}: input channels")
        oc = self.r.positive(f"{layer}: output channels")
        self._check(layer, "input channels", ic, in_channels)
        self._check(layer, "output channels", oc, out_channels)
        return self.r.floats(ic * oc, layer).reshape(ic, oc)

    def matbias(self, path: str, channels: int) -> np.ndarray:
        name = self.r.token(f"bias layer name at {path}")
        layer = _layer_path(path, name)
        n = self.r.positive(f"{layer}: channels")
        self._check(layer, "channels", n, channels)
        return self.r.floats(n, layer)

    def _flag(self, what: str) -> bool:
        value = self.r.integer(what)
        if value not in (0, 1):
            raise self.fail(f"{what} must be 0 or 1, found {value}")
        return bool(value)

    def _check(self, layer: str, what: str, found: int, expected: int | None) -> None:
        if expected is not None and found != expected:
            raise self.fail(f"layer {layer}: {what} is {found}, expected {expected}")


def _layer_path(path: str, name: str) -> str:
    """``trunk`` + ``rconv3/w1a`` -> ``trunk/rconv3/w1a``, for error messages."""
    parts = path.split("/")
    if name.split("/")[0] == parts[-1]:
        return "/".join(parts[:-1] + [name])
    return f"{path}/{name}"
