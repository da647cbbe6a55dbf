"""Read (and write) KataGo model files into parameters for ``gojax.nn.KataGoNet``.

Supported: KataGo model versions **8 to 17** (input version 7: 22 spatial and
19 global features) built of convolutional blocks: ordinary, global-pooling
and nested bottleneck blocks (KataGo's current "nbt" nets, b18c384nbt and
b28c512nbt). What each version adds, as KataGo's engine reads it:

* 9: the value head's score layer (``sv3``) has 6 outputs instead of 4
  (short-term value and score error predictions; their post-processing
  differs between 9, 10 and 14, see ``gojax.katago_outputs``);
* 11: every activation layer names its kind (ReLU, Mish, SiLU, identity);
  here one kind must serve every BatchNorm and the value head's hidden layer;
* 12: a second policy channel, the "optimistic" policy;
* 13: seven post-processing multipliers in the header (``OutputSpec``);
* 15: the pass logit goes through a hidden layer (matmul, bias, activation,
  matmul); reserved option slots in the header and trunk (which must be 0);
* 16: four policy channels (the last two, Q-value predictions, are unused);
* 17: the policy channel count (2 or 4) and more reserved slots in the file.

Refused, with the reason: versions before 8 (older input features), nets
that read SGF metadata (KataGo's human-style nets), RMSNorm trunk tips and
transformer blocks (version 17 research nets), mixed activation kinds.

File formats (``reference/KATAGO_NOTES.md`` section 1): gzip around
whitespace-separated text tokens. In ``.bin.gz``/``.bin`` files each weight
array is ``@BIN@`` followed by exactly N little-endian float32 values (N
implied by the layer header, no length prefix); in ``.txt.gz``/``.txt`` files
the weights are N text tokens. A bare ``.gz`` is tried as binary, then text.

Layouts: conv weights are stored ``[y][x][in][out]`` (HWIO, used as is),
matmul weights ``[in][out]``. Every BatchNorm is folded to the inference
affine ``x * scale + bias`` with ``scale = gamma / sqrt(var + eps)`` and
``bias = beta - scale * mean`` (gamma 1 and beta 0 when absent), and mapped
onto ``nn.BatchNorm`` as ``scale``, ``bias`` with running ``mean = 0`` and
``var = 1 - eps`` (so ``var + eps = 1``).

Every problem (unreadable gzip, truncation, wrong token, bad shape,
non-finite weight, unknown block kind, unsupported version) raises
``ValueError`` naming the file and the layer.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from gojax.atomic import write_atomic
from gojax.katago_outputs import VERSIONS, OutputSpec, score_channels
from gojax.nn import (
    BN_EPSILON,
    GPOOL,
    NESTED,
    ORDINARY,
    KataGoConfig,
    KataGoNet,
    with_winograd_kernels,
)

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


@dataclasses.dataclass
class KataGoModel:
    """A parsed KataGo model.

    Attributes:
      name: the model's name token.
      version: KataGo model version (8-17).
      num_spatial, num_global: input feature counts (22 and 19).
      config: the ``KataGoConfig`` of the matching ``KataGoNet``.
      params: nested dict of float32 numpy arrays, the net's ``params``
        collection (conv kernels HWIO, dense kernels ``[in, out]``).
      batch_stats: the matching ``batch_stats`` (mean 0, var ``1 - eps``).
      output_spec: how to read the outputs (the version and, from version 13, the
        multipliers the file stores): pass it as ``evaluate``'s ``version``.
      path: the file ``load_model`` read it from (None when parsed from bytes).
    """

    name: str
    version: int
    num_spatial: int
    num_global: int
    config: KataGoConfig
    params: Params
    batch_stats: Params
    output_spec: OutputSpec | None = None
    path: str | None = None  # the file it was loaded from (``load_model``)

    def __post_init__(self) -> None:
        if self.output_spec is None:
            self.output_spec = OutputSpec(self.version)

    @functools.cached_property
    def variables(self) -> dict[str, Params]:
        """``{"params": ..., "batch_stats": ...}`` for ``module().apply``, plus on a CPU the
        Winograd-transformed 3x3 kernels (``gojax.nn.with_winograd_kernels``, computed once).

        Device arrays, not the numpy ones of ``params``: a jitted call copies every numpy
        argument in anew (b6c96's 103 arrays cost 0.6 ms a call, 15-20% of a 19x19
        batch-1 evaluation on a 2-core CPU).
        """
        base = jax.device_put({"params": self.params, "batch_stats": self.batch_stats})
        return with_winograd_kernels(self.module(), base)

    def module(self, **kwargs: Any) -> KataGoNet:
        """The ``KataGoNet`` these parameters fit (kwargs: ``dtype``, ``bn_momentum``,
        ``policy_optimism``)."""
        return KataGoNet(config=self.config, **kwargs)

    def num_params(self) -> int:
        """Number of values in ``params``."""
        return int(sum(a.size for a in _leaves(self.params)))


def _leaves(tree: Params) -> Iterator[np.ndarray]:
    for value in tree.values():
        if isinstance(value, dict):
            yield from _leaves(value)
        else:
            yield value


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


def _put_bn(params: Params, stats: Params, key: str, folded: tuple[dict, dict]) -> None:
    params[key], stats[key] = folded


def _output_spec(r: _Reader, version: int) -> OutputSpec:
    """The header's post-processing multipliers (version >= 13; defaults before)."""
    if version < 13:
        return OutputSpec(version)
    names = (
        "td_score_multiplier",
        "score_mean_multiplier",
        "score_stdev_multiplier",
        "lead_multiplier",
        "variance_time_multiplier",
        "shortterm_value_error_multiplier",
        "shortterm_score_error_multiplier",
    )
    values = {}
    for field in names:
        value = r.number(field.replace("_", " "))
        if value <= 0:
            raise r.fail(f"{field.replace('_', ' ')} must be positive, found {value}")
        values[field] = value
    return OutputSpec(version, **values)


