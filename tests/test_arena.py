"""The arena: batch-size invariance, colour pairs and openings, resignation, SGF, the GTP path,
sharding over devices, and gating."""

from __future__ import annotations

import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocesses import run_on_host_devices

import gojax
from eval.arena import (
    Agent,
    capture_agent,
    gnugo_agent,
    play_arena,
    play_games,
    random_agent,
    search_agent,
    uct_agent,
)
from eval.gating import gate
from gojax import _game, sgf
from gojax.search import SearchConfig
from train.model import ModelSpec, init_variables

SIZE, KOMI = 5, 0.5


def _gives_up_policy(params, states, keys):
    """Random moves, and a value of -1 from move 6 on: resigns at its first move there."""
    actions, _ = random_agent().policy(params, states, keys)
    return actions, jnp.where(states.move_number >= 6, -1.0, 0.0)


QUITTER = Agent("quitter", _gives_up_policy, has_value=True)
# The same hopeless values without claiming to have a value: it must never resign.
NO_VALUE = Agent("no-value", _gives_up_policy, has_value=False)


@pytest.fixture(scope="module")
def net():
    spec = ModelSpec("agz_tiny")
    variables = init_variables(spec, jax.random.PRNGKey(0), SIZE)
    config = SearchConfig(num_simulations=3, temperature_moves=0, dirichlet_fraction=0.0)
    return search_agent(spec, variables, config)


@pytest.fixture(scope="module")
def eight_games(net):
    """Net vs capture, 8 games in one batch, two-move random openings."""
    return play_arena(
        net,
        capture_agent(),
        jax.random.PRNGKey(3),
        size=SIZE,
        komi=KOMI,
        max_moves=24,
        num_games=8,
        opening_moves=2,
    )


def test_same_games_whatever_the_batch_size(net, eight_games):
    chunked = play_arena(
        net,
        capture_agent(),
        jax.random.PRNGKey(3),
        size=SIZE,
        komi=KOMI,
        max_moves=24,
        num_games=8,
        opening_moves=2,
        batch_size=2,
    )
    for field in ("outcome", "a_black", "score", "length", "finished", "resigned", "actions"):
        np.testing.assert_array_equal(getattr(chunked, field), getattr(eight_games, field), field)
    # A later slice of the numbering plays the same games too.
    tail = play_arena(
        net,
        capture_agent(),
        jax.random.PRNGKey(3),
        size=SIZE,
        komi=KOMI,
        max_moves=24,
        num_games=2,
        opening_moves=2,
        first_game=6,
    )
    np.testing.assert_array_equal(tail.actions, eight_games.actions[6:])


def test_colours_alternate_and_pairs_share_their_opening(eight_games):
    r = eight_games
    np.testing.assert_array_equal(r.a_black, [True, False] * 4)
    openings = r.actions[:, :2]
    np.testing.assert_array_equal(openings[0::2], openings[1::2])
    assert len({tuple(o) for o in openings[0::2]}) > 1  # each pair its own opening
    assert np.all(openings < SIZE * SIZE)  # no pass in an opening
    assert np.all(r.finished) and np.all(r.length <= 24)
    for i in range(8):  # the recorded moves are the game's moves
        assert np.sum(r.actions[i] >= 0) == r.length[i]
    # Outcomes agree with the scores from A's side.
    black_won = np.sign(r.score)
    np.testing.assert_array_equal(r.outcome, np.where(r.a_black, black_won, -black_won))


def test_resignation_only_for_agents_with_a_value():
    key = jax.random.PRNGKey(0)
    common = dict(size=SIZE, komi=KOMI, max_moves=30, num_games=4, resign_threshold=0.5)
    r = play_arena(QUITTER, random_agent(), key, **common)
    # Black moves at even move numbers, White at odd: the first hopeless move is 6 or 7.
    np.testing.assert_array_equal(r.length, [6, 7, 6, 7])
    np.testing.assert_array_equal(r.resigned, [1, -1, 1, -1])
    np.testing.assert_array_equal(r.outcome, [-1, -1, -1, -1])
    assert [r.result_string(i) for i in range(4)] == ["W+R", "B+R", "W+R", "B+R"]
    assert r.summary()["resignations"] == 4 and np.all(r.finished)
    assert not np.any(play_arena(NO_VALUE, random_agent(), key, **common).resigned)
    no_threshold = dict(common, resign_threshold=None)
    assert not np.any(play_arena(QUITTER, random_agent(), key, **no_threshold).resigned)


