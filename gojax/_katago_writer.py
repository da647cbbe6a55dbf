"""Writing a ``gojax.nn.KataGoNet``'s variables as a KataGo model file
(``gojax.katago_model.save_model``): BatchNorm statistics folded into each layer's scale
and bias, the records in KataGo's order, binary or text, gzipped by the file's name.

Separate from the reader (``gojax.katago_model``, ``gojax._katago_format``): the two
share only the format's constants, and a file written here is checked by reading it
back (``train.export``). Public through ``gojax.katago_model``.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np

from gojax._katago_format import _ACTIVATIONS, SUPPORTED_VERSIONS, Params
from gojax.atomic import write_atomic
from gojax.katago_outputs import OutputSpec, score_channels
from gojax.nn import ORDINARY, KataGoConfig


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
