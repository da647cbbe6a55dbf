"""KataGo's auxiliary opponent-reply policy: the net's second policy output, its target in
the replay buffer (the next position's policy target), its loss, a run that trains it."""

from __future__ import annotations

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gojax
from gojax.katago_model import load_model, save_model
from gojax.nn import PRESETS
from train.learner import LearnerConfig, losses
from train.loop import _to_learner_batch
from train.model import ModelSpec, build, encode, forward, init_variables, spec_from_config
from train.replay import ReplayBuffer
from train.supervised import _as_trajectories

SIZE = 5
ACTIONS = SIZE * SIZE + 1


def states(n: int = 3) -> gojax.GoState:
    positions = [gojax.new_game(SIZE, komi=0.5)]
    for action in (12, 7, 25, 13)[: n - 1]:
        positions.append(gojax.play(positions[-1], action))
    return jax.tree.map(lambda *x: jnp.stack(x), *positions)


def two_output_variables(seed: int = 0):
    spec = ModelSpec("tiny", opponent_policy=True)
    return spec, init_variables(spec, jax.random.PRNGKey(seed), SIZE)


def channel(variables, k: int):
    """The one-output net's variables holding output channel ``k`` of a two-output net."""
    out = jax.tree.map(lambda x: x, variables)
    policy = dict(out["params"]["policy"])
    policy["p2"] = {"kernel": policy["p2"]["kernel"][..., k : k + 1]}
    policy["pass"] = {"kernel": policy["pass"]["kernel"][..., k : k + 1]}
    out["params"] = {**out["params"], "policy": policy}
    return out


