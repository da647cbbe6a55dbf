"""KataGo's short-term heads (``model.short_term_heads``): temporal-difference targets
from self-play, the learner's terms, and a trained net exported as model version 12.

(KataGo's engine itself read such an export: ``kata-raw-nn`` at optimism 0 and 0.2
agreed with ``gojax verify-net`` to 5e-7 in the policy and 5e-4 in the short-term
errors; see docs/training.md.)
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_selfplay import area_value
from test_train_loop import tiny_config

import gojax
from eval.cli import main
from eval.players import policy_optimism
from eval.trained_model import load_trained_model
from gojax.evaluate import evaluate
from gojax.katago_model import load_model
from gojax.search import SearchConfig
from train.checkpoint import restore_matching_network
from train.learner import LearnerConfig, losses
from train.loop import apply_overrides, train
from train.model import ModelSpec, build, encode, forward, init_variables
from train.replay import ReplayBuffer
from train.selfplay import (
    TD_HORIZON_COEFFICIENTS,
    SelfPlayConfig,
    agz_encode,
    play_games,
    td_targets,
)


def forward_weights(per_move, final, to_play, f):
    """KataGo's definition, summed forwards: weight f, (1-f) f, ... and the rest on the
    result; every value turned to the view of the player at move 0."""
    n = len(per_move)
    out = []
    for t in range(n):
        left, total = 1.0, 0.0
        for k in range(t, n):
            total += left * f * per_move[k] * to_play[k] * to_play[t]
            left *= 1.0 - f
        out.append(total + left * final * to_play[t])
    return np.asarray(out)


def test_td_targets_weigh_later_moves_down_and_end_on_the_result():
    area = 25
    # Game 0: three moves (Black, White, Black) then over; Black won. Game 1: five moves
    # from White; White won (the result is in Black's view).
    valid = np.array([[1, 1], [1, 1], [1, 1], [0, 1], [0, 1]], bool)
    to_play = np.array([[1, -1], [-1, 1], [1, -1], [-1, 1], [1, -1]], np.int8)
    values = np.array([[0.2, 0.1], [-0.4, 0.3], [0.6, -0.2], [0.9, 0.5], [0.9, 0.7]], np.float32)
    final = np.array([1.0, -1.0], np.float32)
    got = np.asarray(
        td_targets(jnp.asarray(values), jnp.asarray(final), valid, jnp.asarray(to_play), area)
    )
    assert got.shape == (5, 2, 3)
    for horizon, c in enumerate(TD_HORIZON_COEFFICIENTS):
        f = 1.0 / (1.0 + c * area)
        for game, moves in ((0, 3), (1, 5)):
            want = forward_weights(
                values[:moves, game], final[game], to_play[:moves, game].astype(float), f
            )
            np.testing.assert_allclose(got[:moves, game, horizon], want, rtol=1e-5, atol=1e-6)
    # By hand: the short horizon of game 0's last move, 9x9-like weight on 5x5's area.
    f_short = 1.0 / (1.0 + 0.016 * 25)
    assert got[2, 0, 2] == pytest.approx(f_short * 0.6 + (1 - f_short) * 1.0, abs=1e-6)
    # Longer horizons lean more on the result: the long one is closest to it.
    assert abs(got[0, 0, 0] - 1.0) < abs(got[0, 0, 2] - 1.0)


BLACK_LEAD = 3.0


def constant_lead(variables):
    """area_value's prior and value, and a score: Black leads by 3 in every position."""
    evaluate = area_value(variables)

    def scored(states, key):
        logits, value = evaluate(states, key)
        return logits, value, BLACK_LEAD * states.to_play.astype(jnp.float32)

    return scored