def _model_options(r: _Reader, p: _Parser) -> None:
    """Version >= 15: the metadata-encoder version, the pass-alive flag and 6 spare slots."""
    meta = r.integer("metadata encoder version")
    if meta != 0:
        raise r.fail(
            f"metadata encoder version {meta}: nets that read SGF metadata (KataGo's "
            "human-style nets) are not supported"
        )
    prefer = r.integer("preferPassAliveUnderSuicideRules")
    if prefer != 0:
        raise r.fail(
            f"preferPassAliveUnderSuicideRules is {prefer}: nets whose pass-alive inputs assume "
            "multi-stone suicide are not supported"
        )
    p.zeros(6, "model option")


def _block_kind(r: _Reader, where: str, label: str, allowed: tuple[str, ...]) -> str:
    """The kind token of ``label`` (``"block 3"``) in ``where``: one of ``allowed``."""
    token = r.token(f"{where}: kind of {label}")
    if token not in allowed:
        known = ", ".join(allowed)
        raise r.fail(f"{where}: unknown block kind {token[:40]!r} at {label} (supported: {known})")
    return token


def _parse_block(
    p: _Parser, kind_token: str, path: str, channels: int, shape: dict[str, int]
) -> tuple[str, Params, Params]:
    """An ordinary or gpool block on a ``channels``-wide stream: ``(kind, params, stats)``.

    ``shape``: the trunk header's ``mid``, ``regular`` and ``gpool`` widths, which every
    block's layers must have (as KataGo's exporter writes them).
    """
    bp: Params = {}
    bs: Params = {}
    mid, regular, gpool = shape["mid"], shape["regular"], shape["gpool"]
    _put_bn(bp, bs, "norm1", p.bn(path, channels))
    p.activation(path)
    if kind_token == "ordinary_block":
        bp["w1"], k1 = p.conv(path, channels, mid)
        _put_bn(bp, bs, "norm2", p.bn(path, mid))
        p.activation(path)
        bp["w2"], k2 = p.conv(path, mid, channels)
        p.block_kernels |= {k1, k2}
        return ORDINARY, bp, bs
    bp["w1a"], k1 = p.conv(path, channels, regular)
    bp["w1b"], k2 = p.conv(path, channels, gpool)
    _put_bn(bp, bs, "norm1b", p.bn(path, gpool))
    p.activation(path)
    bp["w1r"] = {"kernel": p.matmul(path, 3 * gpool, regular)}
    _put_bn(bp, bs, "norm2", p.bn(path, regular))
    p.activation(path)
    bp["w2"], k3 = p.conv(path, regular, channels)
    p.block_kernels |= {k1, k2, k3}
    return GPOOL, bp, bs


