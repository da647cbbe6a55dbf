"""Self-play (train/selfplay.py) and the replay buffer (train/replay.py).

One self-play run on 5x5 (resignation, playout caps, unfinished games) with a
net-free evaluator whose value is the current area count feeds most tests; a
short one with ``agz_tiny`` and Gumbel checks the network path.
"""

from __future__ import annotations

import functools
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocesses import run_on_host_devices

import gojax
from gojax import sgf
from gojax.nn import PRESETS, example_inputs
from gojax.search import SearchConfig, agz_evaluator
from train.replay import ReplayBuffer, augment
from train.selfplay import (
    SelfPlayConfig,
    Trajectories,
    agz_encode,
    ownership,
    play_games,
    selfplay_devices,
    trajectories_to_sgf,
)

MAIN = SelfPlayConfig(
    size=5,
    komi=0.5,
    num_games=48,
    max_moves=50,
    num_steps=44,  # below the cap: some games stay unfinished
    search=SearchConfig(kind="puct", num_simulations=8),
    resign_threshold=0.8,
    no_resign_fraction=0.5,
    fast_simulations=2,
    full_search_prob=0.3,
)


def area_value(variables):
    """Uniform prior; value: the Tromp-Taylor margin now, squashed (resigns sensibly)."""
    del variables

    def evaluate(states, key):
        value = jnp.tanh(jax.vmap(gojax.score)(states) * states.to_play / 4.0)
        return jnp.zeros((states.to_play.shape[0], states.num_actions)), value

    return evaluate


@pytest.fixture(scope="module")
def main_run():
    traj, stats = play_games(area_value, agz_encode, None, jax.random.PRNGKey(7), MAIN)
    return jax.device_get(traj), stats


def played(traj: Trajectories, game: int) -> np.ndarray:
    actions = np.asarray(traj.action[:, game])
    return actions[actions >= 0]


def replay_game(actions, config: SelfPlayConfig):
    """``(final state, was_legal [T])`` of the actions from the empty board."""
    padded = np.full(config.steps, config.size**2, np.int32)
    padded[: len(actions)] = actions
    final, _, _, was_legal = gojax.replay(config.new_game(), jnp.asarray(padded), len(actions))
    return final, np.asarray(was_legal)


def test_shapes(main_run):
    traj, _ = main_run
    t, b, p = MAIN.steps, MAIN.num_games, MAIN.size**2
    assert traj.inputs.shape == (t, b, 5, 5, gojax.AGZ_PLANES)
    assert traj.policy.shape == (t, b, p + 1)
    assert traj.ownership.shape == (t, b, p)
    for name in ("policy_mask", "to_play", "action", "valid", "value", "value_mask", "score"):
        assert getattr(traj, name).shape == (t, b), name
    for name in ("finished", "winner", "final_score", "resigned", "no_resign", "length"):
        assert getattr(traj, name).shape == (b,), name
    assert traj.final_board.shape == (b, p)
    valid = np.asarray(traj.valid)
    np.testing.assert_allclose(np.asarray(traj.policy)[valid].sum(-1), 1.0, atol=1e-5)


def test_actions_legal_and_final_board(main_run):
    traj, _ = main_run
    for b in range(MAIN.num_games):
        actions = played(traj, b)
        assert len(actions) == int(traj.length[b])
        final, was_legal = replay_game(actions, MAIN)
        assert was_legal.all()
        np.testing.assert_array_equal(np.asarray(final.board), traj.final_board[b])
        # The policy target sits on legal moves only.
        for t in range(len(actions)):
            assert traj.policy[t, b, actions[t]] > 0


