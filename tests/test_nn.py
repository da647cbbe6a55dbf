"""KataGo model files, the Flax nets, output post-processing, and KataGo's own numbers."""

from __future__ import annotations

import functools
import gzip
import json
from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import reference_path

from gojax import katago_model, katago_outputs
from gojax import nn as gnn
from gojax._board import BLACK, WHITE

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"
# Positions without ko, atari, ladders, passes or territory (KATAGO_NOTES verification status).
SIMPLE_POSITIONS = [
    "g101-2-m7",
    "g101-3-m10",
    "g101-14-m2",
    "g101-14-m8",
    "g101-14-m9",
    "g101-15-m2",
]
COLUMNS = "ABCDEFGHJKLMNOPQRST"
# KataGo rule presets: (ko rule, multi-stone suicide legal); all are area scoring, no tax.
RULES = {
    "tromp-taylor": ("positional", True),
    "chinese": ("simple", False),
    "chinese-ogs": ("positional", False),
    "aga": ("situational", False),
    "new-zealand": ("situational", True),
}
KO_GLOBALS = {"simple": (0.0, 0.0), "positional": (1.0, 0.5), "situational": (1.0, -0.5)}


@functools.cache
def reference_model() -> katago_model.KataGoModel:
    return katago_model.load_model(reference_path("katago", MODEL))


@functools.cache
def reference_positions() -> dict[str, dict]:
    path = reference_path("katago", "positions.jsonl")
    return {p["id"]: p for p in map(json.loads, path.read_text().splitlines())}


@functools.cache
def jitted_apply(module: gnn.KataGoNet):
    return jax.jit(module.apply)


# --- A small numpy featurizer (KataGo input version 7) for simple positions -----------------


def _chain(board: np.ndarray, r: int, c: int) -> tuple[set, set]:
    """Stones of the chain at (r, c) and its liberties, by flood fill."""
    n = board.shape[0]
    colour = board[r, c]
    stones, liberties, todo = {(r, c)}, set(), deque([(r, c)])
    while todo:
        y, x = todo.popleft()
        for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
            if 0 <= ny < n and 0 <= nx < n:
                if board[ny, nx] == 0:
                    liberties.add((ny, nx))
                elif board[ny, nx] == colour and (ny, nx) not in stones:
                    stones.add((ny, nx))
                    todo.append((ny, nx))
    return stones, liberties


def _point(vertex: str, size: int) -> tuple[int, int]:
    """GTP vertex -> (row from the top, column)."""
    return size - int(vertex[1:]), COLUMNS.index(vertex[0].upper())


def _replay(size: int, moves: list) -> np.ndarray:
    """Board after ``moves`` (+1 black, -1 white), with captures."""
    board = np.zeros((size, size), np.int8)
    for colour, vertex in moves:
        assert vertex.lower() != "pass", "the simple featurizer has no pass handling"
        me = BLACK if colour == "B" else WHITE
        r, c = _point(vertex, size)
        board[r, c] = me
        for ny, nx in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= ny < size and 0 <= nx < size and board[ny, nx] == -me:
                stones, liberties = _chain(board, ny, nx)
                if not liberties:
                    for s in stones:
                        board[s] = 0
    return board


def _komi_wave(self_komi: float, area: int) -> float:
    """Global 18: where komi sits between the achievable (parity) scores."""
    if area % 2 == 0:
        floor = 2.0 * np.floor(self_komi / 2.0)
    else:
        floor = 2.0 * np.floor((self_komi - 1.0) / 2.0) + 1.0
    d = min(max(self_komi - floor, 0.0), 2.0)
    return d if d < 0.5 else (1.0 - d if d < 1.5 else d - 2.0)


