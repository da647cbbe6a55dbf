"""Supervised learning from SGF: examples, bad files in the stream, a run and its resume."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
from reference import reference_path

from gojax import sgf
from train.loop import apply_overrides
from train.selfplay import agz_encode
from train.supervised import (
    SGFStream,
    _holdout,
    default_sl_config,
    game_examples,
    sgf_files,
    train_sl,
)

# 5x5: B C3, W C2, B B2, W pass, B D2 (captures nothing), White wins by resignation.
GAME = "(;GM[1]FF[4]SZ[5]KM[0.5]RU[Chinese]RE[W+R];B[cc];W[cb];B[bb];W[];B[db])"


def test_examples_follow_the_game():
    game = game_examples(sgf.parse(GAME), agz_encode, default_rules="tromp-taylor")
    assert game["action"].tolist() == [12, 7, 6, 25, 8]
    assert game["to_play"].tolist() == [1, -1, 1, -1, 1]
    assert game["has_value"]
    assert game["value"].tolist() == [-1, 1, -1, 1, -1]  # White won
    planes = game["inputs"]
    assert planes.shape == (5, 5, 5, 17)
    # Before move 3 (Black to move): plane 0 (own stones) has C3, plane 1 (opponent) C2.
    assert planes[2, 2, 2, 0] == 1 and planes[2, 1, 2, 1] == 1
    assert planes[2, :, :, 16].min() == 1  # Black to move
    assert planes[1, :, :, 16].max() == 0  # White to move


def test_a_move_out_of_turn_takes_the_turn():
    record = sgf.parse("(;SZ[5]RE[B+1];B[cc];B[dd];W[aa])")
    game = game_examples(record, agz_encode, default_rules="tromp-taylor")
    assert game["to_play"].tolist() == [1, 1, -1]


def test_unusable_games_raise_with_the_reason():
    with pytest.raises(ValueError, match="illegal"):
        game_examples(sgf.parse("(;SZ[5];B[cc];W[cc])"), agz_encode, default_rules="chinese")
    with pytest.raises(ValueError, match="no moves"):
        game_examples(sgf.parse("(;SZ[5]AB[cc])"), agz_encode, default_rules="chinese")
    with pytest.raises(ValueError, match="mid-game"):
        game_examples(sgf.parse("(;SZ[5];B[cc];AW[aa];W[dd])"), agz_encode, default_rules="chinese")


def test_results_without_a_winner_are_not_value_targets():
    game = game_examples(sgf.parse("(;SZ[5]RE[Void];B[cc])"), agz_encode, default_rules="chinese")
    assert not game["has_value"]
    assert game["value"].tolist() == [0]


def test_stream_skips_bad_files_once_and_keeps_going(tmp_path):
    (tmp_path / "a.sgf").write_text(GAME)
    (tmp_path / "b.sgf").write_text("(;SZ[5];B[cc];W[")  # truncated
    (tmp_path / "c.sgf").write_text("(;SZ[9];B[ee])")  # other size
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.SGF").write_text(GAME.replace("RE[W+R]", "RE[B+2.5]"))
    files = sgf_files(tmp_path)
    assert [f.name for f in files] == ["a.sgf", "b.sgf", "c.sgf", "d.SGF"]
    stream = SGFStream(files, agz_encode, size=5, default_rules="chinese", seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        games = [stream.next_game() for _ in range(6)]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2  # each bad file reported once, though read in 3 epochs
    assert any("b.sgf" in m for m in messages) and any("board size 9" in m for m in messages)
    assert stream.epoch == 2 and len(games) == 6
    assert sorted({float(g["value"][0]) for g in games}) == [-1.0, 1.0]


def test_stream_order_depends_on_seed_and_epoch_only(tmp_path):
    for i in range(6):
        (tmp_path / f"g{i}.sgf").write_text(f"(;SZ[5]RE[B+1];B[{'abcde'[i % 5]}a])")
    files = sgf_files(tmp_path)

    def first_moves(stream, n):
        return [int(stream.next_game()["action"][0]) for _ in range(n)]

    a = SGFStream(files, agz_encode, size=5, default_rules="chinese", seed=3)
    whole = first_moves(a, 9)
    b = SGFStream(files, agz_encode, size=5, default_rules="chinese", seed=3)
    first_moves(b, 4)
    c = SGFStream(files, agz_encode, size=5, default_rules="chinese", seed=3)
    c.load_state_dict(b.state_dict())
    assert first_moves(c, 5) == whole[4:]


def test_holdout_takes_usable_files_from_either_end(tmp_path):
    for name in ("a", "b", "c", "d", "e"):
        (tmp_path / f"{name}.sgf").write_text(GAME if name != "d" else "not sgf")
    files = sgf_files(tmp_path)
    stream = SGFStream(files, agz_encode, size=5, default_rules="chinese", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rest, games = _holdout(files, stream, 2)
        assert [f.name for f in rest] == ["c.sgf", "d.sgf", "e.sgf"] and len(games) == 2
        rest, games = _holdout(files, stream, 2, "last")  # d is skipped: not usable
        assert [f.name for f in rest] == ["a.sgf", "b.sgf", "d.sgf"] and len(games) == 2
    with pytest.raises(ValueError, match="data.holdout_from must be one of"):
        _holdout(files, stream, 2, "middle")


def test_no_usable_file_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no .sgf files"):
        sgf_files(tmp_path)
    (tmp_path / "x.sgf").write_text("not sgf")
    config = _config(tmp_path, holdout=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="none of the training files is usable"):
            train_sl(config, tmp_path / "run")


def _config(sgf_dir, *, holdout=2, steps=4):
    config = default_sl_config()
    apply_overrides(
        config,
        [
            f"--config.data.sgf_dir={sgf_dir}",
            "--config.board.size=9",
            f"--config.data.holdout_games={holdout}",
            "--config.data.min_size=100",
            "--config.data.games_per_chunk=2",
            "--config.data.samples_per_position=0.1",
            "--config.learner.batch_size=16",
            f"--config.train.total_steps={steps}",
            "--config.train.checkpoint_every=2",
            "--config.train.eval_every=2",
            "--config.train.progress=false",
        ],
    )
    return config


def test_run_trains_evaluates_and_resumes(tmp_path):
    source = sorted(reference_path("sgf", "katago-9x9").glob("*.sgf"))[:8]
    data = tmp_path / "data"
    data.mkdir()
    for path in source:
        shutil.copy(path, data / path.name)
    (data / "broken.sgf").write_text("(;SZ[9];B[ee")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = train_sl(_config(data, steps=4), tmp_path / "run")
    assert first["step"] == 4 and first["resumed_from"] is None
    assert first["skipped"] == 1
    held = first["holdout"]
    assert held["positions"] > 50 and 0.0 <= held["accuracy"] <= 1.0
    assert np.isfinite(held["policy_loss"]) and held["value_mse"] >= 0.0
    assert (tmp_path / "run" / "learning_curve.png").exists()
    assert (tmp_path / "run" / "holdout.json").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        second = train_sl(_config(data, steps=6), tmp_path / "run")
    assert second["resumed_from"] == 4 and second["step"] == 6
