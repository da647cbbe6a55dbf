"""KataGo model versions 11-17: activation kinds, nested bottleneck blocks, the optimistic
policy, stored output multipliers, the pass hidden layer, and what is refused."""

from __future__ import annotations

import dataclasses
import gzip

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gojax import katago_model, katago_outputs
from gojax import nn as gnn
from gojax.katago_outputs import OutputSpec

SIZE = 5
# Nested bottleneck blocks (one with a gpool inner block) beside plain ones.
BLOCKS = (("nested", "ordinary", "ordinary"), ("nested", "gpool", "ordinary"), "gpool")


def _config(version: int, activation: str = "mish", **overrides) -> gnn.KataGoConfig:
    """The smallest net a file of ``version`` holds, with every kind of block."""
    outputs = 4 if version == 16 else 2 if version >= 12 else 1
    fields = dict(
        blocks=BLOCKS,
        trunk_channels=12,
        mid_channels=8,
        regular_channels=6,
        gpool_channels=2,
        policy_channels=6,
        policy_gpool_channels=4,
        value_channels=4,
        value_hidden=6,
        score_channels=4 if version == 8 else 6,
        policy_outputs=outputs,
        optimistic_policy=outputs > 1,
        activation=activation if version >= 11 else "relu",
        pass_activation=activation if version >= 15 else None,
    )
    return gnn.KataGoConfig(**{**fields, **overrides})


def _variables(config: gnn.KataGoConfig, seed: int) -> dict:
    """Random weights of about unit gain (outputs stay O(1)), BN scales near 1, biases near
    0, and random BN statistics (so that folding is exercised). Drawn with numpy on the
    shapes ``init`` would give: nothing to compile."""
    module = gnn.KataGoNet(config)
    shapes = jax.eval_shape(
        module.init, jax.random.PRNGKey(0), *gnn.example_inputs(module, 1, SIZE)
    )
    rng = np.random.default_rng(seed)

    def draw(path, x):
        if path[0].key == "batch_stats":
            value = rng.uniform(0.5, 2.0, x.shape)
        elif len(x.shape) >= 2:
            value = rng.normal(size=x.shape) * 1.2 / np.sqrt(np.prod(x.shape[:-1]))
        else:
            value = 0.3 * rng.normal(size=x.shape) + (path[-1].key == "scale")
        return value.astype(np.float32)

    return jax.tree_util.tree_map_with_path(draw, shapes)


def _inputs(batch: int = 2, seed: int = 3) -> tuple[jax.Array, jax.Array]:
    key = jax.random.PRNGKey(seed)
    spatial = jax.random.bernoulli(key, 0.3, (batch, SIZE, SIZE, 22)).astype(jnp.float32)
    spatial = spatial.at[..., 0].set(1.0)
    return spatial, jax.random.normal(key, (batch, 19))


def _outputs(config, variables, **module_kwargs):
    return jax.jit(gnn.KataGoNet(config, **module_kwargs).apply)(variables, *_inputs())


@pytest.mark.parametrize(
    ("version", "suffix"),
    [(11, ".bin.gz"), (12, ".txt.gz"), (13, ".bin"), (14, ".bin.gz"), (15, ".txt"), (16, ".gz")]
    + [(17, ".bin.gz")],
)
def test_every_version_round_trips(tmp_path, version, suffix):
    config = _config(version, activation="silu" if version == 12 else "mish")
    variables = _variables(config, seed=version)
    spec = OutputSpec(version, lead_multiplier=15.0) if version >= 13 else None
    path = tmp_path / f"net{suffix}"
    katago_model.save_model(path, config, variables, version=version, output_spec=spec)
    model = katago_model.load_model(path)
    assert (model.version, model.config) == (version, config)
    assert model.output_spec == (spec or OutputSpec(version))
    want = _outputs(config, variables)
    got = jax.jit(model.module().apply)(model.variables, *_inputs())
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5, err_msg=key)