def katago_features(position: dict, tensor_size: int | None = None):
    """``(spatial [T, T, 22], global [19], legal [T*T+1])`` for a simple position.

    Planes 0-5, 9-13 and the area planes 18/19 (area scoring, no territory
    here: each stone counts for its owner); globals 5-8 and 18. The board
    sits in the top-left of a ``T x T`` tensor (``T`` = board size by default).
    """
    size = position["size"]
    t = tensor_size or size
    board = _replay(size, position["moves"])
    me = BLACK if position["to_move"] == "B" else WHITE
    spatial = np.zeros((t, t, 22), np.float32)
    spatial[:size, :size, 0] = 1.0
    spatial[:size, :size, 1] = board == me
    spatial[:size, :size, 2] = board == -me
    for r in range(size):
        for c in range(size):
            if board[r, c] != 0:
                libs = len(_chain(board, r, c)[1])
                if libs <= 3:
                    spatial[r, c, 2 + libs] = 1.0
    # Planes 9-13: the last five moves, most recent (the opponent's) first, alternating.
    for k, (colour, vertex) in enumerate(reversed(position["moves"][-5:])):
        mover = BLACK if colour == "B" else WHITE
        if mover != (-me if k % 2 == 0 else me):
            break
        r, c = _point(vertex, size)
        spatial[r, c, 9 + k] = 1.0
    spatial[:size, :size, 18] = board == me
    spatial[:size, :size, 19] = board == -me

    ko, suicide = RULES[position["rules"]]
    self_komi = position["komi"] if me == WHITE else -position["komi"]
    self_komi = float(np.clip(self_komi, -(size * size + 20), size * size + 20))
    global_ = np.zeros(19, np.float32)
    global_[5] = self_komi / 20.0
    global_[6], global_[7] = KO_GLOBALS[ko]
    global_[8] = float(suicide)
    global_[18] = _komi_wave(self_komi, size * size)

    legal = np.zeros(t * t + 1, bool)
    policy = np.array(position["katago"]["policy"], dtype=object).reshape(size, size)
    legal[:-1].reshape(t, t)[:size, :size] = policy != None  # noqa: E711 (object array)
    legal[-1] = True
    return spatial, global_, legal


def _crop(flat: np.ndarray, t: int, size: int) -> np.ndarray:
    """``[..., t*t]`` map -> ``[..., size*size]`` of its top-left corner."""
    return flat.reshape(*flat.shape[:-1], t, t)[..., :size, :size].reshape(*flat.shape[:-1], -1)


def _katago_expected(position: dict) -> dict[str, np.ndarray]:
    k = position["katago"]
    policy = [np.nan if v is None else v for v in k["policy"]] + [k["policyPass"]]
    return {
        "policy": np.array(policy),
        "white_win": np.array(k["whiteWin"]),
        "white_loss": np.array(k["whiteLoss"]),
        "no_result": np.array(k["noResult"]),
        "white_lead": np.array(k["whiteLead"]),
        "white_score_selfplay": np.array(k["whiteScoreSelfplay"]),
        "white_score_selfplay_sq": np.array(k["whiteScoreSelfplaySq"]),
        "white_ownership": np.array(k["whiteOwnership"]),
    }


# Tolerances: KataGo prints policy to 1e-6, outcomes to 1e-6, scores to 1e-3, ownership to 1e-7.
TOLERANCES = {
    "policy": 1e-5,
    "white_win": 1e-5,
    "white_loss": 1e-5,
    "no_result": 1e-5,
    "white_lead": 2e-3,
    "white_score_selfplay": 2e-3,
    "white_score_selfplay_sq": 5e-3,
    "white_ownership": 1e-5,
}


@pytest.mark.parametrize("position_id", SIMPLE_POSITIONS)
def test_full_pipeline_matches_katago(position_id):
    """Features -> loaded KataGoNet -> postprocess equals KataGo's ``kata-raw-nn 0``."""
    model = reference_model()
    position = reference_positions()[position_id]
    spatial, global_, legal = katago_features(position)
    raw = jitted_apply(model.module())(model.variables, spatial[None], global_[None])
    ko, _ = RULES[position["rules"]]
    to_play = np.array([BLACK if position["to_move"] == "B" else WHITE])
    out = katago_outputs.postprocess(
        raw, legal[None], to_play, rules_ko_simple=ko == "simple", version=model.version
    )
    expected = _katago_expected(position)
    # KataGo's illegal moves (null) are exactly ours at probability 0.
    ours = np.asarray(out["policy"][0])
    np.testing.assert_array_equal(ours == 0, np.isnan(expected["policy"]))
    worst = {}
    for key, want in expected.items():
        got = np.asarray(out[key][0])
        diff = float(np.nanmax(np.abs(got - want)))
        worst[key] = diff
        assert diff <= TOLERANCES[key], f"{position_id} {key}: off by {diff:.3g}"
    print(position_id, {k: f"{v:.1e}" for k, v in worst.items()})


def test_area_planes_matter():
    """Planes 18/19 (stones count as area under area scoring) are needed to match KataGo."""
    model = reference_model()
    position = reference_positions()["g101-14-m8"]
    spatial, global_, legal = katago_features(position)
    without = spatial.copy()
    without[..., 18:20] = 0.0
    apply = jitted_apply(model.module())
    a = apply(model.variables, spatial[None], global_[None])["policy_logits"]
    b = apply(model.variables, without[None], global_[None])["policy_logits"]
    assert float(jnp.max(jnp.abs(a - b))) > 1e-2


# --- Model files ------------------------------------------------------------------------------


