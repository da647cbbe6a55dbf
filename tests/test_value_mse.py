"""`gojax value-mse`: AlphaGo's value-net-against-rollouts comparison (Fig. 2b)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jax
import numpy as np
import pytest
from boards import position
from reference import reference_path

from eval import cli
from eval.value_mse import (
    bucket_label,
    bucket_of,
    load_games,
    mse_by_bucket,
    rollout_outcomes,
    sample_positions,
)
from gojax import rollout_policy

MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"


def stack(*states):
    return jax.tree.map(lambda *xs: np.stack(xs), *states)


def test_mse_by_bucket_is_the_hand_computation():
    outcomes = np.array([1, -1, 1, -1, 1])
    buckets = np.array([0, 0, 2, 2, 2])
    value = np.array([0.5, 0.0, -1.0, -0.5, 1.0])
    rollout = np.array([1.0, 1.0, 1.0, -1.0, 0.0])
    r = mse_by_bucket({"value": value, "rollout": rollout}, outcomes, buckets)
    assert r["buckets"] == [0, 2]
    assert r["count"] == [2, 3] and r["overall_count"] == 5
    # value: squared errors 0.25, 1 | 4, 0.25, 0
    np.testing.assert_allclose(r["mse"]["value"], [0.625, 4.25 / 3])
    np.testing.assert_allclose(r["overall"]["value"], 5.5 / 5)
    # rollout: squared errors 0, 4 | 0, 0, 1
    np.testing.assert_allclose(r["mse"]["rollout"], [2.0, 1 / 3])
    np.testing.assert_allclose(r["overall"]["rollout"], 1.0)
    # standard error of the mean of (0, 4): sample std 2.828.. / sqrt(2) = 2
    np.testing.assert_allclose(r["stderr"]["rollout"][0], 2.0)


def test_buckets_by_moves_played():
    assert bucket_of(np.array([0, 9, 10, 19, 20, 95]), 10).tolist() == [0, 0, 1, 1, 2, 9]
    assert bucket_label(0, 10) == "0-9" and bucket_label(3, 20) == "60-79"


def test_sample_positions_draws_per_game_per_bucket():
    rng = np.random.default_rng(1)
    game, move = sample_positions([25, 7], width=10, per_game=2, rng=rng)
    pairs = list(zip(game.tolist(), move.tolist(), strict=True))
    assert len(set(pairs)) == len(pairs) == 8  # game 0: 3 buckets x 2; game 1: 1 bucket x 2
    for g, length in enumerate([25, 7]):
        moves = move[game == g]
        assert moves.max() < length
        counts = np.bincount(bucket_of(moves, 10))
        assert counts.tolist() == ([2, 2, 2] if g == 0 else [2])
    # More positions asked than a bucket holds: all of them, once.
    game, move = sample_positions([12], width=10, per_game=50, rng=rng)
    assert move.tolist() == list(range(12))


def test_rollouts_from_a_won_position_agree_and_an_open_one_varies():
    won = """
        . . X . .
        X X X X X
        X . X . X
        X X X X X
        . . X . .
    """
    # Black's group has two eyes the rollout policy never fills: it always
    # lives, and the area count leaves White far behind even with komi.
    states = stack(
        position(won, to_play="B", rules="chinese", komi=7.5),
        position(won, to_play="W", rules="chinese", komi=7.5),
    )
    outcomes = rollout_outcomes(states, jax.random.key(0), 32, batch=24)
    assert outcomes.shape == (2, 32) and outcomes.dtype == np.int8
    assert (outcomes[0] == 1).all() and (outcomes[1] == -1).all()
    # A fast rollout policy (any weights) plays the same moves, only likelier or not.
    outcomes = rollout_outcomes(states, jax.random.key(0), 8, batch=16, weights=noisy_policy())
    assert (outcomes[0] == 1).all() and (outcomes[1] == -1).all()

    empty = stack(position("\n".join(["....."] * 5), rules="chinese", komi=0.5))
    outcomes = rollout_outcomes(empty, jax.random.key(1), 64, batch=24)
    assert 0 < np.sum(outcomes == 1) < 64


def noisy_policy() -> rollout_policy.RolloutWeights:
    """Rollout policy weights drawn at random: the moves' odds far from uniform."""
    keys = jax.random.split(jax.random.key(7), 2)
    return rollout_policy.zero_weights()._replace(
        pattern=3.0 * jax.random.normal(keys[0], (rollout_policy.NUM_PATTERNS,)),
        last=jax.random.normal(keys[1], (rollout_policy.NUM_OFFSETS,)),
    )


def write_games(folder: Path, games: dict[str, str]) -> None:
    for name, text in games.items():
        (folder / f"{name}.sgf").write_text(text)