def _parse_nested(
    p: _Parser, path: str, channels: int, shape: dict[str, int]
) -> tuple[tuple[str, ...], Params, Params]:
    """A nested bottleneck block (after its name): ``((NESTED, kind, ...), params, stats)``."""
    num_inner = p.r.positive(f"{path}: number of inner blocks")
    mid = shape["mid"]
    bp: Params = {}
    bs: Params = {}
    _put_bn(bp, bs, "normp", p.bn(path, channels))
    p.activation(path)
    bp["wp"], kp = p.conv(path, channels, mid)
    kinds = []
    for j in range(num_inner):
        token = _block_kind(p.r, path, f"inner block {j + 1}", _INNER_BLOCK_KINDS)
        inner = f"{path}/{p.r.token(f'{path}: name of inner block {j + 1}')}"
        kind, bp[f"inner{j + 1}"], bs[f"inner{j + 1}"] = _parse_block(p, token, inner, mid, shape)
        kinds.append(kind)
    _put_bn(bp, bs, "normq", p.bn(path, mid))
    p.activation(path)
    bp["wq"], kq = p.conv(path, mid, channels)
    if (kp, kq) != (1, 1):
        raise p.fail(f"{path}: the outer convolutions of a nested block must be 1x1")
    return (NESTED, *kinds), bp, bs