def test_self_play_records_root_scores_and_td_targets():
    config = SelfPlayConfig(
        size=5,
        komi=0.5,
        num_games=8,
        max_moves=40,
        search=SearchConfig(kind="puct", num_simulations=4),
    )
    traj, _ = play_games(constant_lead, agz_encode, None, jax.random.PRNGKey(3), config)
    traj = jax.device_get(traj)
    assert bool(np.all(traj.finished))
    f = np.asarray([1.0 / (1.0 + c * 25) for c in TD_HORIZON_COEFFICIENTS])
    for game in range(8):
        moves = int(traj.valid[:, game].sum())
        last = moves - 1
        # The position before the last move: its margin for the mover is the root score.
        # The last target: its own estimate, the rest on the result.
        np.testing.assert_allclose(
            traj.td_value[last, game],
            f * traj.root_value[last, game] + (1 - f) * traj.value[last, game],
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            traj.td_score[last, game],
            f * traj.root_score[last, game] + (1 - f) * traj.score[last, game],
            rtol=1e-5,
            atol=1e-5,
        )
    # The root score is the search's mean over its tree: every evaluation agrees (Black
    # leads by 3) except finished games, which count the board; the mover's view.
    expected = BLACK_LEAD * traj.to_play
    agree = np.isclose(traj.root_score, expected, atol=1e-5)[traj.valid]
    np.testing.assert_allclose(traj.root_score[0], expected[0], atol=1e-5)
    assert 0.8 < agree.mean() < 1.0
    # An evaluator without scores records zeros (td_score then ends on the result).
    traj, _ = play_games(area_value, agz_encode, None, jax.random.PRNGKey(3), config)
    assert not np.any(np.asarray(traj.root_score))


def test_the_replay_keeps_td_targets_and_fills_them_for_games_without():
    n, points = 3, 25
    base = dict(
        inputs=np.zeros((n, 1, 5, 5, 17), np.uint8),
        policy=np.full((n, 1, points + 1), 1.0 / (points + 1), np.float32),
        policy_mask=np.ones((n, 1), bool),
        valid=np.ones((n, 1), bool),
        value_mask=np.ones((n, 1), bool),
        value=np.array([[1.0], [-1.0], [1.0]], np.float32),
        score=np.array([[4.5], [-4.5], [4.5]], np.float32),
        score_mask=np.ones((n, 1), bool),
        ownership=np.zeros((n, 1, points), np.int8),
        to_play=np.array([[1], [-1], [1]], np.int8),
    )
    td_value = np.arange(9, dtype=np.float32).reshape(n, 1, 3) / 10
    td_score = -np.arange(9, dtype=np.float32).reshape(n, 1, 3)
    replay = ReplayBuffer(16)
    replay.add(types.SimpleNamespace(**base, td_value=td_value, td_score=td_score))
    replay.add(types.SimpleNamespace(**base))  # an SGF game: no search values
    batch = replay.sample(0, 64, augment=False)
    assert batch["td_value"].shape == (64, 3) and batch["td_score"].shape == (64, 3)
    stored = replay.state_dict()
    np.testing.assert_array_equal(stored["data/td_value"][:3], td_value[:, 0])
    np.testing.assert_array_equal(stored["data/td_score"][:3], td_score[:, 0])
    np.testing.assert_array_equal(stored["data/td_value"][3:], np.repeat(base["value"], 3, 1))
    np.testing.assert_array_equal(stored["data/td_score"][3:], np.repeat(base["score"], 3, 1))
    # A buffer saved before the targets existed loads with the results in their place.
    old = {k: v for k, v in stored.items() if not k.startswith("data/td_")}
    again = ReplayBuffer(16)
    again.load_state_dict(old)
    restored = again.state_dict()
    np.testing.assert_array_equal(restored["data/td_value"][:3], np.repeat(base["value"], 3, 1))
    np.testing.assert_array_equal(
        restored["data/td_score"], np.repeat(stored["data/score"][:, None], 3, 1)
    )