def test_load_games_keeps_scored_games_and_checks_the_others(tmp_path):
    # After B C3 and two passes Black owns the whole 5x5 board.
    moves = ";B[cc];W[];B[]"
    write_games(
        tmp_path,
        {
            "a-scored": f"(;GM[1]SZ[5]KM[0.5]RE[W+3.5]{moves})",  # trusted as recorded
            "b-resign-agrees": f"(;GM[1]SZ[5]KM[0.5]RE[B+R]{moves})",
            "c-resign-disagrees": f"(;GM[1]SZ[5]KM[0.5]RE[W+R]{moves})",
            "d-no-result": f"(;GM[1]SZ[5]KM[0.5]{moves})",
            "e-draw": f"(;GM[1]SZ[5]KM[0]RE[0]{moves})",
            "f-illegal": "(;GM[1]SZ[5]KM[0.5]RE[B+2.5];B[cc];W[cc])",
            "g-out-of-turn": "(;GM[1]SZ[5]KM[0.5]RE[B+2.5];B[cc];B[dd])",
            "h-broken": "(;GM[1]SZ[5]RE[B+1];B[cc]",
        },
    )
    games, skipped = load_games(tmp_path)
    assert [Path(g.path).stem for g in games] == ["a-scored", "b-resign-agrees"]
    assert [g.outcome for g in games] == [-1, 1]
    assert games[0].actions.tolist() == [12, 25, 25]
    assert skipped == {
        "not scored, and the final position's count disagrees": 1,
        "no result": 1,
        "draw": 1,
        "illegal move": 1,
        "out-of-turn moves": 1,
        "unreadable SGF": 1,
    }
    assert len(load_games(tmp_path, max_games=1)[0]) == 1


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("make", ["missing", "empty", "unusable"])
def test_cli_rejects_folders_without_usable_games_in_one_line(capsys, tmp_path, make):
    folder = tmp_path / "games"
    if make != "missing":
        folder.mkdir()
    if make == "unusable":
        write_games(folder, {"x": "(;GM[1]SZ[5]KM[0.5];B[cc])"})
    code, out, err = run(capsys, "value-mse", "--model", "none.bin.gz", "--sgf-dir", str(folder))
    expected = {"missing": "no such folder", "empty": "no .sgf files", "unusable": "1 no result"}
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected[make] in err


@pytest.mark.slow  # about 40 s on a loaded 2-core CPU, mostly compiling
def test_end_to_end_on_two_reference_games(capsys, tmp_path):
    model = reference_path("katago", MODEL)
    games = reference_path("sgf", "katago-9x9")
    out_json, out_png = tmp_path / "r.json", tmp_path / "plot" / "r.png"
    policy = tmp_path / "fast" / "rollout_policy.npz"
    rollout_policy.save(policy, noisy_policy())
    code, out, _ = run(
        capsys,
        "value-mse",
        "--model",
        str(model),
        "--sgf-dir",
        str(games),
        "--max-games",
        "2",
        "--rollouts",
        "2,1",
        "--bucket-width",
        "30",
        "--quiet",
        "--min-positions",
        "1",
        "--json",
        str(out_json),
        "--out",
        str(out_png),
        "--rollout-policy",
        str(policy),
    )
    assert code == 0
    assert "value net" in out and "rollouts x2" in out and "fast policy x2" in out
    assert "mix λ=0.5 (fast policy x2)" in out
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    umask = os.umask(0)
    os.umask(umask)
    assert out_json.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private mode
    result = json.loads(out_json.read_text())
    assert result["games"] == 2 and result["config"]["rollouts"] == [2, 1]
    assert list(result["evaluators"]) == [
        "value",
        "rollouts_1",
        "rollouts_2",
        "policy_rollouts_1",
        "policy_rollouts_2",
        "mix",
    ]
    assert result["config"]["rollout_policy"] == str(policy)
    assert sum(result["count"]) == result["overall_count"] >= 4  # >= 2 buckets per game
    assert result["bucket_labels"][0] == "0-29"
    mse = result["overall"]
    assert all(0.0 <= m <= 4.0 for m in mse.values())
    # A single rollout predicts +-1 (or 0 for a draw): its errors are 0, 1 or 4.
    for m, n in zip(result["mse"]["rollouts_1"], result["count"], strict=True):
        assert np.isclose(m * n, round(m * n))
    # Squared error is convex: the mix is never worse than the mix of the errors.
    assert mse["mix"] <= 0.5 * mse["value"] + 0.5 * mse["policy_rollouts_2"] + 1e-9
    # Bad policy files are one-line errors.
    bad = ["--rollout-policy", str(tmp_path / "none.npz"), "--max-games", "1"]
    code, _, err = run(capsys, "value-mse", "--model", str(model), "--sgf-dir", str(games), *bad)
    assert code == 2 and "no such rollout policy file" in err