def test_every_game_is_written_as_sgf(tmp_path):
    r = play_arena(
        QUITTER,
        capture_agent(),
        jax.random.PRNGKey(1),
        size=SIZE,
        komi=KOMI,
        max_moves=30,
        num_games=4,
        resign_threshold=None,
        sgf_dir=tmp_path,
    )
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == [f"game-000{i}.sgf" for i in range(1, 5)]
    for i, path in enumerate(files):
        record = sgf.load(path)
        black, white = ("quitter", "capture") if i % 2 == 0 else ("capture", "quitter")
        assert (record.player_black, record.player_white) == (black, white)
        assert record.result == r.result_string(i)
        assert len(record.moves) == r.length[i]
        final = _game.state_at(record)  # raises on an illegal move
        assert float(gojax.score(final)) == pytest.approx(float(r.score[i]))


def test_gtp_path_plays_the_same_games(tmp_path):
    common = dict(size=SIZE, komi=KOMI, max_moves=16, num_games=2, resign_threshold=0.3)
    batched = play_games(capture_agent(), QUITTER, jax.random.PRNGKey(5), **common)
    moved = play_games(
        capture_agent(), QUITTER, jax.random.PRNGKey(5), force_gtp=True, sgf_dir=tmp_path, **common
    )
    assert np.all(batched.resigned != 0)  # the quitter resigned in both paths
    for field in ("outcome", "a_black", "score", "length", "resigned"):
        np.testing.assert_array_equal(getattr(moved, field), getattr(batched, field), field)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["game"] for line in lines] == [0, 1]
    record = sgf.load(tmp_path / "game-0001.sgf")
    moves = batched.actions[0][batched.actions[0] >= 0].tolist()
    assert [a for _, a in record.moves] == moves


def test_gtp_agent_against_gnugo(tmp_path):
    try:
        gnugo = gnugo_agent(0)
    except ValueError:
        pytest.skip("gnugo is not installed (apt-get install gnugo; .ci/run installs it)")
    r = play_games(
        capture_agent(),
        gnugo,
        jax.random.PRNGKey(0),
        size=SIZE,
        komi=KOMI,
        rules="chinese",  # GnuGo refuses suicide, which Tromp-Taylor allows
        num_games=2,
        sgf_dir=tmp_path,
    )
    assert r.outcome.shape == (2,) and list(r.a_black) == [True, False]
    assert sorted(p.name for p in tmp_path.glob("*.sgf")) == ["game-0001.sgf", "game-0002.sgf"]
    assert sgf.load(tmp_path / "game-0002.sgf").player_black == "gnugo-0"
    # Random openings over GTP: the pair shares its first two moves, the next pair has others.
    opened = play_games(
        capture_agent(),
        gnugo,
        jax.random.PRNGKey(0),
        size=SIZE,
        komi=KOMI,
        rules="chinese",
        num_games=4,
        opening_moves=2,
        sgf_dir=tmp_path / "opened",
    )
    assert opened.outcome.shape == (4,)
    firsts = [sgf.load(tmp_path / "opened" / f"game-{i:04d}.sgf").moves[:2] for i in (1, 2, 3, 4)]
    assert firsts[0] == firsts[1] and firsts[2] == firsts[3] and firsts[0] != firsts[2]


def test_bad_settings_are_clear_errors():
    agent = random_agent()
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="num_games"):
        play_arena(agent, agent, key, size=SIZE, num_games=0)
    with pytest.raises(ValueError, match="first_game must be even"):
        play_arena(agent, agent, key, size=SIZE, num_games=2, first_game=1)
    with pytest.raises(ValueError, match="resign_threshold"):
        play_arena(agent, agent, key, size=SIZE, num_games=2, resign_threshold=2.0)
    with pytest.raises(ValueError, match="opening_moves"):
        play_arena(agent, agent, key, size=SIZE, num_games=2, max_moves=4, opening_moves=4)
    with pytest.raises(ValueError, match="GnuGo levels"):
        gnugo_agent(11)