def test_masks_after_end(main_run):
    traj, _ = main_run
    valid = np.asarray(traj.valid)
    for b in range(MAIN.num_games):
        steps = int(valid[:, b].sum())
        assert valid[:steps, b].all()  # a game is valid up to its end, then never
        after = slice(steps, None)
        assert (traj.action[after, b] == -1).all()
        assert not traj.policy_mask[after, b].any()
        assert not traj.value_mask[after, b].any()
        assert (traj.value[after, b] == 0).all()
        if traj.finished[b] and not traj.resigned[b]:
            assert steps == traj.length[b]  # every searched position was played
        # to_play alternates from Black.
        np.testing.assert_array_equal(
            traj.to_play[:steps, b], np.where(np.arange(steps) % 2, -1, 1)
        )


def test_outcomes_match_score(main_run):
    traj, _ = main_run
    finished = np.asarray(traj.finished)
    assert finished.any() and not finished.all(), "want both finished and unfinished games"
    for b in range(MAIN.num_games):
        mask = np.asarray(traj.value_mask[:, b])
        mover = np.asarray(traj.to_play[:, b])
        if not finished[b]:
            assert not mask.any() and traj.winner[b] == 0
            assert not traj.score_mask[:, b].any()
            assert int(traj.valid[:, b].sum()) == MAIN.steps
            continue
        final, _ = replay_game(played(traj, b), MAIN)
        margin = float(gojax.score(final))
        assert traj.final_score[b] == pytest.approx(margin)
        np.testing.assert_array_equal(mask, np.asarray(traj.valid[:, b]))
        if traj.resigned[b]:
            assert traj.winner[b] == -traj.resigned[b]
            assert not traj.score_mask[:, b].any()
        else:
            assert bool(final.terminated)
            assert traj.winner[b] == np.sign(margin)
            np.testing.assert_array_equal(traj.value[mask, b], np.sign(margin) * mover[mask])
            np.testing.assert_allclose(traj.score[mask, b], margin * mover[mask])
            owner = np.asarray(traj.ownership[mask, b]) * mover[mask, None]  # Black's view
            assert (owner == owner[:1]).all()
            black, white = np.asarray(gojax.area(final))
            assert (owner[0] == 1).sum() == black and (owner[0] == -1).sum() == white


def test_resignation(main_run):
    traj, stats = main_run
    resigned = np.asarray(traj.resigned)
    no_resign = np.asarray(traj.no_resign)
    assert 0.25 < no_resign.mean() < 0.75  # no_resign_fraction 0.5 over 48 games
    assert (resigned != 0).sum() >= 1
    assert not (resigned[no_resign] != 0).any()
    assert not (np.asarray(traj.would_resign)[~no_resign] != 0).any()
    assert stats["resignations"] == (resigned != 0).sum()
    for b in np.flatnonzero(resigned):
        steps = int(traj.valid[:, b].sum())
        # The resigner was to move at the last searched position, and played nothing there.
        assert traj.to_play[steps - 1, b] == resigned[b]
        assert traj.action[steps - 1, b] == -1
        assert steps == traj.length[b] + 1
        mask = np.asarray(traj.valid[:, b])
        resigner = np.asarray(traj.to_play[:, b]) == resigned[b]
        assert (traj.value[mask & resigner, b] == -1).all()
        assert (traj.value[mask & ~resigner, b] == 1).all()
        # The search agreed the position was hopeless.
        assert traj.root_value[steps - 1, b] < -MAIN.resign_threshold
    # No-resign games play on; whether the would-be resigner lost is the false-positive count.
    would = np.asarray(traj.would_resign)
    candidates = no_resign & (would != 0) & np.asarray(traj.finished)
    assert candidates.sum() >= 3 and stats["would_resign"] == candidates.sum()
    false_pos = (np.asarray(traj.winner) * would >= 0) & candidates
    assert stats["resign_false_positives"] == false_pos.sum()
    assert stats["resign_false_positive_rate"] == pytest.approx(false_pos.sum() / candidates.sum())
    # Resigning is common here (the area value is blunt), and so is in the no-resign games.
    assert (resigned != 0).sum() >= 0.5 * (~no_resign).sum()