def test_reference_model_loads_with_expected_shapes():
    model = reference_model()
    # What apply takes is on the device already: numpy arguments are copied in at every call.
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(model.variables))
    assert model.name == "g170-b6c96-s175395328-d26788732"
    assert (model.version, model.num_spatial, model.num_global) == (8, 22, 19)
    cfg = model.config
    assert cfg.blocks == ("ordinary", "ordinary", "gpool", "ordinary", "gpool", "ordinary")
    assert (cfg.trunk_channels, cfg.regular_channels, cfg.gpool_channels) == (96, 64, 32)
    assert (cfg.initial_kernel, cfg.block_kernel, cfg.score_channels) == (5, 3, 4)
    p = model.params
    shapes = {
        ("conv1", "kernel"): (5, 5, 22, 96),
        ("ginput", "kernel"): (19, 96),
        ("rconv1", "w1", "kernel"): (3, 3, 96, 96),
        ("rconv1", "norm2", "scale"): (96,),
        ("rconv3", "w1a", "kernel"): (3, 3, 96, 64),
        ("rconv3", "w1b", "kernel"): (3, 3, 96, 32),
        ("rconv3", "w1r", "kernel"): (96, 64),
        ("rconv3", "w2", "kernel"): (3, 3, 64, 96),
        ("policy", "g2", "kernel"): (96, 32),
        ("policy", "p2", "kernel"): (1, 1, 32, 1),
        ("policy", "pass", "kernel"): (96, 1),
        ("value", "v2", "kernel"): (96, 64),
        ("value", "v3", "bias"): (3,),
        ("value", "sv3", "kernel"): (64, 4),
        ("value", "ownership", "kernel"): (1, 1, 32, 1),
    }
    for keys, shape in shapes.items():
        leaf = functools.reduce(lambda tree, k: tree[k], keys, p)
        assert leaf.shape == shape and leaf.dtype == np.float32, keys
    assert model.num_params() == 1_028_743
    # The loaded variables have exactly the structure and shapes of the b6c96 preset.
    module = gnn.b6c96()
    init = jax.eval_shape(
        lambda: module.init(jax.random.PRNGKey(0), *gnn.example_inputs(module, 1, 9))
    )
    as_shapes = lambda tree: jax.tree.map(lambda a: tuple(a.shape), tree)
    learned = {k: v for k, v in model.variables.items() if k != gnn.WINOGRAD}
    assert as_shapes(init) == as_shapes(learned)
    assert model.config == module.config
    # On a CPU, plus one transformed kernel [36, C_in, C_out] per 3x3 convolution, and
    # the global-pooling blocks' two first kernels side by side, as their one call reads them.
    if gnn.WINOGRAD in model.variables:
        prepared = model.variables[gnn.WINOGRAD]
        assert as_shapes(prepared["rconv1"]["w1"]) == {"u": (36, 96, 96)}
        assert as_shapes(prepared["rconv3"]) == {
            "u": (36, 96, 96),
            "kernel": (3, 3, 96, 96),
            "w2": {"u": (36, 64, 96)},
        }
        assert len(jax.tree.leaves(prepared)) == 14
        params = model.variables["params"]["rconv3"]
        side_by_side = np.concatenate([params["w1a"]["kernel"], params["w1b"]["kernel"]], -1)
        np.testing.assert_array_equal(prepared["rconv3"]["kernel"], side_by_side)