def test_gate_promotes_the_stronger_agent_only():
    common = dict(size=SIZE, komi=KOMI, max_moves=30)
    up = gate(capture_agent(), random_agent(), jax.random.PRNGKey(2), 32, **common)
    assert up.promoted and up.win_rate > 0.55 and up.games == 32
    assert up.ci95[0] <= up.win_rate <= up.ci95[1]
    assert up.wins + up.draws + up.losses == 32 and up.result.outcome.shape == (32,)
    down = gate(random_agent(), capture_agent(), jax.random.PRNGKey(2), 32, **common)
    assert not down.promoted and down.win_rate < 0.5
    # The rule is strict: exactly the threshold is not enough (the same games again).
    same = gate(random_agent(), capture_agent(), jax.random.PRNGKey(2), 32, down.win_rate, **common)
    assert same.win_rate == down.win_rate and not same.promoted
    assert gate(random_agent(), capture_agent(), jax.random.PRNGKey(2), 32, 0.1, **common).promoted
    with pytest.raises(ValueError, match="threshold"):
        gate(random_agent(), random_agent(), jax.random.PRNGKey(2), 2, threshold=1.0, **common)


@pytest.mark.slow
def test_uct_agent_batch_invariant():
    common = dict(size=SIZE, komi=KOMI, max_moves=10, num_games=4)
    whole = play_arena(uct_agent(4), random_agent(), jax.random.PRNGKey(4), **common)
    halves = play_arena(uct_agent(4), random_agent(), jax.random.PRNGKey(4), batch_size=2, **common)
    np.testing.assert_array_equal(whole.actions, halves.actions)


def test_uct_agent_with_a_fast_rollout_policy_plays():
    from gojax import rollout_policy

    weights = rollout_policy.zero_weights()._replace(last=jnp.asarray([4.0, 2, 1, 0, 0, 0]))
    fast = uct_agent(4, rollout_weights=weights, rollout_label="local")
    assert fast.name == "uct4+local" and uct_agent(4).name == "uct4"
    result = play_arena(
        fast, random_agent(), jax.random.PRNGKey(2), size=SIZE, komi=KOMI, max_moves=8, num_games=2
    )
    assert result.actions.shape[0] == 2 and (result.actions[:, 0] < SIZE * SIZE).all()


def test_search_agent_mixes_rollouts_into_its_leaf_values():
    """AlphaGo's leaf value in the arena: with komi 100 and lambda 1 every leaf is a lost
    random game for Black, so Black's root value is exactly -1; lambda 0 is the net's."""
    spec = ModelSpec("agz_tiny")
    variables = init_variables(spec, jax.random.PRNGKey(0), SIZE)
    config = SearchConfig(num_simulations=4, temperature_moves=0, dirichlet_fraction=0.0)
    states = jax.tree.map(
        lambda x: jnp.broadcast_to(x, (2,) + x.shape), gojax.new_game(SIZE, komi=100.0)
    )
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    mixed = search_agent(spec, variables, config, rollout_lambda=1.0, rollouts=2)
    assert mixed.name.endswith("-lam1")
    # Jitted as the arena runs agents: a search run op by op compiles hundreds of programs.
    _, values = jax.jit(mixed.policy)(mixed.params, states, keys)
    np.testing.assert_array_equal(values, [-1.0, -1.0])
    plain = search_agent(spec, variables, config)
    _, values = jax.jit(plain.policy)(plain.params, states, keys)
    assert np.all(np.abs(np.asarray(values)) < 0.99)
    with pytest.raises(ValueError, match="rollout_lambda must be in"):
        search_agent(spec, variables, config, rollout_lambda=1.5)


SHARDED = textwrap.dedent(
    """
    import jax, numpy as np
    from jax.sharding import Mesh
    from eval.arena import GAMES_AXIS, capture_agent, play_arena, random_agent
    assert jax.device_count() == 2, jax.devices()
    mesh = Mesh(np.asarray(jax.devices()), (GAMES_AXIS,))
    kw = dict(size=5, komi=0.5, max_moves=20, num_games=6, opening_moves=1)
    one = play_arena(capture_agent(), random_agent(), jax.random.PRNGKey(9), **kw)
    two = play_arena(capture_agent(), random_agent(), jax.random.PRNGKey(9), mesh=mesh, **kw)
    np.testing.assert_array_equal(one.actions, two.actions)
    np.testing.assert_array_equal(one.outcome, two.outcome)
    print("same games on 1 and 2 devices")
    """
)


@pytest.mark.slow
def test_sharded_over_two_devices_plays_the_same_games():
    out = run_on_host_devices(SHARDED, 2)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "same games on 1 and 2 devices" in out.stdout