def test_the_spec_builds_the_heads_only_for_katago_nets():
    with pytest.raises(ValueError, match="short_term_heads needs a KataGo-architecture preset"):
        ModelSpec("agz_tiny", short_term_heads=True)
    spec = ModelSpec("tiny", short_term_heads=True, opponent_policy=True)
    config = build(spec).config
    assert (config.score_channels, config.policy_outputs) == (6, 3)
    assert config.optimistic_policy and config.td_outputs
    variables = init_variables(spec, jax.random.PRNGKey(0), 5)
    states = jax.vmap(lambda _: gojax.new_game(5))(jnp.arange(2))
    out = forward(spec, build(spec), variables, encode(spec, states), train=False)
    shapes = {
        "policy_logits": (2, 26),
        "optimistic_policy_logits": (2, 26),
        "opponent_policy_logits": (2, 26),
        "td_value_logits": (2, 3, 3),
        "td_score": (2, 3),
        "shortterm_value_error": (2,),
        "shortterm_score_error": (2,),
    }
    for key, shape in shapes.items():
        assert out[key].shape == shape, key
    assert np.all(np.asarray(out["shortterm_value_error"]) > 0)
    assert not np.allclose(out["optimistic_policy_logits"], out["policy_logits"])
    assert not np.allclose(out["opponent_policy_logits"], out["policy_logits"])


def short_term_outputs(value_pred, value_error, score_pred, score_error, actions=3):
    """A hand-made ``forward`` output of two positions (only what the learner reads)."""
    b = len(value_pred)
    win = np.log((1 + np.asarray(value_pred)) / 2)
    loss = np.log((1 - np.asarray(value_pred)) / 2)
    logits = np.stack([win, loss, np.full(b, -1e9)], -1)  # [B, 3]
    return {
        "policy_logits": jnp.zeros((b, actions)),
        "value": jnp.zeros(b),
        "value_logits": jnp.zeros((b, 3)),
        "td_value_logits": jnp.asarray(np.repeat(logits[:, None], 3, 1), jnp.float32),
        "td_score": jnp.asarray(np.repeat(np.asarray(score_pred)[:, None], 3, 1), jnp.float32),
        "shortterm_value_error": jnp.asarray(value_error, jnp.float32),
        "shortterm_score_error": jnp.asarray(score_error, jnp.float32),
        "optimistic_policy_logits": jnp.log(jnp.asarray([[0.5, 0.25, 0.25]] * b)),
    }


def test_learner_terms_follow_katagos_definitions():
    out = short_term_outputs(
        value_pred=[0.0, 0.0], value_error=[0.01, 0.01], score_pred=[2.0, 2.0], score_error=[4, 4]
    )
    target = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    batch = {
        "policy": target,
        "policy_mask": np.ones(2, bool),
        "value": np.zeros(2, np.float32),
        "value_mask": np.ones(2, bool),
        "ownership_mask": np.ones(2, bool),
        # Position 0's short-term value beat the prediction by 5 predicted stdevs (0.1
        # each); position 1's fell as far short. Scores came out as predicted.
        "td_value": np.array([[0.0, 0.0, 0.5], [0.0, 0.0, -0.5]], np.float32),
        "td_score": np.full((2, 3), 2.0, np.float32),
    }
    config = LearnerConfig(policy_weight=0, value_weight=0, l2=0)
    total, metrics = losses(ModelSpec("tiny"), config, out, {}, batch)
    # Value predicted 0 (probabilities 1/2, 1/2) against targets 1/4, 3/4 at the mid and long
    # horizons (td_value 0 there) is exact; the short one is off by the KL of (1/2 || 3/4).
    kl = 0.75 * np.log(0.75 / 0.5) + 0.25 * np.log(0.25 / 0.5)
    assert float(metrics["td_value_loss"]) == pytest.approx(kl, rel=1e-4)
    assert float(metrics["td_score_loss"]) == pytest.approx(0.0, abs=1e-6)
    # Squared errors 0.25 against a predicted 0.01: Huber(0.4) of 0.24; scores: 4 vs 1e-4.
    assert float(metrics["shortterm_value_error_loss"]) == pytest.approx(0.5 * 0.24**2, rel=1e-3)
    assert float(metrics["shortterm_score_error_loss"]) == pytest.approx(0.5 * 4**2, rel=1e-3)
    # Optimism weights: sigmoid(3 (5 - 1.5)) + sigmoid(3 (0 - 1.5)) capped at 1, and
    # sigmoid(3 (-5 - 1.5)) + sigmoid(-4.5) for the other.
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    weights = np.array([min(1.0, sig(10.5) + sig(-4.5)), sig(-19.5) + sig(-4.5)])
    assert float(metrics["optimistic_policy_fraction"]) == pytest.approx(weights.mean(), rel=1e-4)
    cross_entropy = -np.log(0.25)
    assert float(metrics["optimistic_policy_loss"]) == pytest.approx(
        (weights * cross_entropy).mean(), rel=1e-4
    )
    # Each term enters the total with its weight.
    want = sum(
        getattr(config, f"{name}_weight") * float(metrics[f"{name}_loss"])
        for name in (
            "td_value",
            "td_score",
            "shortterm_value_error",
            "shortterm_score_error",
            "optimistic_policy",
        )
    )
    assert float(total) == pytest.approx(want, rel=1e-5)
    # No targets, no step.
    del batch["td_value"]
    with pytest.raises(ValueError, match="needs td_value and td_score targets"):
        losses(ModelSpec("tiny"), config, out, {}, batch)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    """Three learner steps of a 5x5 ``tiny`` net with short-term heads and the reply."""
    config = tiny_config()
    apply_overrides(
        config,
        [
            "--config.model.preset=tiny",
            "--config.model.short_term_heads=true",
            "--config.model.opponent_policy=true",
            "--config.eval.num_games=0",
        ],
    )
    workdir = tmp_path_factory.mktemp("short_term")
    train(config, workdir)
    return str(workdir)