def _corrupt(data: bytes, case: str) -> bytes:
    """A broken copy of the decompressed reference model."""
    if case == "version":
        return data.replace(b"\n8\n22\n19\n", b"\n99\n22\n19\n", 1)
    if case == "nan":
        at = data.index(b"@BIN@") + 5 + 4 * 7
        return data[:at] + np.float32(np.nan).tobytes() + data[at + 4 :]
    if case == "truncated":
        return data[: data.index(b"rconv3/w1a") + 200]
    if case == "kind":
        return data.replace(b"gpool_block", b"dilated_block", 1)
    if case == "token":
        return data.replace(b"\n96\n96\n64\n", b"\nx6\n96\n64\n", 1)
    raise AssertionError(case)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("gzip", "not a readable gzip file"),
        ("version", "model version 99 is not supported (supported: 8-17)"),
        ("nan", "non-finite weight in layer trunk/conv1"),
        ("truncated", "truncated at layer trunk/rconv3/w1a: expected 55296 floats"),
        ("kind", "unknown block kind 'dilated_block' at block 3"),
        ("token", "trunk: trunk channels (an integer), found 'x6'"),
    ],
)
def test_corrupt_model_files_raise_clear_errors(tmp_path, case, message):
    raw = reference_path("katago", MODEL).read_bytes()
    path = tmp_path / f"broken-{case}.bin.gz"
    if case == "gzip":
        path.write_bytes(raw[: len(raw) // 2])
    else:
        data = _corrupt(gzip.decompress(raw), case)
        path.write_bytes(gzip.compress(data, compresslevel=1))
    with pytest.raises(ValueError) as error:
        katago_model.load_model(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_bad_file_names_and_text_in_binary(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"x")
    with pytest.raises(ValueError, match="model file names end in"):
        katago_model.load_model(path)
    path = tmp_path / "model.bin"
    path.write_bytes(b"name 8 22 19 trunk 1 16 16 8 8 8 conv1 5 5 22 16 1 1 0.5 0.25")
    with pytest.raises(ValueError, match="expected a binary float block"):
        katago_model.load_model(path)


def _random_variables(module: gnn.KataGoNet, size: int, seed: int = 0) -> dict:
    """Initialised variables with random BN statistics, so that folding is exercised."""
    variables = jax.jit(module.init)(jax.random.PRNGKey(seed), *gnn.example_inputs(module, 1, size))
    leaves, tree = jax.tree.flatten(variables["batch_stats"])
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), len(leaves))
    stats = [
        jax.random.uniform(k, x.shape, minval=0.5, maxval=2.0)
        for k, x in zip(keys, leaves, strict=True)
    ]
    return {"params": variables["params"], "batch_stats": jax.tree.unflatten(tree, stats)}


@pytest.mark.parametrize(("version", "suffix"), [(8, ".bin.gz"), (9, ".txt.gz"), (10, ".bin")])
def test_save_and_load_round_trip(tmp_path, version, suffix):
    """A tiny net written in KataGo's format loads back with the same outputs (versions 8-10)."""
    config = gnn.tiny.keywords["config"]
    if version >= 9:
        config = type(config)(**{**config.__dict__, "score_channels": 6})
    module = gnn.KataGoNet(config)
    variables = _random_variables(module, 7, seed=version)
    path = tmp_path / f"tiny{suffix}"
    katago_model.save_model(path, config, variables, name="tiny-test", version=version)
    model = katago_model.load_model(path)
    assert (model.name, model.version, model.config) == ("tiny-test", version, config)
    spatial, global_ = gnn.example_inputs(module, 2, 7)
    key = jax.random.PRNGKey(3)
    spatial = spatial.at[..., 1:].set(jax.random.bernoulli(key, 0.3, (2, 7, 7, 21)))
    global_ = jax.random.normal(key, (2, 19))
    want = jax.jit(module.apply)(variables, spatial, global_)
    got = jax.jit(model.module().apply)(model.variables, spatial, global_)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)


# --- Networks ---------------------------------------------------------------------------------

PRESET_PARAMS = {
    "tiny": 18_703,
    "b6c96": 1_028_743,
    "b6c64": 482_855,
    "b10c128": 2_966_759,
    "b15c192": 9_674_535,
    "b18c384": 46_641_991,
    "b20c256": 23_152_535,
    "b40c256": 45_991_831,
    "b60c320": 106_705_799,
    "agz_tiny": 366_533,
    # A second tower: input conv 2,448 + BN 32 + 2 blocks of 4,672.
    "agz_tiny_sep": 366_533 + 11_824,
    "agz_tiny_conv": 366_533,
    "agz_tiny_sep_conv": 366_533 + 11_824,
    # Six more blocks of 4,672 a tower.
    "agz_b8c16": 366_533 + 6 * 4_672,
    "agz_b8c16_sep": 366_533 + 6 * 4_672 + 2_480 + 8 * 4_672,
    "agz_b8c16_conv": 366_533 + 6 * 4_672,
    "agz_b8c16_sep_conv": 366_533 + 6 * 4_672 + 2_480 + 8 * 4_672,
    "agz_b20c256": 22_827_877,
    "alphago": 7_863_148,
    "tiny_nbt": 39_807,
    "b5c192nbt": 1_946_727,
    "b10c384nbt": 14_813_463,
    # By hand: 5x5 input conv 211,200 + global 7,296; a nested block 1,477,248 (BN 768,
    # 1x1 down 73,728, two inner blocks of 664,320, BN 384, 1x1 up 73,728), a gpool one
    # 1,391,232 (inner gpool block 578,304); 13 + 5 of them; trunk BN 768; policy head
    # 44,160; value head 75,047.
    "b18c384nbt": 26_498_855,
    "b28c512nbt": 72_998_407,
    "alphago_tiny": 141_452,
    "alphago_tiny_raw": 141_452,
}


def test_preset_parameter_counts():
    assert set(gnn.PRESETS) == set(PRESET_PARAMS)
    for name, ctor in gnn.PRESETS.items():
        count = gnn.count_params(ctor())
        assert count == PRESET_PARAMS[name], name
        assert f"{count:,} parameters" in ctor.__doc__, name


def test_g170_block_layout():
    assert gnn.g170_blocks(6) == ("ordinary", "ordinary", "gpool") * 2
    assert gnn.b20c256.keywords["config"].blocks.count("gpool") == 6


