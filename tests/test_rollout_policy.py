"""AlphaGo's fast rollout policy: its features, its file, its training and its rollouts."""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import position

import gojax
from gojax import rollout_policy as rp
from gojax._symmetry import transform_board
from gojax.uct import random_rollout, rollout_moves
from train.loop import apply_overrides
from train.rollout_policy import default_rollout_config, train_rollout

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Jitted once for the module: op-by-op dispatch of these small programs is slower than
# compiling them.
pattern_codes = jax.jit(rp.pattern_codes)
features = jax.jit(rp.features)
logits_of = jax.jit(rp.logits)
rollout = jax.jit(random_rollout, static_argnums=2)


def code(digits) -> int:
    """The canonical code of a ring of 8 digits, computed the slow way."""
    ring = list(digits)
    variants = []
    for turn in range(4):
        rotated = ring[-2 * turn :] + ring[: -2 * turn] if turn else ring
        variants.append(rotated)
        variants.append([rotated[(2 - i) % 8] for i in range(8)])
    return min(sum(d * 6**i for i, d in enumerate(v)) for v in variants)


def test_pattern_digits_see_colour_liberties_and_edge_from_the_mover():
    state = position(
        """
        . O X . .
        . X . . .
        . . . . .
        . . . . .
        . . . O X
        """,
        to_play="B",
    )
    codes = np.asarray(pattern_codes(state)).reshape(5, 5)
    # Digits: 0 empty, 1 off board, 2 own in atari, 3 own, 4 opponent in atari, 5 opponent.
    # Ring order from the upper left, clockwise. A1-side corner (row 0, col 0): three off the
    # board above, O (1 liberty: in atari) to the right, X (2+ liberties) below right...
    assert codes[0, 0] == code([1, 1, 1, 4, 3, 0, 1, 1])
    # The empty point up and left of the lower right corner: X in atari below right, seen
    # by Black as "own in atari", O with 2 liberties below; for White the other way round.
    assert codes[3, 3] == code([0, 0, 0, 0, 2, 5, 0, 0])
    white = np.asarray(pattern_codes(state.replace(to_play=jnp.int8(-1)))).reshape(5, 5)
    assert white[3, 3] == code([0, 0, 0, 0, 4, 3, 0, 0])
    # An empty board's centre is all empty; its edges and corners see the edge.
    empty = np.asarray(pattern_codes(gojax.new_game(5))).reshape(5, 5)
    assert empty[2, 2] == 0
    assert empty[0, 0] == empty[4, 4] == empty[0, 4] == code([1, 1, 1, 0, 0, 0, 1, 1])
    assert empty[0, 2] == empty[2, 0] == code([1, 1, 1, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("seed", [0, 1])
def test_codes_are_the_same_under_the_board_symmetries(seed):
    rng = np.random.default_rng(seed)
    board = rng.choice(np.array([-1, 0, 0, 1], np.int8), size=49)
    codes = pattern_codes(gojax.new_game(7, board=board))
    for symmetry in range(8):
        turned = transform_board(jnp.asarray(board), symmetry)
        moved = pattern_codes(gojax.new_game(7, board=turned))
        np.testing.assert_array_equal(transform_board(codes, symmetry), moved)


def test_offset_classes_from_the_last_two_moves():
    state = gojax.new_game(7)
    for vertex in ("D4", "B2", "D5"):  # Black D4, White B2, Black D5 (White to move)
        state = gojax.play(state, gojax.gtp_to_action(vertex, 7))
    feats = features(state)
    last = np.asarray(feats["last"]).reshape(7, 7)  # from Black's D5 (row 2, col 3)
    own = np.asarray(feats["own_last"]).reshape(7, 7)  # from White's B2 (row 5, col 1)
    assert last[2, 4] == last[1, 3] == 0 and last[1, 4] == 1  # (0,1) and (1,1)
    assert last[2, 5] == 2 and last[4, 4] == 3 and last[0, 1] == 4  # (0,2) (2,1) (2,2)
    assert last[2, 6] == last[6, 6] == 5 and last[2, 3] == 5  # farther, and the move itself
    assert own[5, 2] == 0 and own[6, 0] == 1 and own[3, 1] == 2
    passed = features(gojax.play(state, 49))  # after a pass: no last move to answer
    assert (np.asarray(passed["last"]) == 5).all()
    assert np.asarray(passed["own_last"]).reshape(7, 7)[2, 4] == 0  # D5 is now its own move


def test_logits_add_the_table_entries_of_each_feature():
    state = gojax.play(gojax.new_game(5), gojax.gtp_to_action("C3", 5))  # White to move
    feats = features(state)
    weights = rp.zero_weights()._replace(
        pattern=jax.random.normal(jax.random.key(0), (rp.NUM_PATTERNS,)),
        response=jnp.full(rp.NUM_PATTERNS, 10.0),
        last=jnp.arange(6.0) * 100,
        own_last=jnp.full(6, 0.5),
    )
    logits = np.asarray(logits_of(weights, state))
    pattern = np.asarray(weights.pattern)[np.asarray(feats["pattern"])]
    last = np.asarray(feats["last"])
    expected = pattern + np.where(last <= 1, 10.0, 0.0) + 100.0 * last + 0.5
    np.testing.assert_allclose(logits, expected, rtol=1e-6)
    assert np.sum(last <= 1) == 8  # the 8 points around C3 get the response weight
    np.testing.assert_array_equal(logits_of(rp.zero_weights(), state), np.zeros(25))


def test_zero_weights_roll_out_exactly_as_uniform_moves():
    states = jax.tree.map(lambda x: jnp.stack([x, x, x]), gojax.new_game(5, komi=0.5))
    key = jax.random.key(3)
    uniform = rollout(states, key, 8)
    zero = rollout(states, key, 8, weights=rp.zero_weights())
    np.testing.assert_array_equal(uniform, zero)


def test_a_policy_that_likes_captures_captures():
    # White's corner stone is in atari; the pattern of the capturing point (row 1, col 0)
    # gets a weight of 50, every other pattern 0.
    state = position(
        """
        O X . . .
        . . . . .
        . . . . .
        . . . . .
        . . . . .
        """,
        to_play="B",
        rules="chinese",
    )
    codes = pattern_codes(state)
    assert int(jnp.sum(codes == codes[5])) == 1  # no other point shares that pattern
    weights = rp.zero_weights()
    weights = weights._replace(pattern=weights.pattern.at[codes[5]].set(50.0))
    allowed = rollout_moves(state)
    logits = jnp.where(allowed[:-1], logits_of(weights, state), -jnp.inf)
    draws = jax.random.categorical(jax.random.key(0), logits, shape=(200,))
    assert (np.asarray(draws) == 5).all()
    after = gojax.play(state, 5)
    assert int(after.captures[0]) == 1


def test_weights_round_trip_and_bad_files_are_named(tmp_path):
    weights = rp.zero_weights()._replace(last=jnp.arange(6.0))
    path = tmp_path / "policy.npz"
    rp.save(path, weights, trained_on="nothing")
    loaded = rp.load(path)
    np.testing.assert_array_equal(loaded.last, np.arange(6.0))
    assert rp.metadata(path) == {"trained_on": "nothing"}
    with pytest.raises(ValueError, match="no such rollout policy file"):
        rp.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="junk.npz: not a rollout policy file"):
        rp.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="other.npz: not a rollout policy file"):
        rp.load(tmp_path / "other.npz")
    arrays = {k: np.asarray(v) for k, v in weights._asdict().items()}
    np.savez(tmp_path / "short.npz", format=np.asarray(rp.FORMAT), **{**arrays, "last": [1.0]})
    with pytest.raises(ValueError, match="'last' weights are float64\\[1\\], not float\\[6\\]"):
        rp.load(tmp_path / "short.npz")
    bad = {**arrays, "own_last": np.full(6, np.nan, np.float32)}
    np.savez(tmp_path / "nan.npz", format=np.asarray(rp.FORMAT), **bad)
    with pytest.raises(ValueError, match="not all finite"):
        rp.load(tmp_path / "nan.npz")