def test_playout_cap_randomisation(main_run):
    traj, stats = main_run
    valid = np.asarray(traj.valid)
    policy_mask = np.asarray(traj.policy_mask)
    assert not (policy_mask & ~valid).any()
    # One coin per step for the batch: a step is full for every running game or for none.
    full_steps = policy_mask.any(axis=1)
    np.testing.assert_array_equal(policy_mask, valid & full_steps[:, None])
    assert 0.1 < full_steps.mean() < 0.55  # full_search_prob 0.3 over 44 steps
    assert stats["policy_targets"] == policy_mask.sum()
    assert stats["positions"] == valid.sum()
    targets = np.asarray(traj.policy)[policy_mask]  # [n, A]
    logs = np.log(np.where(targets > 0, targets, 1.0))
    entropy = -(targets * logs).sum(-1)
    assert stats["policy_target_entropy"] == pytest.approx(entropy.mean(), rel=1e-5)
    assert stats["policy_target_moves"] == pytest.approx((targets > 0).sum(-1).mean())
    assert 0 < stats["policy_target_entropy"] < np.log(MAIN.size**2 + 1)


def test_stats(main_run):
    traj, stats = main_run
    finished = np.asarray(traj.finished)
    assert stats["games"] == MAIN.num_games
    assert stats["games_finished"] == finished.sum()
    assert stats["mean_game_length"] == pytest.approx(np.asarray(traj.length)[finished].mean())
    assert 0.0 <= stats["black_win_rate"] <= 1.0
    assert stats["moves_per_second"] > 0


def test_sgf_round_trip(main_run, tmp_path):
    traj, _ = main_run
    paths = trajectories_to_sgf(traj, MAIN, tmp_path)
    assert len(paths) == MAIN.num_games
    for b, path in enumerate(paths):
        record = sgf.load(path)
        assert record.size == MAIN.size and record.komi == MAIN.komi
        actions = [action for _, action in record.moves]
        np.testing.assert_array_equal(actions, played(traj, b))
        final, was_legal = replay_game(actions, MAIN)
        assert was_legal.all()
        np.testing.assert_array_equal(np.asarray(final.board), traj.final_board[b])
        if not traj.finished[b]:
            assert record.result is None
            continue
        assert sgf.result_winner(record.result) == traj.winner[b]
        assert record.result.endswith("+R") == bool(traj.resigned[b])


# Whole games on fewer slots than games: each slot plays game after game.
REFILL = SelfPlayConfig(
    size=5,
    komi=0.5,
    num_games=20,
    num_slots=4,
    max_moves=40,
    search=SearchConfig(kind="puct", num_simulations=4),
    resign_threshold=0.8,
    no_resign_fraction=0.5,
    fast_simulations=2,
    full_search_prob=0.3,
)


@pytest.fixture(scope="module")
def refill_run():
    traj, stats = play_games(area_value, agz_encode, None, jax.random.PRNGKey(11), REFILL)
    return jax.device_get(traj), stats


def test_slots_play_every_game_whole(refill_run):
    """20 games on 4 slots: every game is a whole, legal game from the empty board, its
    records in its own rows in move order (the inputs are its positions'), whatever slot
    played it and whenever it began."""
    traj, stats = refill_run
    g, t = REFILL.num_games, REFILL.steps
    assert traj.action.shape == (t, g) and traj.final_board.shape == (g, REFILL.size**2)
    assert np.asarray(traj.finished).all() and stats["games_finished"] == g
    valid = np.asarray(traj.valid)
    lengths = np.asarray(traj.length)
    resigned = np.asarray(traj.resigned) != 0
    assert resigned.any() and (~resigned).any()
    for b in range(g):
        steps = int(valid[:, b].sum())
        assert valid[:steps, b].all() and steps == lengths[b] + resigned[b]
        np.testing.assert_array_equal(
            traj.to_play[:steps, b], np.where(np.arange(steps) % 2, -1, 1)
        )
        actions = played(traj, b)
        final, was_legal = replay_game(actions, REFILL)
        assert was_legal.all() and len(actions) == lengths[b]
        np.testing.assert_array_equal(np.asarray(final.board), traj.final_board[b])
        assert resigned[b] or bool(final.terminated)
        # The inputs at each row are the encoding of the game's position there.
        state = REFILL.new_game()
        for m in range(steps):
            want = np.asarray(agz_encode(jax.tree.map(lambda x: x[None], state)))[0]
            np.testing.assert_array_equal(traj.inputs[m, b], want, err_msg=f"game {b} move {m}")
            if m < len(actions):
                state = gojax.play(state, actions[m])
    # The games differ (each slot's later games are new games, not replays of its first).
    assert len({tuple(played(traj, b)) for b in range(g)}) > g // 2
    assert not (np.asarray(traj.policy_mask) & ~valid).any()
    assert stats["positions"] == valid.sum()