def test_nbt_block_layout():
    """KataGo's nbt layouts: the first inner block gpool in blocks 3, 6, ... but not the last."""

    def gpool_blocks(preset):
        blocks = gnn.PRESETS[preset].keywords["config"].blocks
        assert all(block[0] == "nested" and len(block) == 3 for block in blocks)
        assert all(block[2] == "ordinary" for block in blocks)
        return [i + 1 for i, block in enumerate(blocks) if block[1] == "gpool"]

    assert gpool_blocks("b18c384nbt") == [3, 6, 9, 12, 15]
    assert gpool_blocks("b28c512nbt") == [3, 6, 9, 12, 15, 18, 21, 24, 27]
    assert gpool_blocks("b10c384nbt") == [3, 6, 9]
    assert gpool_blocks("b5c192nbt") == [2, 4]
    config = gnn.b18c384nbt.keywords["config"]
    # Inner gpool blocks split the 192-wide stream into 128 regular + 64 pooled channels.
    assert (config.mid_channels, config.regular_channels, config.gpool_channels) == (192, 128, 64)


def _assert_padded_matches(apply, variables, spatial, global_, size, pad):
    small = apply(variables, spatial[None, :size, :size], global_[None])
    big = apply(variables, spatial[None], global_[None])
    np.testing.assert_allclose(
        _crop(np.asarray(big["policy_logits"][:, :-1]), pad, size),
        small["policy_logits"][:, :-1],
        atol=1e-5,
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        _crop(np.asarray(big["ownership"]), pad, size), small["ownership"], atol=1e-5, rtol=1e-5
    )
    for key in ("value_logits", "score"):
        np.testing.assert_allclose(big[key], small[key], atol=1e-5, rtol=1e-5, err_msg=key)
    np.testing.assert_allclose(
        big["policy_logits"][:, -1], small["policy_logits"][:, -1], atol=1e-5, rtol=1e-5
    )


def test_masking_small_board_in_a_19x19_tensor():
    """A 9x9 position padded into 19x19 (mask 0 off the board) gives the 9x9 outputs."""
    model = reference_model()
    position = reference_positions()["g101-15-m2"]
    spatial, global_, _ = katago_features(position, tensor_size=19)
    _assert_padded_matches(jitted_apply(model.module()), model.variables, spatial, global_, 9, 19)


def test_masking_with_random_statistics():
    """Same, for a random tiny net with non-trivial BN statistics (no reference data needed)."""
    module = gnn.tiny()
    variables = _random_variables(module, 19)
    rng = np.random.default_rng(0)
    spatial = np.zeros((13, 13, 22), np.float32)
    spatial[:7, :7, 0] = 1.0
    spatial[:7, :7, 1:] = rng.random((7, 7, 21)) < 0.3
    global_ = rng.normal(size=19).astype(np.float32)
    _assert_padded_matches(jax.jit(module.apply), variables, spatial, global_, 7, 13)