# ----------------------------------------------------------------------------
# Training.


def _local_games(folder, count: int, size: int = 7, seed: int = 0) -> None:
    """SGF games whose every move answers the last one next to it when it can.

    The mover plays the first allowed point directly above, below, left or right of
    the opponent's last move (in that order), else a random allowed point: a
    rule the policy's offset and pattern features can learn.
    """
    rng = np.random.default_rng(seed)
    allowed_fn = jax.jit(rollout_moves)
    play = jax.jit(gojax.play)
    letters = "abcdefghijklmnopqrs"
    for g in range(count):
        state = gojax.new_game(size, komi=0.5, rules="chinese")
        moves, last = [], None
        for _ in range(30):
            allowed = np.asarray(allowed_fn(state))
            if not allowed[:-1].any():
                break
            choice = None
            if last is not None:
                r, c = divmod(last, size)
                for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                    if 0 <= r + dr < size and 0 <= c + dc < size:
                        point = (r + dr) * size + c + dc
                        if allowed[point]:
                            choice = point
                            break
            if choice is None:
                choice = int(rng.choice(np.flatnonzero(allowed[:-1])))
            colour = "B" if len(moves) % 2 == 0 else "W"
            r, c = divmod(choice, size)
            moves.append(f";{colour}[{letters[c]}{letters[r]}]")
            state, last = play(state, choice), choice
        text = f"(;GM[1]SZ[{size}]KM[0.5]RU[Chinese]RE[B+1]{''.join(moves)})"
        (folder / f"game{g:03d}.sgf").write_text(text)


