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

The reading of records (tokens, float blocks, layer shapes) is in
``gojax._katago_format`` and the writing in ``gojax._katago_writer``; this module
walks a file's records in the net's order into a :class:`KataGoModel`.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from gojax._katago_format import (
    _BLOCK_KINDS,
    _INNER_BLOCK_KINDS,
    NUM_GLOBAL_V7,
    NUM_SPATIAL_V7,
    SUPPORTED_VERSIONS,
    Params,
    _Parser,
    _Reader,
)
from gojax._katago_writer import save_model
from gojax.katago_outputs import OutputSpec, score_channels
from gojax.nn import (
    BN_EPSILON,
    GPOOL,
    NESTED,
    ORDINARY,
    KataGoConfig,
    KataGoNet,
    with_winograd_kernels,
)

__all__ = [
    "NUM_GLOBAL_V7",
    "NUM_SPATIAL_V7",
    "SUPPORTED_VERSIONS",
    "KataGoModel",
    "Params",
    "load_model",
    "parse_model",
    "save_model",
]


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