def test_katago_net_training_mode_uses_on_board_statistics():
    module = gnn.tiny()
    spatial, global_ = gnn.example_inputs(module, 2, 9)
    variables = jax.jit(module.init)(jax.random.PRNGKey(0), spatial, global_)
    train = jax.jit(functools.partial(module.apply, train=True, mutable=["batch_stats"]))
    out, updates = train(variables, spatial, global_)
    assert out["policy_logits"].shape == (2, 82)
    assert out["value_logits"].shape == (2, 3)
    assert out["score"].shape == (2, 4)
    assert out["ownership"].shape == (2, 81)
    # Padding must not change the statistics: BN statistics count on-board points only.
    big = jnp.zeros((2, 13, 13, 22)).at[:, :9, :9].set(spatial)
    _, padded = train(variables, big, global_)
    for a, b in zip(jax.tree.leaves(updates), jax.tree.leaves(padded), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_alphago_zero_net_shapes():
    module = gnn.agz_tiny()
    planes = jnp.zeros((3, 9, 9, 17)).at[..., 16].set(1.0)
    variables = jax.jit(module.init)(jax.random.PRNGKey(0), planes)
    out = jax.jit(module.apply)(variables, planes)
    assert out["policy_logits"].shape == (3, 82)
    assert out["value"].shape == (3,)
    assert bool(jnp.all(jnp.abs(out["value"]) <= 1.0))
    train = jax.jit(functools.partial(module.apply, train=True, mutable=["batch_stats"]))
    out, _ = train(variables, planes)
    assert out["policy_logits"].shape == (3, 82)


def test_alphago_zero_variants_drop_the_skips_and_split_the_towers():
    """Fig. 4's "conv" nets are the blocks without their skips; its "sep" nets a second
    tower that only the value reads, so that each loss trains its own tower alone."""
    planes = jax.random.normal(jax.random.key(0), (2, 5, 5, 17))
    dual = gnn.agz_tiny()
    variables = dual.init(jax.random.key(1), planes)
    conv = gnn.agz_tiny_conv()
    assert jax.tree.structure(conv.init(jax.random.key(1), planes)) == jax.tree.structure(variables)
    # The same parameters: equal outputs unless the skips carry something.
    residual, plain = dual.apply(variables, planes), conv.apply(variables, planes)
    assert not np.allclose(residual["value"], plain["value"])

    x = jax.random.normal(jax.random.key(2), (2, 5, 5, 16))
    block = {k: v["block1"] for k, v in variables.items()}
    for skip in (True, False):
        out, state = gnn._AGZResBlock(16, residual=skip).apply(
            block, x, False, capture_intermediates=True
        )
        h = state["intermediates"]["bn2"]["__call__"][0]  # the second layer, normalised
        np.testing.assert_allclose(out, jax.nn.relu(x + h if skip else h), atol=1e-6)

    sep = gnn.agz_tiny_sep()
    sep_vars = sep.init(jax.random.key(1), planes)
    tower = {k for k in sep_vars["params"] if k.startswith("value_tower_")}
    assert tower == {
        "value_tower_conv",
        "value_tower_bn",
        "value_tower_block1",
        "value_tower_block2",
    }

    def grads(loss):
        return jax.grad(lambda p: loss(sep.apply({**sep_vars, "params": p}, planes)))(
            sep_vars["params"]
        )

    policy = grads(lambda out: jnp.sum(out["policy_logits"] ** 2))
    value = grads(lambda out: jnp.sum(out["value"] ** 2))
    for name in sep_vars["params"]:
        by_policy = any(np.any(g != 0) for g in jax.tree.leaves(policy[name]))
        by_value = any(np.any(g != 0) for g in jax.tree.leaves(value[name]))
        assert by_policy == (not name.startswith("value")), name
        assert by_value == name.startswith("value"), name


@pytest.mark.parametrize(
    "planes, kernel, features", [(17, 3, 16), (18, 3, 8), (16, 3, 8), (22, 5, 8), (5, 3, 4)]
)
def test_input_conv_is_flax_conv_with_the_same_parameters(planes, kernel, features):
    """The split input convolution (16-aligned planes + shifted multiply-adds) keeps nn.Conv's
    parameter, initial values and result, with or without planes left over."""
    import flax.linen as nn

    x = jax.random.normal(jax.random.key(0), (3, 9, 9, planes))
    reference = nn.Conv(features, (kernel, kernel), padding="SAME", use_bias=False)
    split = gnn._InputConv(features, kernel)
    ref_vars = reference.init(jax.random.key(1), x)
    new_vars = split.init(jax.random.key(1), x)
    np.testing.assert_array_equal(ref_vars["params"]["kernel"], new_vars["params"]["kernel"])
    np.testing.assert_allclose(
        split.apply(new_vars, x), reference.apply(ref_vars, x), atol=1e-5, rtol=1e-5
    )
    # Gradients (the learner trains through it) agree too.
    grads = [
        jax.grad(lambda v, m=m: jnp.sum(jnp.sin(m.apply(v, x))))(v)["params"]["kernel"]
        for m, v in ((reference, ref_vars), (split, new_vars))
    ]
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-4, rtol=1e-4)


# --- Post-processing ----------------------------------------------------------------------------


def _raw(batch: int = 2, points: int = 4, score_channels: int = 4) -> dict[str, jnp.ndarray]:
    """The same random raw outputs in every row."""
    rng = np.random.default_rng(1)
    rows = lambda *shape: jnp.asarray(
        np.tile(rng.normal(size=(1, *shape)), (batch, 1)), jnp.float32
    )
    return {
        "policy_logits": rows(points + 1),
        "value_logits": jnp.asarray([[1.0, -0.5, 0.3]] * batch, jnp.float32),
        "score": rows(score_channels),
        "ownership": rows(points),
    }


def test_postprocess_no_result_only_under_simple_ko():
    raw = _raw()
    legal = jnp.ones((2, 5), bool)
    white = jnp.array([WHITE, WHITE])
    two_way = katago_outputs.postprocess(raw, legal, white, rules_ko_simple=False)
    three_way = katago_outputs.postprocess(raw, legal, white, rules_ko_simple=True)
    assert float(two_way["no_result"][0]) == 0.0
    e = np.exp([1.0, -0.5, 0.3])
    np.testing.assert_allclose(two_way["white_win"][0], e[0] / (e[0] + e[1]), rtol=1e-6)
    np.testing.assert_allclose(three_way["no_result"][0], e[2] / e.sum(), rtol=1e-6)
    # Scores are scaled by the probability of a result.
    lead = 20.0 * float(raw["score"][0, 2])
    np.testing.assert_allclose(two_way["white_lead"][0], lead, rtol=1e-6)
    np.testing.assert_allclose(three_way["white_lead"][0], lead * (1 - e[2] / e.sum()), rtol=1e-6)
    # Per-row ko rules work too.
    mixed = katago_outputs.postprocess(raw, legal, white, rules_ko_simple=jnp.array([True, False]))
    assert float(mixed["no_result"][0]) > 0 and float(mixed["no_result"][1]) == 0