def _config(sgf_dir, steps: int):
    config = default_rollout_config()
    apply_overrides(
        config,
        [
            f"--config.data.sgf_dir={sgf_dir}",
            "--config.board.size=7",
            "--config.data.holdout_games=4",
            "--config.train.batch_size=64",
            f"--config.train.total_steps={steps}",
            "--config.train.checkpoint_every=20",
            "--config.train.eval_every=20",
            "--config.train.progress=false",
        ],
    )
    return config


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local_games")
    _local_games(folder, 16)
    (folder / "broken.sgf").write_text("(;SZ[7];B[dd]")
    return folder


def test_training_learns_to_answer_locally_and_resumes(games, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = train_rollout(_config(games, 40), tmp_path / "run")
    assert any("broken.sgf" in str(w.message) for w in caught)
    assert first["step"] == 40 and first["skipped_files"] == 1
    held = first["eval"]["holdout"]
    assert held["positions"] > 50 and held["coverage"] == 1.0  # every move was a point
    # Answering next to the last move is most of the rule: far above chance.
    assert held["accuracy"] > 4 * held["uniform_accuracy"]
    assert held["nll"] < held["uniform_nll"] - 0.5
    weights = rp.load(tmp_path / "run" / "rollout_policy.npz")
    assert float(weights.last[0]) > float(weights.last[5]) + 1.0  # (0,1) beats "far"
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in records if "holdout.accuracy" in r] == [20, 40]
    assert (tmp_path / "run" / "learning_curve.png").exists()
    saved = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert saved["eval"]["holdout"]["accuracy"] == held["accuracy"]

    # Resume: 20 more steps from the checkpoint at 40 land where one 60-step run lands.
    second = train_rollout(_config(games, 60), tmp_path / "run")
    straight = train_rollout(_config(games, 60), tmp_path / "straight")
    assert second["step"] == straight["step"] == 60
    resumed, direct = (rp.load(tmp_path / r / "rollout_policy.npz") for r in ("run", "straight"))
    np.testing.assert_allclose(resumed.pattern, direct.pattern, rtol=1e-6, atol=1e-7)
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert steps == sorted(steps) and steps[-1] == 60 and len(set(steps)) == len(steps)

    other = _config(games, 80)
    other.board.komi = 3.0
    with pytest.raises(ValueError, match="board.komi"):
        train_rollout(other, tmp_path / "run")
    (tmp_path / "run" / "checkpoint.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="unreadable checkpoint"):
        train_rollout(_config(games, 80), tmp_path / "run")


def test_train_rollout_command(games, tmp_path, capsys):
    from eval import cli

    config = tmp_path / "rollout.py"
    config.write_text(
        "from train.rollout_policy import default_rollout_config\n"
        "def get_config():\n"
        "    c = default_rollout_config()\n"
        "    c.board.size = 7\n"
        "    c.data.holdout_games = 4\n"
        "    c.train.progress = False\n"
        "    return c\n"
    )
    args = ["train-rollout", "--config", str(config), "--workdir", str(tmp_path / "run")]
    code = cli.main([*args, "--sgf-dir", str(games), "--config.train.total_steps=5"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "held-out moves predicted" in err and "stopped at step 5" in err
    assert (tmp_path / "run" / "rollout_policy.npz").exists()
    # Another folder in the same workdir: refused, naming the key.
    code = cli.main([*args, "--sgf-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "data.sgf_dir" in err and "new workdir" in err
    # No games: a one-line error, no traceback.
    empty = tmp_path / "empty"
    empty.mkdir()
    args[-1] = str(tmp_path / "other")
    code = cli.main([*args, "--sgf-dir", str(empty)])
    err = capsys.readouterr().err
    assert code == 2 and "no .sgf files" in err and "Traceback" not in err
    code = cli.main([*args, "--sgf-dir", str(games), "--config.train.no_such_key=1"])
    assert code == 2 and "no_such_key" in capsys.readouterr().err
    code = cli.main([*args, "--sgf-dir", str(games), "--config.train.l2=-1.0"])
    assert code == 2 and "--config.train.l2=-1.0: must be 0 or more" in capsys.readouterr().err