def parse_model(data: bytes, *, binary: bool, source: str = "<bytes>") -> KataGoModel:
    """Parse decompressed model bytes; ``source`` names the file in error messages."""
    r = _Reader(data, binary, source)
    name = r.token("model name")
    version = r.integer("model version")
    if version not in SUPPORTED_VERSIONS:
        older = " (versions before 8 read older input features)" if 0 <= version < 8 else ""
        raise r.fail(
            f"model version {version} is not supported (supported: "
            f"{SUPPORTED_VERSIONS[0]}-{SUPPORTED_VERSIONS[-1]}){older}"
        )
    num_spatial = r.positive("number of spatial inputs")
    num_global = r.positive("number of global inputs")
    if (num_spatial, num_global) != (NUM_SPATIAL_V7, NUM_GLOBAL_V7):
        raise r.fail(
            f"model version {version} must have {NUM_SPATIAL_V7} spatial and {NUM_GLOBAL_V7} "
            f"global inputs, found {num_spatial} and {num_global}"
        )
    spec = _output_spec(r, version)
    p = _Parser(r, version)
    if version >= 15:
        _model_options(r, p)
    params: Params = {}
    stats: Params = {}

    # Trunk header.
    trunk = r.token("trunk name")
    num_blocks = r.positive(f"{trunk}: number of blocks")
    c = r.positive(f"{trunk}: trunk channels")
    mid = r.positive(f"{trunk}: mid channels")
    regular = r.positive(f"{trunk}: regular channels")
    r.positive(f"{trunk}: dilated channels")  # read and ignored, as KataGo does
    gpool = r.positive(f"{trunk}: gpool channels")
    if version >= 15:
        norm_kind = r.integer(f"{trunk}: trunk norm kind")
        if norm_kind != 0:
            raise r.fail(
                f"{trunk}: trunk norm kind {norm_kind} (RMSNorm) is not supported, only 0 "
                "(BatchNorm)"
            )
        p.zeros(5, f"{trunk}: trunk option")
    params["conv1"], initial_kernel = p.conv(trunk, num_spatial, c)
    params["ginput"] = {"kernel": p.matmul(trunk, num_global, c)}

    kinds: list[Any] = []
    shape = {"mid": mid, "regular": regular, "gpool": gpool}
    for i in range(num_blocks):
        kind_token = _block_kind(r, trunk, f"block {i + 1}", _BLOCK_KINDS)
        path = f"{trunk}/{r.token(f'{trunk}: name of block {i + 1}')}"
        if kind_token == "nested_bottleneck_block":
            kind, bp, bs = _parse_nested(p, path, c, shape)
        else:
            kind, bp, bs = _parse_block(p, kind_token, path, c, shape)
        kinds.append(kind)
        params[f"rconv{i + 1}"] = bp
        stats[f"rconv{i + 1}"] = bs
    if len(p.block_kernels) > 1:
        kernels = sorted(p.block_kernels)
        raise r.fail(f"{trunk}: mixed kernel sizes {kernels} are not supported")
    block_kernel = p.block_kernels.pop() if p.block_kernels else 3
    _put_bn(params, stats, "trunk_norm", p.bn(trunk, c))
    p.activation(trunk)

    # Policy head.
    head = r.token("policy head name")
    if version >= 17:
        k = r.integer(f"{head}: policy output channels")
        if k not in (2, 4):
            raise r.fail(f"{head}: policy output channels must be 2 or 4, found {k}")
        p.zeros(3, f"{head}: policy option")
    else:
        k = 4 if version == 16 else 2 if version >= 12 else 1
    pp: Params = {}
    ps: Params = {}
    pp["p1"], k_p1 = p.conv(head, c)
    pc = pp["p1"]["kernel"].shape[-1]
    pp["g1"], k_g1 = p.conv(head, c)
    gc = pp["g1"]["kernel"].shape[-1]
    _put_bn(pp, ps, "g1_norm", p.bn(head, gc))
    p.activation(head)
    pp["g2"] = {"kernel": p.matmul(head, 3 * gc, pc)}
    _put_bn(pp, ps, "p1_norm", p.bn(head, pc))
    p.activation(head)
    pp["p2"], k_p2 = p.conv(head, pc, k)
    pass_activation = None
    if version >= 15:
        pp["pass1"] = {"kernel": p.matmul(head, 3 * gc, pc), "bias": p.matbias(head, pc)}
        pass_activation = p.activation(head, main=False)
        pp["pass"] = {"kernel": p.matmul(head, pc, k)}
    else:
        pp["pass"] = {"kernel": p.matmul(head, 3 * gc, k)}
    params["policy"], stats["policy"] = pp, ps

    # Value head.
    head = r.token("value head name")
    if version >= 17:
        p.zeros(3, f"{head}: value option")
    vp: Params = {}
    vs: Params = {}
    vp["v1"], k_v1 = p.conv(head, c)
    vc = vp["v1"]["kernel"].shape[-1]
    _put_bn(vp, vs, "v1_norm", p.bn(head, vc))
    p.activation(head)
    v2w = p.matmul(head, 3 * vc)
    hidden = v2w.shape[1]
    vp["v2"] = {"kernel": v2w, "bias": p.matbias(head, hidden)}
    p.activation(head)
    vp["v3"] = {"kernel": p.matmul(head, hidden, 3), "bias": p.matbias(head, 3)}
    channels = score_channels(version)
    vp["sv3"] = {
        "kernel": p.matmul(head, hidden, channels),
        "bias": p.matbias(head, channels),
    }
    vp["ownership"], k_own = p.conv(head, vc, 1)
    params["value"], stats["value"] = vp, vs

    if any(k != 1 for k in (k_p1, k_g1, k_p2, k_v1, k_own)):
        raise r.fail("head convolutions other than 1x1 are not supported")
    if not r.at_end():
        extra = r.token("end of file")
        raise r.fail(f"unexpected data after the value head: {extra[:40]!r}")

    config = KataGoConfig(
        blocks=tuple(kinds),
        trunk_channels=c,
        mid_channels=mid,
        regular_channels=regular,
        gpool_channels=gpool,
        policy_channels=pc,
        policy_gpool_channels=gc,
        value_channels=vc,
        value_hidden=hidden,
        score_channels=channels,
        num_spatial=num_spatial,
        num_global=num_global,
        initial_kernel=initial_kernel,
        block_kernel=block_kernel,
        bn_epsilon=BN_EPSILON,
        policy_outputs=k,
        optimistic_policy=k > 1,
        activation=next(iter(p.activations), "relu"),
        pass_activation=pass_activation,
    )
    return KataGoModel(name, version, num_spatial, num_global, config, params, stats, spec)