def test_a_trained_net_exports_as_version_12_and_plays_with_optimism(run_dir, tmp_path, capsys):
    record = json.loads((Path(run_dir) / "metrics.jsonl").read_text().splitlines()[0])
    for name in ("td_value", "td_score", "shortterm_value_error", "optimistic_policy"):
        assert np.isfinite(record[f"learner.{name}_loss"]) and record[f"learner.{name}_loss"] > 0
    assert 0 < record["learner.optimistic_policy_fraction"] <= 1

    out = tmp_path / "net.bin.gz"
    assert main(["export", run_dir, "--out", str(out)]) == 0
    assert "KataGo model version 12" in capsys.readouterr().out
    model = load_model(out)
    assert model.version == 12
    assert model.config.optimistic_policy and model.config.policy_outputs == 2
    assert model.config.score_channels == 6 and not model.config.td_outputs
    sv3 = model.params["value"]["sv3"]
    assert np.any(sv3["kernel"][:, 4:])  # trained short-term errors, not zero padding
    assert "td" not in model.params["value"]

    trained = load_trained_model(run_dir)
    assert trained.short_term_heads and trained.version == 12
    assert policy_optimism(trained) == (0.2, 1.0)  # KataGo's defaults, as for its own nets
    states = jax.vmap(lambda _: gojax.new_game(5, komi=0.5))(jnp.arange(2))

    def evaluate_jitted(module, variables, version):  # one program, not hundreds of ops
        return jax.jit(lambda v: evaluate(module, v, states, version=version))(variables)

    for optimism in (0.0, 0.2):
        mine = evaluate_jitted(
            trained.module(policy_optimism=optimism), trained.variables, version=12
        )
        file = evaluate_jitted(
            model.module(policy_optimism=optimism), model.variables, version=model.output_spec
        )
        for key in ("policy", "white_win", "shortterm_winloss_error", "shortterm_score_error"):
            np.testing.assert_allclose(file[key], mine[key], rtol=1e-4, atol=1e-4, err_msg=key)
    plain = evaluate_jitted(trained.module(), trained.variables, version=12)["policy"]
    assert not np.allclose(mine["policy"], plain, atol=1e-5)


def test_short_term_heads_are_part_of_resuming_and_of_init_runs(run_dir):
    config = tiny_config()
    overrides = ["--config.model.preset=tiny", "--config.model.opponent_policy=true"]
    apply_overrides(config, [*overrides, "--config.train.total_steps=6"])
    with pytest.raises(ValueError, match="model.short_term_heads: True -> False"):
        train(config, run_dir)
    with pytest.raises(ValueError, match="has short-term heads; this config has no"):
        restore_matching_network(
            run_dir, None, ModelSpec("tiny", opponent_policy=True), 5, role="init run"
        )