def test_second_output_is_the_same_head_with_its_own_final_weights():
    spec, variables = two_output_variables()
    assert variables["params"]["policy"]["p2"]["kernel"].shape[-1] == 2
    assert variables["params"]["policy"]["pass"]["kernel"].shape[-1] == 2
    inputs = encode(spec, states())
    both = forward(spec, build(spec), variables, inputs, train=False)
    plain = ModelSpec("tiny")
    for k, name in enumerate(("policy_logits", "opponent_policy_logits")):
        one = forward(plain, build(plain), channel(variables, k), inputs, train=False)
        np.testing.assert_allclose(both[name], one["policy_logits"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(both["value"], one["value"], rtol=1e-5, atol=1e-6)
        assert "opponent_policy_logits" not in one
    # Different weights: the two heads really are two predictions.
    assert not np.allclose(both["policy_logits"], both["opponent_policy_logits"])


def test_a_katago_file_keeps_the_move_policy_only(tmp_path):
    spec, variables = two_output_variables(1)
    path = tmp_path / "net.bin.gz"
    save_model(path, build(spec).config, variables)
    loaded = load_model(path)
    assert loaded.config.policy_outputs == 1
    inputs = encode(spec, states())
    mine = forward(spec, build(spec), variables, inputs, train=False)
    raw = loaded.module().apply(loaded.variables, *inputs)
    np.testing.assert_allclose(raw["policy_logits"], mine["policy_logits"], rtol=1e-4, atol=1e-4)


def test_spec_checks_and_configs_saved_before_the_key():
    with pytest.raises(ValueError, match="KataGo-architecture preset"):
        ModelSpec("agz_tiny", opponent_policy=True)
    with pytest.raises(ValueError, match="policy_outputs must be 1 or 2"):
        dataclasses.replace(PRESETS["tiny"]().config, policy_outputs=3)
    old = {"preset": "tiny", "dtype": "bfloat16"}  # a run saved before opponent_policy
    assert spec_from_config(old) == ModelSpec("tiny", dtype="bfloat16")
    assert spec_from_config({**old, "opponent_policy": True}).opponent_policy
    with pytest.raises(ValueError, match="opponent_policy_weight must be >= 0"):
        LearnerConfig(opponent_policy_weight=-0.1)


def synthetic_games(lengths: list[int], fast: set[tuple[int, int]]):
    """Finished games as ``ReplayBuffer.add`` reads them: position ``t`` of game ``g`` has
    the one-hot policy on action ``(7 g + t) % A``; ``fast`` (g, t) had no full search."""
    steps, batch = max(lengths) + 1, len(lengths)
    t = np.arange(steps)[:, None]
    g = np.arange(batch)[None, :]
    valid = t < np.asarray(lengths)[None, :]
    policy = np.zeros((steps, batch, ACTIONS), np.float32)
    np.put_along_axis(policy, ((7 * g + t) % ACTIONS)[..., None], 1.0, axis=-1)
    policy_mask = valid.copy()
    for game, move in fast:
        policy_mask[move, game] = False
    zeros = np.zeros((steps, batch), np.float32)
    return types.SimpleNamespace(
        inputs=np.broadcast_to(
            ((t * 10 + g) % 2).astype(np.uint8)[..., None, None, None],
            (steps, batch, SIZE, SIZE, 1),
        ),
        policy=policy,
        policy_mask=policy_mask,
        valid=valid,
        value_mask=valid,
        value=zeros + 1,
        score=zeros,
        score_mask=valid,
        ownership=np.zeros((steps, batch, SIZE * SIZE), np.int8),
        to_play=np.where(t % 2 == 0, 1, -1).astype(np.int8) + 0 * g,
    )


def expected_reply(game_policy_index: np.ndarray) -> np.ndarray:
    return np.eye(ACTIONS, dtype=np.float32)[game_policy_index % ACTIONS]


def test_replay_target_is_the_next_positions_policy_target():
    lengths = [5, 3, 6]
    fast = {(0, 2), (2, 5)}  # game 0's third search and game 2's last were fast
    buffer = ReplayBuffer(capacity=100)
    buffer.add(synthetic_games(lengths, fast))
    batch = buffer.sample(np.random.default_rng(0), 400, augment=False)
    game, to_play = batch["game"], batch["to_play"]
    # Recover each sample's move from its own policy: action (7 g + t) % A.
    move = (np.argmax(batch["policy"], -1) - 7 * game) % ACTIONS
    length = np.asarray(lengths)[game]
    next_full = np.array(
        [(int(g), int(m) + 1) not in fast for g, m in zip(game, move, strict=True)]
    )
    np.testing.assert_array_equal(batch["opponent_policy_mask"], (move + 1 < length) & next_full)
    has = batch["opponent_policy_mask"]
    np.testing.assert_array_equal(
        batch["opponent_policy"][has], expected_reply(7 * game + move + 1)[has]
    )
    # The reply is the opponent's: the next position has the other player to move.
    assert set(np.unique(to_play)) == {-1, 1} and has.sum() > 100
    assert (~has & (move + 1 == length)).any() and (~has & (move + 1 < length)).any()


def test_replay_target_survives_wraparound_and_eviction():
    lengths = [4, 4, 4]
    buffer = ReplayBuffer(capacity=10)  # 12 positions: game 0's first two evicted
    buffer.add(synthetic_games(lengths, set()))
    buffer.add(synthetic_games([3], set()))  # overwrites slots 2..4: games 0 gone, 1 cut
    batch = buffer.sample(np.random.default_rng(1), 300, augment=False)
    local = batch["game"] - np.where(batch["game"] >= 3, 3, 0)
    move = (np.argmax(batch["policy"], -1) - 7 * local) % ACTIONS
    length = np.where(batch["game"] >= 3, 3, 4)
    has = batch["opponent_policy_mask"]
    np.testing.assert_array_equal(has, move + 1 < length)
    np.testing.assert_array_equal(
        batch["opponent_policy"][has], expected_reply(7 * local + move + 1)[has]
    )
    assert set(np.unique(batch["game"])) == {1, 2, 3}


def test_game_records_give_the_next_move_played_as_the_reply():
    actions = np.array([12, 7, 25, 13, 3])
    game = {
        "inputs": np.zeros((5, SIZE, SIZE, 1), np.uint8),
        "action": actions,
        "to_play": np.array([1, -1, 1, -1, 1], np.int8),
        "value": np.array([1, -1, 1, -1, 1], np.float32),
        "has_value": True,
    }
    buffer = ReplayBuffer(capacity=50)
    buffer.add(_as_trajectories(game, SIZE))
    batch = buffer.sample(np.random.default_rng(5), 64, augment=False)
    # Each sample's move number, from the move its own (one-hot) target names.
    move = np.array([int(np.flatnonzero(actions == a)[0]) for a in batch["policy"].argmax(-1)])
    has = batch["opponent_policy_mask"]
    np.testing.assert_array_equal(has, move < 4)
    np.testing.assert_array_equal(
        np.argmax(batch["opponent_policy"][has], -1), actions[move[has] + 1]
    )


def test_augmentation_moves_the_reply_with_the_position():
    buffer = ReplayBuffer(capacity=100)
    buffer.add(synthetic_games([6, 6], set()))
    plain = buffer.sample(np.random.default_rng(2), 64, augment=False)
    aug = buffer.sample(np.random.default_rng(2), 64)
    for i, sym in enumerate(aug["symmetry"]):
        expected = gojax.transform_policy(jnp.asarray(plain["opponent_policy"][i]), int(sym))
        np.testing.assert_array_equal(aug["opponent_policy"][i], np.asarray(expected))
    assert len(np.unique(aug["symmetry"])) > 4


def test_loss_term_is_the_masked_cross_entropy_times_its_weight():
    spec, variables = two_output_variables(2)
    n = 3
    inputs = encode(spec, states(n))
    out = forward(spec, build(spec), variables, inputs, train=False)
    rng = np.random.default_rng(3)
    reply = rng.dirichlet(np.ones(ACTIONS), n).astype(np.float32)
    mask = np.array([True, False, True])
    batch = {
        "policy": rng.dirichlet(np.ones(ACTIONS), n).astype(np.float32),
        "policy_mask": np.ones(n, bool),
        "value": np.array([1.0, -1.0, 1.0], np.float32),
        "value_mask": np.ones(n, bool),
        "opponent_policy": reply,
        "opponent_policy_mask": mask,
    }
    params = variables["params"]
    on, metrics = losses(spec, LearnerConfig(opponent_policy_weight=0.15), out, params, batch)
    off, _ = losses(spec, LearnerConfig(opponent_policy_weight=0.0), out, params, batch)
    log_q = jax.nn.log_softmax(out["opponent_policy_logits"], axis=-1)
    expected = float(np.mean(-np.sum(reply * np.asarray(log_q), -1)[mask]))
    assert float(metrics["opponent_policy_loss"]) == pytest.approx(expected, rel=1e-5)
    assert float(on - off) == pytest.approx(0.15 * expected, rel=1e-4)
    with pytest.raises(ValueError, match="no target"):
        losses(spec, LearnerConfig(), out, params, {k: batch[k] for k in list(batch)[:4]})


def test_learner_batch_carries_the_target_only_for_nets_that_predict_it():
    buffer = ReplayBuffer(capacity=100)
    buffer.add(synthetic_games([4, 5], set()))
    sample = buffer.sample(np.random.default_rng(4), 8, augment=False)
    sample["inputs"] = {"spatial": sample["inputs"], "global": np.zeros((8, 19), np.float32)}
    with_reply = _to_learner_batch(sample, ModelSpec("tiny", opponent_policy=True))
    np.testing.assert_array_equal(with_reply["opponent_policy"], sample["opponent_policy"])
    assert "opponent_policy" not in _to_learner_batch(sample, ModelSpec("tiny"))