def test_slots_settings_checked():
    with pytest.raises(ValueError, match="num_slots must be in 1..num_games=8, not 9"):
        SelfPlayConfig(num_games=8, num_slots=9)
    with pytest.raises(ValueError, match="plays whole games: num_steps must be None"):
        SelfPlayConfig(num_games=8, num_slots=4, num_steps=10)
    with pytest.raises(ValueError, match="num_slots=3 must be a multiple of num_devices=2"):
        SelfPlayConfig(num_games=8, num_slots=3, num_devices=2)
    assert SelfPlayConfig(num_games=8).slots == 8
    assert SelfPlayConfig(num_games=8, num_slots=2).slots == 2
    # Devices: the most that divide both the games and the slots.
    local = jax.local_devices()
    assert selfplay_devices(SelfPlayConfig(num_games=8, num_slots=1)) == local[:1]


def test_ownership_function():
    board = np.zeros(25, np.int8)
    board[[2, 7, 12, 17, 22]] = 1  # a black wall down the middle column
    board[[4]] = -1
    owner = np.asarray(jax.jit(ownership, static_argnums=1)(jnp.asarray(board), 5))
    grid = owner.reshape(5, 5)
    assert (grid[:, :3] == 1).all()  # left side reaches only black
    assert (grid[:, 3:] == 0).sum() == 9 and grid[0, 4] == -1  # right side reaches both


def test_agz_tiny_gumbel_unfinished():
    config = SelfPlayConfig(
        size=5,
        num_games=3,
        num_steps=5,
        search=SearchConfig(kind="gumbel", num_simulations=4, max_num_considered_actions=4),
    )
    net = PRESETS["agz_tiny"]()
    variables = net.init(jax.random.PRNGKey(0), *example_inputs(net, 1, 5))
    evaluator_fn = functools.partial(agz_evaluator, net)
    traj, stats = play_games(evaluator_fn, agz_encode, variables, jax.random.PRNGKey(1), config)
    assert traj.inputs.shape == (5, 3, 5, 5, 17)
    assert np.asarray(traj.valid).all() and np.asarray(traj.policy_mask).all()
    assert not np.asarray(traj.finished).any() and not np.asarray(traj.value_mask).any()
    assert stats["games_finished"] == 0 and np.isnan(stats["black_win_rate"])
    np.testing.assert_allclose(np.asarray(traj.policy).sum(-1), 1.0, atol=1e-5)


def test_devices_setting_checked_and_resolved():
    with pytest.raises(ValueError, match="num_devices must be >= 0"):
        SelfPlayConfig(num_devices=-1)
    with pytest.raises(ValueError, match="num_games=6 must be a multiple of num_devices=4"):
        SelfPlayConfig(num_games=6, num_devices=4)
    local = jax.local_devices()
    # 0 (the default): the most devices that divide the games; 7 games, fewer than 7 devices: 1.
    assert selfplay_devices(SelfPlayConfig(num_games=7)) == local[: 7 if len(local) >= 7 else 1]
    assert selfplay_devices(SelfPlayConfig(num_devices=1)) == local[:1]
    with pytest.raises(ValueError, match="this process has"):
        selfplay_devices(SelfPlayConfig(num_games=64, num_devices=len(local) + 1))