def test_postprocess_perspective_and_policy():
    raw = _raw()
    legal = jnp.array([[True, False, True, True, True]] * 2)
    fn = jax.jit(functools.partial(katago_outputs.postprocess, rules_ko_simple=False, version=8))
    out = fn(raw, legal, jnp.array([WHITE, BLACK]))
    # Same raw outputs: Black to move swaps win/loss and negates scores and ownership.
    np.testing.assert_allclose(out["white_win"][0], out["white_loss"][1], rtol=1e-6)
    np.testing.assert_allclose(out["white_lead"][0], -out["white_lead"][1], rtol=1e-6)
    np.testing.assert_allclose(
        out["white_score_selfplay"][0], -out["white_score_selfplay"][1], rtol=1e-6
    )
    np.testing.assert_allclose(
        out["white_score_selfplay_sq"][0], out["white_score_selfplay_sq"][1], rtol=1e-6
    )
    np.testing.assert_allclose(out["white_ownership"][0], -out["white_ownership"][1], rtol=1e-6)
    np.testing.assert_allclose(out["white_ownership"][0], np.tanh(raw["ownership"][0]), rtol=1e-6)
    stdev = 20.0 * np.log1p(np.exp(float(raw["score"][0, 1])))
    np.testing.assert_allclose(out["score_stdev"][0], stdev, rtol=1e-6)
    assert float(out["policy"][0, 1]) == 0.0
    np.testing.assert_allclose(jnp.sum(out["policy"], axis=-1), 1.0, rtol=1e-6)
    assert float(out["var_time_left"][0]) == -1.0


@pytest.mark.parametrize("version", [9, 10])
def test_postprocess_shortterm_errors(version):
    raw = _raw(score_channels=6)
    out = katago_outputs.postprocess(
        raw,
        jnp.ones((2, 5), bool),
        jnp.array([WHITE, BLACK]),
        rules_ko_simple=False,
        version=version,
    )
    sp = np.log1p(np.exp(np.asarray(raw["score"][0])))
    if version == 9:
        expected = (sp[4], 10 * sp[5])
    else:
        expected = (np.sqrt(0.25 * sp[4]), np.sqrt(30 * sp[5]))
    np.testing.assert_allclose(out["var_time_left"][0], 40 * sp[3], rtol=1e-5)
    np.testing.assert_allclose(out["shortterm_winloss_error"][0], expected[0], rtol=1e-5)
    np.testing.assert_allclose(out["shortterm_score_error"][0], expected[1], rtol=1e-5)
    with pytest.raises(ValueError, match="score outputs"):
        katago_outputs.postprocess(
            _raw(),
            jnp.ones((2, 5), bool),
            jnp.array([1, 1]),
            rules_ko_simple=False,
            version=version,
        )


def test_apply_in_chunks_equals_one_call():
    """Chunked inference (padded to whole chunks) gives the outputs of one call."""
    net = gnn.PRESETS["tiny"]()
    spatial, global_ = gnn.example_inputs(net, 5, 7)
    spatial = spatial.at[..., 1].set(jax.random.bernoulli(jax.random.key(1), 0.3, (5, 7, 7)))
    global_ = global_.at[:, 5].set(jnp.arange(5) / 10.0)
    variables = net.init(jax.random.key(0), spatial, global_)
    whole = net.apply(variables, spatial, global_, train=False)
    for chunk in (2, 3, 16, None):
        parts = gnn.apply_in_chunks(net, variables, spatial, global_, chunk=chunk)
        for key, value in whole.items():
            np.testing.assert_allclose(parts[key], value, rtol=1e-5, atol=1e-5, err_msg=key)
    if jax.default_backend() == "cpu":
        assert (gnn.default_chunk(19), gnn.default_chunk(9), gnn.default_chunk(200)) == (17, 75, 1)
    else:
        assert gnn.default_chunk(19) is None