def load_model(path: str | Path) -> KataGoModel:
    """Load a KataGo ``.bin.gz``, ``.txt.gz``, ``.bin``, ``.txt`` or ``.gz`` model file.

    Raises ``ValueError`` (naming the file and what is wrong) for anything
    unreadable, malformed or unsupported; ``FileNotFoundError`` if absent.
    """
    model = _read_model(Path(path))
    model.path = str(path)
    return model


def _read_model(path: Path) -> KataGoModel:
    source = str(path)
    lower = path.name.lower()
    raw = path.read_bytes()
    if lower.endswith(".gz"):
        try:
            data = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{source}: not a readable gzip file ({e})") from None
    elif lower.endswith((".bin", ".txt")):
        data = raw
    else:
        raise ValueError(f"{source}: model file names end in .bin.gz, .txt.gz, .bin, .txt or .gz")
    if lower.endswith((".txt.gz", ".txt")):
        return parse_model(data, binary=False, source=source)
    if lower.endswith((".bin.gz", ".bin")):
        return parse_model(data, binary=True, source=source)
    # A bare .gz: binary first, then text, as KataGo does.
    try:
        return parse_model(data, binary=True, source=source)
    except ValueError as binary_error:
        try:
            return parse_model(data, binary=False, source=source)
        except ValueError as text_error:
            raise ValueError(
                f"{source}: neither a binary nor a text model: {binary_error}; {text_error}"
            ) from None