def _conv(x, kernel):
    return jax.lax.conv_general_dilated(
        x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def _bn_act(x, bn, stats, mask, act):
    """KataGo's BN (folded from the layer's scale, bias and statistics), activation, mask."""
    scale = bn["scale"] / jnp.sqrt(stats["var"] + gnn.BN_EPSILON)
    return act(x * scale + bn["bias"] - scale * stats["mean"]) * mask


def _mish(x):
    return x * jnp.tanh(jnp.log1p(jnp.exp(x)))


def test_nested_bottleneck_block_is_katagos_formula():
    """A trunk of one nested block, computed by hand from the parameters: the 1x1 down,
    two inner ordinary blocks with their own residuals, the 1x1 up, the outer residual."""
    config = _config(15, blocks=(("nested", "ordinary", "ordinary"),))
    variables = _variables(config, seed=1)
    p, s = variables["params"], variables["batch_stats"]
    spatial, global_ = _inputs()
    mask = spatial[..., :1]
    x = _conv(spatial, p["conv1"]["kernel"]) + (global_ @ p["ginput"]["kernel"])[:, None, None]
    b, bs = p["rconv1"], s["rconv1"]
    h = _conv(_bn_act(x, b["normp"], bs["normp"], mask, _mish), b["wp"]["kernel"])
    for inner in ("inner1", "inner2"):
        i, ist = b[inner], bs[inner]
        r = _conv(_bn_act(h, i["norm1"], ist["norm1"], mask, _mish), i["w1"]["kernel"])
        h = h + _conv(_bn_act(r, i["norm2"], ist["norm2"], mask, _mish), i["w2"]["kernel"])
    x = x + _conv(_bn_act(h, b["normq"], bs["normq"], mask, _mish), b["wq"]["kernel"])
    trunk = _bn_act(x, p["trunk_norm"], s["trunk_norm"], mask, _mish)
    ownership = _conv(
        _bn_act(
            _conv(trunk, p["value"]["v1"]["kernel"]),
            p["value"]["v1_norm"],
            s["value"]["v1_norm"],
            mask,
            _mish,
        ),
        p["value"]["ownership"]["kernel"],
    )
    got = _outputs(config, variables)["ownership"]
    np.testing.assert_allclose(got, ownership.reshape(2, -1), rtol=1e-4, atol=1e-5)


def test_pass_hidden_layer_with_identity_reproduces_version_14(tmp_path):
    """KataGo's exporter writes a version-14 net as 15 with an identity pass layer
    (``[w0, w1, 0...]``, bias 0, then a selection matrix): the logits must not change."""
    v14 = _config(14)
    variables = _variables(v14, seed=5)
    v15 = dataclasses.replace(v14, pass_activation="identity")
    params = jax.tree.map(lambda x: x, variables["params"])
    w = variables["params"]["policy"]["pass"]["kernel"]  # [3 * gpool, 2]
    pc = v14.policy_channels
    params["policy"]["pass1"] = {
        "kernel": jnp.pad(w, ((0, 0), (0, pc - 2))),
        "bias": jnp.zeros(pc),
    }
    params["policy"]["pass"] = {"kernel": jnp.eye(pc, 2)}
    converted = {"params": params, "batch_stats": variables["batch_stats"]}
    path = tmp_path / "as15.bin.gz"
    katago_model.save_model(path, v15, converted, version=15)
    model = katago_model.load_model(path)
    assert model.config.pass_activation == "identity"
    want = _outputs(v14, variables)
    got = jax.jit(model.module().apply)(model.variables, *_inputs())
    for key in ("policy_logits", "optimistic_policy_logits"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_policy_optimism_mixes_the_logits_as_katago():
    config = _config(15)
    variables = _variables(config, seed=7)
    plain = _outputs(config, variables)
    assert not np.allclose(plain["policy_logits"], plain["optimistic_policy_logits"], atol=1e-3)
    full = _outputs(config, variables, policy_optimism=1.0)
    np.testing.assert_allclose(full["policy_logits"], plain["optimistic_policy_logits"], atol=1e-5)
    part = _outputs(config, variables, policy_optimism=0.2)
    mixed = plain["policy_logits"] + 0.2 * (
        plain["optimistic_policy_logits"] - plain["policy_logits"]
    )
    np.testing.assert_allclose(part["policy_logits"], mixed, rtol=1e-5, atol=1e-5)


def test_activations_are_katagos():
    x = jnp.array([-30.0, -3.0, -0.5, 0.0, 0.7, 4.0, 25.0])
    x64 = np.asarray(x, np.float64)
    np.testing.assert_allclose(gnn.activate("relu", x), np.maximum(x, 0))
    np.testing.assert_allclose(gnn.activate("identity", x), x)
    # KataGo: x * tanh(softplus(x)), its softplus log1p(exp(min(x, 20))) + max(x, 20) - 20.
    soft = np.log1p(np.exp(np.minimum(x64, 20.0))) + np.maximum(x64, 20.0) - 20.0
    np.testing.assert_allclose(gnn.activate("mish", x), x64 * np.tanh(soft), rtol=2e-6, atol=1e-10)
    np.testing.assert_allclose(gnn.activate("silu", x), x64 / (np.exp(-x64) + 1), rtol=2e-6)


def _softplus(x):
    return np.log1p(np.exp(x))


def test_stored_multipliers_and_squared_softplus_errors():
    raw_score = np.array([[0.3, -0.4, 0.5, 0.2, -1.1, 0.8]], np.float32)
    raw = {
        "policy_logits": jnp.zeros((1, 10)),
        "value_logits": jnp.array([[0.2, -0.1, 0.0]]),
        "score": jnp.asarray(raw_score),
        "ownership": jnp.zeros((1, 9)),
    }

    def run(spec):
        out = katago_outputs.postprocess(
            raw, jnp.ones((1, 10), bool), jnp.array([-1]), rules_ko_simple=False, version=spec
        )
        return {k: float(v[0]) for k, v in out.items() if v.ndim == 1}

    spec = OutputSpec(
        13,
        score_mean_multiplier=10.0,
        score_stdev_multiplier=12.0,
        lead_multiplier=8.0,
        variance_time_multiplier=30.0,
        shortterm_value_error_multiplier=0.5,
        shortterm_score_error_multiplier=20.0,
    )
    v13 = run(spec)
    s = raw_score[0].astype(np.float64)
    assert v13["white_lead"] == pytest.approx(8.0 * s[2], rel=1e-6)
    assert v13["white_score_selfplay"] == pytest.approx(10.0 * s[0], rel=1e-6)
    assert v13["score_stdev"] == pytest.approx(12.0 * _softplus(s[1]), rel=1e-6)
    assert v13["var_time_left"] == pytest.approx(30.0 * _softplus(s[3]), rel=1e-6)
    assert v13["shortterm_winloss_error"] == pytest.approx(np.sqrt(0.5 * _softplus(s[4])), 1e-6)
    assert v13["shortterm_score_error"] == pytest.approx(np.sqrt(20.0 * _softplus(s[5])), 1e-6)
    v14 = run(dataclasses.replace(spec, version=14))
    # Version 14: sqrt(softplus(x / 2)^2 * multiplier).
    assert v14["shortterm_winloss_error"] == pytest.approx(
        np.sqrt(0.5) * _softplus(s[4] / 2), rel=1e-6
    )
    assert v14["shortterm_score_error"] == pytest.approx(
        np.sqrt(20.0) * _softplus(s[5] / 2), rel=1e-6
    )
    assert v14["white_lead"] == v13["white_lead"]
    # Up to version 12 the multipliers are KataGo's defaults.
    assert run(12)["white_lead"] == pytest.approx(20.0 * s[2], rel=1e-6)


def _file(tmp_path, version: int = 15, **overrides) -> bytes:
    config = _config(version, **overrides)
    path = tmp_path / "good.bin"
    katago_model.save_model(path, config, _variables(config, seed=2), version=version)
    return path.read_bytes()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("meta", "metadata encoder version 1: nets that read SGF metadata"),
        ("passalive", "preferPassAliveUnderSuicideRules is 1"),
        ("slot", "model option 2 is 7: an option this reader does not know"),
        ("rmsnorm", "trunk norm kind 1 (RMSNorm) is not supported"),
        ("activation", "unknown activation 'ACTIVATION_GELU'"),
        ("mixed", "mixed activations are not supported"),
        ("multiplier", "lead multiplier must be positive, found -20.0"),
        ("old", "model version 7 is not supported (supported: 8-17) (versions before 8"),
        ("inner", "unknown block kind 'nested_bottleneck_block' at inner block 1"),
    ],
)
def test_unsupported_files_raise_clear_errors(tmp_path, case, message):
    data = _file(tmp_path)
    header = b"gojax\n15\n22\n19\n20.0\n20.0\n20.0\n20.0\n40.0\n0.25\n30.0\n"
    assert data.startswith(header)
    body = data[len(header) :]
    if case == "meta":
        data = header + b"1" + body[1:]
    elif case == "passalive":
        data = header + b"0\n1" + body[3:]
    elif case == "slot":
        data = header + b"0\n0\n0\n7" + body[7:]
    elif case == "rmsnorm":
        data = data.replace(b"\n8\n6\n2\n2\n0\n0\n", b"\n8\n6\n2\n2\n1\n0\n", 1)
    elif case == "activation":
        data = data.replace(b"ACTIVATION_MISH", b"ACTIVATION_GELU", 1)
    elif case == "mixed":
        at = data.index(b"ACTIVATION_MISH", data.index(b"rconv2"))
        data = data[:at] + b"ACTIVATION_RELU" + data[at + len(b"ACTIVATION_MISH") :]
    elif case == "multiplier":
        data = header.replace(b"\n20.0\n40.0", b"\n-20.0\n40.0") + body
    elif case == "old":
        data = data.replace(b"gojax\n15\n", b"gojax\n7\n", 1)
    elif case == "inner":
        data = data.replace(b"ordinary_block\nrconv1/inner1", b"nested_bottleneck_block\nx", 1)
    path = tmp_path / f"{case}.bin.gz"
    path.write_bytes(gzip.compress(data, compresslevel=1))
    with pytest.raises(ValueError) as error:
        katago_model.load_model(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_versions_refuse_configs_they_cannot_hold(tmp_path):
    relu = _config(15, activation="relu")
    variables = _variables(relu, seed=4)
    with pytest.raises(ValueError, match="version 10 needs .*pass_activation None"):
        katago_model.save_model(tmp_path / "x.bin", relu, variables, version=10)
    with pytest.raises(
        ValueError, match="version 16 needs optimistic_policy with policy_outputs 4"
    ):
        katago_model.save_model(tmp_path / "x.bin", relu, variables, version=16)
    with pytest.raises(ValueError, match="activation relu"):
        mish = _config(11)
        katago_model.save_model(tmp_path / "x.bin", mish, _variables(mish, 1), version=9)