TWO_DEVICES = textwrap.dedent(
    """
    import dataclasses, jax, jax.numpy as jnp, numpy as np
    import gojax
    from gojax.search import SearchConfig
    from train.selfplay import SelfPlayConfig, _play_jit, agz_encode, play_games, selfplay_devices
    assert jax.local_device_count() == 2, jax.devices()

    def area_value(variables):  # as this module's: uniform prior, squashed area margin
        def evaluate(states, key):
            value = jnp.tanh(jax.vmap(gojax.score)(states) * states.to_play / 4.0)
            return jnp.zeros((states.to_play.shape[0], states.num_actions)), value
        return evaluate

    config = SelfPlayConfig(size=5, komi=0.5, num_games=6, max_moves=30, resign_threshold=0.8,
                            search=SearchConfig(kind="puct", num_simulations=4),
                            fast_simulations=2, full_search_prob=0.5)
    assert len(selfplay_devices(config)) == 2
    assert len(selfplay_devices(dataclasses.replace(config, num_games=5))) == 1
    key = jax.random.PRNGKey(3)
    traj, stats = play_games(area_value, agz_encode, None, key, config)
    assert traj.action.sharding.device_set == set(jax.devices())
    got = jax.device_get(traj)
    # Each device plays what one device plays with its folded key and half the games.
    half = dataclasses.replace(config, num_games=3, num_devices=1)
    parts = [jax.device_get(_play_jit(area_value, agz_encode, None, jax.random.fold_in(key, i),
                                      half)) for i in range(2)]
    for name in ("action", "policy", "value", "inputs", "ownership", "winner", "length"):
        axis = 0 if name in ("winner", "length") else 1
        want = np.concatenate([getattr(p, name) for p in parts], axis=axis)
        np.testing.assert_array_equal(getattr(got, name), want, err_msg=name)
    assert stats["games"] == 6 and stats["games_finished"] >= 1
    # With slots: each device plays its half of the games on its half of the slots.
    slotted = dataclasses.replace(config, num_games=8, num_slots=4)
    got = jax.device_get(play_games(area_value, agz_encode, None, key, slotted)[0])
    half = dataclasses.replace(slotted, num_games=4, num_slots=2, num_devices=1)
    parts = [jax.device_get(_play_jit(area_value, agz_encode, None, jax.random.fold_in(key, i),
                                      half)) for i in range(2)]
    for name in ("action", "inputs", "winner", "length"):
        axis = 0 if name in ("winner", "length") else 1
        want = np.concatenate([getattr(p, name) for p in parts], axis=axis)
        np.testing.assert_array_equal(getattr(got, name), want, err_msg=name)
    assert np.asarray(got.finished).all()
    print("two devices play each shard's games")
    """
)


@pytest.mark.slow
def test_selfplay_split_over_two_devices():
    out = run_on_host_devices(TWO_DEVICES, 2)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "two devices play each shard's games" in out.stdout


# ----------------------------------------------------------------------------- replay


def finished_positions(traj) -> int:
    return int((np.asarray(traj.valid) & np.asarray(traj.value_mask)).sum())