def test_xla_flags_eigen_convolutions_unless_refused():
    from gojax._xla_flags import EIGEN_CONVOLUTIONS, prefer_eigen_convolutions

    env = {}
    assert prefer_eigen_convolutions(env) and env["XLA_FLAGS"] == EIGEN_CONVOLUTIONS
    env = {"GOJAX_EIGEN_CONVOLUTIONS": "0"}
    assert not prefer_eigen_convolutions(env) and "XLA_FLAGS" not in env
    env = {"GOJAX_EIGEN_CONVOLUTIONS": "1", "XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    assert prefer_eigen_convolutions(env)
    assert env["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {EIGEN_CONVOLUTIONS}"
    assert not prefer_eigen_convolutions(env)  # already there: not added twice
    assert env["XLA_FLAGS"].count("ynn_fusion_type") == 1
    mine = "--xla_cpu_experimental_ynn_fusion_type=dot"
    own = {"XLA_FLAGS": mine}
    assert not prefer_eigen_convolutions(own)  # the user's own choice wins
    assert own["XLA_FLAGS"] == mine


def test_gpool_max_gradient_goes_to_the_first_maximum_and_is_never_nan():
    """The max part of KataGo's global pooling: the forward value is ``jnp.max``'s, the
    gradient a one-hot of the first point holding the max (``jnp.max`` would split a tie
    and divide by the count of equal points, which is 0 when XLA rounds the two uses of
    the map differently: NaN gradients)."""
    x = np.zeros((2, 3, 3, 2), np.float32)
    x[0, 0, 1, 0] = x[0, 2, 2, 0] = 2.0  # a tie: the first in row-major order takes it
    x[0, 1, 1, 1] = 0.5
    x[1, :, :, :] = -3.0  # every point below KataGo's floor of -1
    x[1, 2, 0, 1] = -0.25
    mask = np.ones((2, 3, 3, 1), np.float32)
    mask[1, 0, :, 0] = 0.0  # an off-board row: seen as -1
    channels = 2

    def max_part(x):
        return gnn.global_pool(x, jnp.asarray(mask))[:, 2 * channels :]

    np.testing.assert_array_equal(max_part(x), [[2.0, 0.5], [-1.0, -0.25]])
    weights = jnp.asarray([[1.0, 10.0], [100.0, 1000.0]])
    grad = jax.jit(jax.grad(lambda x: jnp.sum(max_part(x) * weights)))(jnp.asarray(x))
    expected = np.zeros_like(x)
    expected[0, 0, 1, 0] = 1.0
    expected[0, 1, 1, 1] = 10.0
    expected[1, 2, 0, 1] = 1000.0  # batch 1, channel 0: the floor of -1 wins, no gradient
    np.testing.assert_array_equal(grad, expected)


def test_fast_cpu_compiles_unless_a_level_is_chosen():
    from gojax._xla_flags import fast_cpu_compiles

    environ = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    assert fast_cpu_compiles(environ)
    assert environ["XLA_FLAGS"].split() == [
        "--xla_cpu_enable_fast_math=false",
        "--xla_backend_optimization_level=0",
    ]
    empty = {}
    assert fast_cpu_compiles(empty)
    assert empty["XLA_FLAGS"] == "--xla_backend_optimization_level=0"
    # A level of the user's own is kept, and nothing is added twice.
    chosen = {"XLA_FLAGS": "--xla_backend_optimization_level=2"}
    assert not fast_cpu_compiles(chosen)
    assert chosen["XLA_FLAGS"] == "--xla_backend_optimization_level=2"


_CONV_PROGRAM = """
import sys
import jax, jax.numpy as jnp
from eval import cli
assert cli.main(["show", sys.argv[1]]) == 0  # computes: the backend starts inside main
conv = jax.jit(lambda x, w: jax.lax.conv(x, w, (1, 1), "SAME"))
text = conv.lower(jnp.ones((16, 64, 19, 19)), jnp.ones((64, 64, 3, 3))).compile().as_text()
print("YNN" if "__ynn_fusion" in text else "EIGEN")
"""


@pytest.mark.parametrize("setting, expected", [(None, "EIGEN"), ("0", "YNN")])
def test_cli_commands_use_eigen_convolutions_unless_refused(tmp_path, setting, expected):
    """gojax (here a ``gojax show`` command, then a convolution) compiles convolutions for
    Eigen (gojax/_xla_flags.py) unless ``GOJAX_EIGEN_CONVOLUTIONS=0``; checked in the
    compiled program of a fresh process."""
    import os
    import subprocess
    import sys

    game = tmp_path / "game.sgf"
    game.write_text("(;GM[1]FF[4]SZ[9];B[ee];W[cc])")
    env = {
        k: v for k, v in os.environ.items() if k not in ("GOJAX_EIGEN_CONVOLUTIONS", "XLA_FLAGS")
    }
    env["JAX_PLATFORMS"] = "cpu"
    if setting is not None:
        env["GOJAX_EIGEN_CONVOLUTIONS"] = setting
    run = subprocess.run(
        [sys.executable, "-c", _CONV_PROGRAM, str(game)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == expected