def _fold_stats(params: Params, stats: Params, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Inference affine ``(scale, bias)`` of one ``nn.BatchNorm`` (params + batch_stats)."""
    scale = np.asarray(params["scale"], np.float64)
    bias = np.asarray(params["bias"], np.float64)
    mean = np.asarray(stats["mean"], np.float64)
    var = np.asarray(stats["var"], np.float64)
    s = scale / np.sqrt(var + eps)
    return s, bias - s * mean


_ACTIVATION_TOKENS = {kind: token for token, kind in _ACTIVATIONS.items()}


def _check_writable(config: KataGoConfig, version: int) -> None:
    """Refuse a ``version`` whose file layout cannot hold ``config``."""
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"model version {version} is not supported")
    problems = []
    if config.score_channels != score_channels(version):
        problems.append(f"score_channels {score_channels(version)}")
    if version < 11 and config.activation != "relu":
        problems.append("activation relu (activation kinds start at version 11)")
    if version < 15 and config.pass_activation is not None:
        problems.append("no pass hidden layer (pass_activation None before version 15)")
    if version >= 15 and config.pass_activation is None:
        problems.append("a pass hidden layer (pass_activation)")
    if version >= 12:
        outputs = {12: 2, 13: 2, 14: 2, 15: 2, 16: 4}.get(version, config.policy_outputs)
        if not config.optimistic_policy or config.policy_outputs != outputs:
            problems.append(f"optimistic_policy with policy_outputs {outputs}")
    elif config.optimistic_policy:
        problems.append("no optimistic policy (it starts at version 12)")
    if problems:
        raise ValueError(f"model version {version} needs " + "; ".join(problems))


def save_model(
    path: str | Path,
    config: KataGoConfig,
    variables: dict[str, Params],
    *,
    name: str = "gojax",
    version: int = 8,
    output_spec: OutputSpec | None = None,
) -> None:
    """Write a ``KataGoNet``'s variables as a KataGo model file (binary or text by suffix).

    BN running statistics are folded into each layer's scale and bias (with
    mean 0, variance 1, epsilon 1e-20 in the file), as KataGo's own exporter
    does after training. ``version`` must fit ``config`` (score channels, activation,
    policy channels, pass layer: see ``parse_model``); of a net with
    ``policy_outputs=2`` and no optimistic policy only the move policy (channel 0) is
    written, in versions 8-11. ``output_spec``: the multipliers a version >= 13 file
    stores (KataGo's defaults if None).
    """
    _check_writable(config, version)
    if not name or any(ch.isspace() for ch in name):
        raise ValueError(f"model name must be one non-empty token, not {name!r}")
    spec = output_spec or OutputSpec(version)
    path = Path(path)
    lower = path.name.lower()
    binary = not lower.endswith((".txt", ".txt.gz"))
    params = _to_numpy(variables["params"])
    stats = _to_numpy(variables.get("batch_stats", {}))
    eps = config.bn_epsilon
    out: list[bytes] = []

    def tokens(*items: object) -> None:
        out.append(("\n".join(str(x) for x in items) + "\n").encode("ascii"))

    def floats(array: np.ndarray) -> None:
        flat = np.asarray(array, np.float32).reshape(-1)
        if binary:
            out.append(b"@BIN@" + flat.astype("<f4").tobytes() + b"\n")
        else:
            out.append((" ".join(repr(float(v)) for v in flat) + "\n").encode("ascii"))

    def conv(label: str, kernel: np.ndarray) -> None:
        ky, kx, ic, oc = kernel.shape
        tokens(label, ky, kx, ic, oc, 1, 1)
        floats(kernel)

    def bn(label: str, p: Params, s: Params) -> None:
        scale, bias = _fold_stats(p, s, eps)
        n = scale.shape[0]
        tokens(label, n, 1e-20, 1, 1)
        floats(np.zeros(n))
        floats(np.ones(n))
        floats(scale)
        floats(bias)

    def activation(label: str, kind: str = config.activation) -> None:
        if version >= 11:
            tokens(label, _ACTIVATION_TOKENS[kind])
        else:
            tokens(label)

    def matmul(label: str, kernel: np.ndarray) -> None:
        tokens(label, *kernel.shape)
        floats(kernel)

    def matbias(label: str, bias: np.ndarray) -> None:
        tokens(label, bias.shape[0])
        floats(bias)

    def block(key: str, kind: str, bp: Params, bs: Params) -> None:
        tokens("ordinary_block" if kind == ORDINARY else "gpool_block", key)
        bn(f"{key}/norm1", bp["norm1"], bs["norm1"])
        activation(f"{key}/actv1")
        if kind == ORDINARY:
            conv(f"{key}/w1", bp["w1"]["kernel"])
        else:
            conv(f"{key}/w1a", bp["w1a"]["kernel"])
            conv(f"{key}/w1b", bp["w1b"]["kernel"])
            bn(f"{key}/norm1b", bp["norm1b"], bs["norm1b"])
            activation(f"{key}/actv1b")
            matmul(f"{key}/w1r", bp["w1r"]["kernel"])
        bn(f"{key}/norm2", bp["norm2"], bs["norm2"])
        activation(f"{key}/actv2")
        conv(f"{key}/w2", bp["w2"]["kernel"])

    c = config.trunk_channels
    k = config.policy_outputs if config.optimistic_policy else 1
    tokens(name, version, config.num_spatial, config.num_global)
    if version >= 13:
        tokens(
            spec.td_score_multiplier,
            spec.score_mean_multiplier,
            spec.score_stdev_multiplier,
            spec.lead_multiplier,
            spec.variance_time_multiplier,
            spec.shortterm_value_error_multiplier,
            spec.shortterm_score_error_multiplier,
        )
    if version >= 15:
        tokens(0, 0, *[0] * 6)  # no metadata encoder, plain pass-alive inputs, spare slots
    tokens("trunk", len(config.blocks), c, config.mid_channels, config.regular_channels)
    tokens(config.mid_channels - config.regular_channels or 1, config.gpool_channels)
    if version >= 15:
        tokens(0, *[0] * 5)  # BatchNorm trunk tip, spare slots
    conv("conv1", params["conv1"]["kernel"])
    matmul("ginputw", params["ginput"]["kernel"])
    for i, kind in enumerate(config.blocks):
        key = f"rconv{i + 1}"
        bp, bs = params[key], stats[key]
        if not isinstance(kind, tuple):
            block(key, kind, bp, bs)
            continue
        tokens("nested_bottleneck_block", key, len(kind) - 1)
        bn(f"{key}/normp", bp["normp"], bs["normp"])
        activation(f"{key}/actvp")
        conv(f"{key}/wp", bp["wp"]["kernel"])
        for j, inner in enumerate(kind[1:]):
            block(f"{key}/inner{j + 1}", inner, bp[f"inner{j + 1}"], bs[f"inner{j + 1}"])
        bn(f"{key}/normq", bp["normq"], bs["normq"])
        activation(f"{key}/actvq")
        conv(f"{key}/wq", bp["wq"]["kernel"])
    bn("trunk/norm", params["trunk_norm"], stats["trunk_norm"])
    activation("trunk/actv")
    pp, ps = params["policy"], stats["policy"]
    tokens("policyhead")
    if version >= 17:
        tokens(k, 0, 0, 0)
    conv("p1/intermediate_conv/w", pp["p1"]["kernel"])
    conv("g1/w", pp["g1"]["kernel"])
    bn("g1/norm", pp["g1_norm"], ps["g1_norm"])
    activation("g1/actv")
    matmul("matmulg2w", pp["g2"]["kernel"])
    bn("p1/norm", pp["p1_norm"], ps["p1_norm"])
    activation("p1/actv")
    # Versions 8-11 hold the move policy alone: an opponent-reply channel stays behind.
    conv("p2/w", pp["p2"]["kernel"][..., :k])
    if version >= 15:
        matmul("matmulpass", pp["pass1"]["kernel"])
        matbias("matbiaspass", pp["pass1"]["bias"])
        activation("passactv", config.pass_activation)
        matmul("matmulpass2", pp["pass"]["kernel"])
    else:
        matmul("matmulpass", pp["pass"]["kernel"][..., :k])
    vp, vs = params["value"], stats["value"]
    tokens("valuehead")
    if version >= 17:
        tokens(0, 0, 0)
    conv("v1/w", vp["v1"]["kernel"])
    bn("v1/norm", vp["v1_norm"], vs["v1_norm"])
    activation("v1/actv")
    matmul("v2/w", vp["v2"]["kernel"])
    matbias("v2/b", vp["v2"]["bias"])
    activation("v2/actv")
    matmul("v3/w", vp["v3"]["kernel"])
    matbias("v3/b", vp["v3"]["bias"])
    matmul("sv3/w", vp["sv3"]["kernel"])
    matbias("sv3/b", vp["sv3"]["bias"])
    conv("vownership/w", vp["ownership"]["kernel"])
    data = b"".join(out)
    write_atomic(path, gzip.compress(data) if lower.endswith(".gz") else data)


def _to_numpy(tree: Any) -> Any:
    if isinstance(tree, dict) or hasattr(tree, "items"):
        return {k: _to_numpy(v) for k, v in tree.items()}
    return np.asarray(tree)