def test_buffer_add_and_eviction(main_run):
    traj, _ = main_run
    n = finished_positions(traj)
    buffer = ReplayBuffer(capacity=10_000)
    assert buffer.add(traj) == n and len(buffer) == n
    assert buffer.nbytes > 0
    state = buffer.state_dict()
    assert set(np.unique(state["data/game"])) == set(np.flatnonzero(traj.finished))
    np.testing.assert_array_equal(state["data/value"] != 0, True)  # 5x5, komi 0.5: no draws

    small = ReplayBuffer(capacity=n // 2)
    small.add(traj)
    assert len(small) == n // 2
    small.add(traj)
    games = small.state_dict()["data/game"]
    # Only the newest positions of the second batch remain: its last games, whole or cut.
    assert (games >= MAIN.num_games).all()
    last = np.flatnonzero(traj.finished)[-1] + MAIN.num_games
    assert (games == last).sum() == int(traj.valid[:, last - MAIN.num_games].sum())
    assert small.games_added == 2 * MAIN.num_games


def test_buffer_one_per_game(main_run):
    traj, _ = main_run
    buffer = ReplayBuffer(capacity=10_000)
    buffer.add(traj)
    num_games = int(np.asarray(traj.finished).sum())
    batch = buffer.sample(np.random.default_rng(0), num_games, one_per_game=True)
    assert len(np.unique(batch["game"])) == num_games and batch["value_mask"].all()
    batch = buffer.sample(np.random.default_rng(1), 3 * num_games, one_per_game=True)
    games, mask = batch["game"], batch["value_mask"]
    assert set(games[mask]) == set(games) and len(games[mask]) == len(set(games))
    # Positions come from all over the games, not only their first moves.
    plain = buffer.sample(np.random.default_rng(2), 256, augment=False)
    assert plain["value_mask"].all() and len(np.unique(plain["game"])) > 1
    keyed = buffer.sample(jax.random.PRNGKey(0), 8)  # a JAX key works as the rng too
    assert keyed["policy"].shape == (8, MAIN.size**2 + 1)


def test_buffer_augmentation_consistent(main_run):
    traj, _ = main_run
    buffer = ReplayBuffer(capacity=10_000)
    buffer.add(traj)
    plain = buffer.sample(np.random.default_rng(3), 128, augment=False)
    aug = buffer.sample(np.random.default_rng(3), 128)  # same slots, then symmetries
    np.testing.assert_array_equal(plain["game"], aug["game"])
    sym = aug["symmetry"]
    assert len(np.unique(sym)) > 4
    manual = augment(plain, jnp.asarray(sym))
    for name in ("inputs", "policy", "opponent_policy", "ownership"):
        np.testing.assert_array_equal(np.asarray(manual[name]), aug[name], err_msg=name)
    for i in range(128):
        planes, policy = aug["inputs"][i], aug["policy"][i]
        # Search weight only on empty points: planes and policy moved together.
        occupied = (planes[..., 0] + planes[..., 1]).reshape(-1) > 0
        assert not (policy[:-1][occupied] > 0).any()
        best = int(np.argmax(plain["policy"][i]))
        if (plain["policy"][i] == plain["policy"][i][best]).sum() == 1:
            assert int(gojax.transform_action(best, 5, int(sym[i]))) == int(np.argmax(policy))
        np.testing.assert_array_equal(
            np.asarray(gojax.transform_board(plain["ownership"][i], int(sym[i]))),
            aug["ownership"][i],
        )
    assert aug["inputs"].dtype == np.float32


def test_buffer_state_dict_round_trip(main_run, tmp_path):
    traj, _ = main_run
    buffer = ReplayBuffer(capacity=300)
    buffer.add(traj)
    buffer.add(traj)  # wrapped around
    np.savez(tmp_path / "buffer.npz", **buffer.state_dict())
    restored = ReplayBuffer(capacity=300)
    restored.load_state_dict(dict(np.load(tmp_path / "buffer.npz")))
    assert len(restored) == len(buffer) and restored.games_added == buffer.games_added
    assert restored.nbytes == buffer.nbytes
    for key, value in buffer.state_dict().items():
        np.testing.assert_array_equal(restored.state_dict()[key], value, err_msg=key)
    a = buffer.sample(np.random.default_rng(5), 32, one_per_game=True)
    b = restored.sample(np.random.default_rng(5), 32, one_per_game=True)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # Further adds continue at the same slot.
    buffer.add(traj)
    restored.add(traj)
    np.testing.assert_array_equal(
        buffer.state_dict()["data/game"], restored.state_dict()["data/game"]
    )
    with pytest.raises(ValueError):
        ReplayBuffer(capacity=10).load_state_dict(buffer.state_dict())
