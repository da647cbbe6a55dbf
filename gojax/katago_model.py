"""Read (and write) KataGo model files into parameters for ``gojax.nn.KataGoNet``.

Supported: KataGo model versions **8, 9 and 10** (input version 7: 22 spatial
and 19 global features), the g170-era residual nets with ordinary and
global-pooling blocks. Version 8 is the reference net's; 9 and 10 have the
same layout except that the value head's score layer (``sv3``) has 6 outputs
instead of 4 (adding short-term value and score error predictions, whose
post-processing differs between 9 and 10, see ``gojax.katago_outputs``).
Other versions are refused: 11 adds activation kinds, 12 a second policy
channel, 13 stored post-processing multipliers, 15 metadata encoders and
more, and versions before 8 use older input features.

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

from gojax._atomic import write_atomic
from gojax.nn import BN_EPSILON, GPOOL, ORDINARY, KataGoConfig, KataGoNet, with_winograd_kernels

SUPPORTED_VERSIONS = (8, 9, 10)
NUM_SPATIAL_V7 = 22
NUM_GLOBAL_V7 = 19
_BLOCK_KINDS = {"ordinary_block": ORDINARY, "gpool_block": GPOOL}
_TOKEN = re.compile(rb"\S+")
_WHITESPACE = b" \t\n\r\v\f"

Params = dict[str, Any]


@dataclasses.dataclass
class KataGoModel:
    """A parsed KataGo model.

    Attributes:
      name: the model's name token.
      version: KataGo model version (8, 9 or 10).
      num_spatial, num_global: input feature counts (22 and 19).
      config: the ``KataGoConfig`` of the matching ``KataGoNet``.
      params: nested dict of float32 numpy arrays, the net's ``params``
        collection (conv kernels HWIO, dense kernels ``[in, out]``).
      batch_stats: the matching ``batch_stats`` (mean 0, var ``1 - eps``).
    """

    name: str
    version: int
    num_spatial: int
    num_global: int
    config: KataGoConfig
    params: Params
    batch_stats: Params

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
        """The ``KataGoNet`` these parameters fit (kwargs: ``dtype``, ``bn_momentum``)."""
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

    def activation(self, path: str) -> None:
        # Versions < 11 store only a name; the activation is always ReLU.
        self.r.token(f"activation name at {path}")

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


def parse_model(data: bytes, *, binary: bool, source: str = "<bytes>") -> KataGoModel:
    """Parse decompressed model bytes; ``source`` names the file in error messages."""
    r = _Reader(data, binary, source)
    name = r.token("model name")
    version = r.integer("model version")
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_VERSIONS))
        raise r.fail(f"model version {version} is not supported (supported: {supported})")
    num_spatial = r.positive("number of spatial inputs")
    num_global = r.positive("number of global inputs")
    if (num_spatial, num_global) != (NUM_SPATIAL_V7, NUM_GLOBAL_V7):
        raise r.fail(
            f"model version {version} must have {NUM_SPATIAL_V7} spatial and {NUM_GLOBAL_V7} "
            f"global inputs, found {num_spatial} and {num_global}"
        )
    p = _Parser(r, version)
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
    params["conv1"], initial_kernel = p.conv(trunk, num_spatial, c)
    params["ginput"] = {"kernel": p.matmul(trunk, num_global, c)}

    kinds: list[str] = []
    block_kernels: set[int] = set()
    for i in range(num_blocks):
        kind_token = r.token(f"{trunk}: kind of block {i + 1}")
        if kind_token not in _BLOCK_KINDS:
            known = ", ".join(_BLOCK_KINDS)
            raise r.fail(
                f"{trunk}: unknown block kind {kind_token[:40]!r} at block {i + 1} "
                f"(supported: {known})"
            )
        kind = _BLOCK_KINDS[kind_token]
        bname = r.token(f"{trunk}: name of block {i + 1}")
        path = f"{trunk}/{bname}"
        bp: Params = {}
        bs: Params = {}
        _put_bn(bp, bs, "norm1", p.bn(path, c))
        p.activation(path)
        if kind == ORDINARY:
            bp["w1"], k1 = p.conv(path, c, mid)
            _put_bn(bp, bs, "norm2", p.bn(path, mid))
            p.activation(path)
            bp["w2"], k2 = p.conv(path, mid, c)
            block_kernels |= {k1, k2}
        else:
            bp["w1a"], k1 = p.conv(path, c, regular)
            bp["w1b"], k2 = p.conv(path, c, gpool)
            _put_bn(bp, bs, "norm1b", p.bn(path, gpool))
            p.activation(path)
            bp["w1r"] = {"kernel": p.matmul(path, 3 * gpool, regular)}
            _put_bn(bp, bs, "norm2", p.bn(path, regular))
            p.activation(path)
            bp["w2"], k3 = p.conv(path, regular, c)
            block_kernels |= {k1, k2, k3}
        kinds.append(kind)
        params[f"rconv{i + 1}"] = bp
        stats[f"rconv{i + 1}"] = bs
    if len(block_kernels) > 1:
        raise r.fail(f"{trunk}: mixed kernel sizes {sorted(block_kernels)} are not supported")
    block_kernel = block_kernels.pop()
    _put_bn(params, stats, "trunk_norm", p.bn(trunk, c))
    p.activation(trunk)

    # Policy head.
    head = r.token("policy head name")
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
    pp["p2"], k_p2 = p.conv(head, pc, 1)
    pp["pass"] = {"kernel": p.matmul(head, 3 * gc, 1)}
    params["policy"], stats["policy"] = pp, ps

    # Value head.
    head = r.token("value head name")
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
    score_channels = 4 if version == 8 else 6
    vp["sv3"] = {
        "kernel": p.matmul(head, hidden, score_channels),
        "bias": p.matbias(head, score_channels),
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
        score_channels=score_channels,
        num_spatial=num_spatial,
        num_global=num_global,
        initial_kernel=initial_kernel,
        block_kernel=block_kernel,
        bn_epsilon=BN_EPSILON,
    )
    return KataGoModel(name, version, num_spatial, num_global, config, params, stats)


def load_model(path: str | Path) -> KataGoModel:
    """Load a KataGo ``.bin.gz``, ``.txt.gz``, ``.bin``, ``.txt`` or ``.gz`` model file.

    Raises ``ValueError`` (naming the file and what is wrong) for anything
    unreadable, malformed or unsupported; ``FileNotFoundError`` if absent.
    """
    path = Path(path)
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


def save_model(
    path: str | Path,
    config: KataGoConfig,
    variables: dict[str, Params],
    *,
    name: str = "gojax",
    version: int = 8,
) -> None:
    """Write a ``KataGoNet``'s variables as a KataGo model file (binary or text by suffix).

    BN running statistics are folded into each layer's scale and bias (with
    mean 0, variance 1, epsilon 1e-20 in the file), as KataGo's own exporter
    does after training. ``config.score_channels`` must fit ``version``; of a net with
    ``policy_outputs=2`` only the move policy (channel 0) is written.
    """
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"model version {version} is not supported")
    if config.score_channels != (4 if version == 8 else 6):
        raise ValueError(f"version {version} needs score_channels {4 if version == 8 else 6}")
    if not name or any(ch.isspace() for ch in name):
        raise ValueError(f"model name must be one non-empty token, not {name!r}")
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

    def matmul(label: str, kernel: np.ndarray) -> None:
        tokens(label, *kernel.shape)
        floats(kernel)

    def matbias(label: str, bias: np.ndarray) -> None:
        tokens(label, bias.shape[0])
        floats(bias)

    c = config.trunk_channels
    tokens(name, version, config.num_spatial, config.num_global)
    tokens("trunk", len(config.blocks), c, config.mid_channels, config.regular_channels)
    tokens(config.mid_channels - config.regular_channels or 1, config.gpool_channels)
    conv("conv1", params["conv1"]["kernel"])
    matmul("ginputw", params["ginput"]["kernel"])
    for i, kind in enumerate(config.blocks):
        key = f"rconv{i + 1}"
        bp, bs = params[key], stats[key]
        tokens("ordinary_block" if kind == ORDINARY else "gpool_block", key)
        bn(f"{key}/norm1", bp["norm1"], bs["norm1"])
        tokens(f"{key}/actv1")
        if kind == ORDINARY:
            conv(f"{key}/w1", bp["w1"]["kernel"])
        else:
            conv(f"{key}/w1a", bp["w1a"]["kernel"])
            conv(f"{key}/w1b", bp["w1b"]["kernel"])
            bn(f"{key}/norm1b", bp["norm1b"], bs["norm1b"])
            tokens(f"{key}/actv1b")
            matmul(f"{key}/w1r", bp["w1r"]["kernel"])
        bn(f"{key}/norm2", bp["norm2"], bs["norm2"])
        tokens(f"{key}/actv2")
        conv(f"{key}/w2", bp["w2"]["kernel"])
    bn("trunk/norm", params["trunk_norm"], stats["trunk_norm"])
    tokens("trunk/actv")
    pp, ps = params["policy"], stats["policy"]
    tokens("policyhead")
    conv("p1/intermediate_conv/w", pp["p1"]["kernel"])
    conv("g1/w", pp["g1"]["kernel"])
    bn("g1/norm", pp["g1_norm"], ps["g1_norm"])
    tokens("g1/actv")
    matmul("matmulg2w", pp["g2"]["kernel"])
    bn("p1/norm", pp["p1_norm"], ps["p1_norm"])
    tokens("p1/actv")
    # A version-8 file holds the move policy alone: an opponent-reply channel stays behind.
    conv("p2/w", pp["p2"]["kernel"][..., :1])
    matmul("matmulpass", pp["pass"]["kernel"][..., :1])
    vp, vs = params["value"], stats["value"]
    tokens("valuehead")
    conv("v1/w", vp["v1"]["kernel"])
    bn("v1/norm", vp["v1_norm"], vs["v1_norm"])
    tokens("v1/actv")
    matmul("v2/w", vp["v2"]["kernel"])
    matbias("v2/b", vp["v2"]["bias"])
    tokens("v2/actv")
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
