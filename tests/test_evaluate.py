"""Batched evaluation with the reference KataGo net: KataGo's numbers, symmetries, CLI."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import play_moves, position
from reference import reference_path

import gojax
from eval import cli
from gojax._game import handicap_bonus, state_from_moves
from gojax._verify_net import verify_net_file
from gojax.evaluate import check_symmetry, evaluate
from gojax.katago_features import katago_inputs as _katago_inputs
from gojax.katago_model import load_model

katago_inputs = jax.jit(_katago_inputs)
MODEL = "g170-b6c96-s175395328-d26788732.bin.gz"


@functools.cache
def model():
    return load_model(reference_path("katago", MODEL))


@functools.cache
def positions() -> dict[str, dict]:
    with open(reference_path("katago", "positions.jsonl")) as handle:
        return {r["id"]: r for r in map(json.loads, handle)}


@functools.cache
def jitted_evaluate(symmetry):
    m = model()
    return jax.jit(functools.partial(evaluate, m.module(), version=m.version, symmetry=symmetry))


def stack(states):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def state_of(record, transform: int = 0):
    """The position of a reference record, turned by board symmetry ``transform``."""
    size = record["size"]
    moves = []
    for colour, vertex in record["moves"]:
        action = gojax.transform_action(gojax.gtp_to_action(vertex, size), size, transform)
        moves.append((colour, gojax.action_to_gtp(int(action), size)))
    return state_from_moves(size, moves, komi=record["komi"], rules=record["rules"])


def write_positions(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --- KataGo's numbers -------------------------------------------------------------------------


def test_verify_net_matches_katago_and_catches_differences(tmp_path):
    chinese = [r for r in positions().values() if r["size"] == 9 and r["rules"] == "chinese"]
    good = write_positions(tmp_path / "good.jsonl", chinese[:4])
    check = verify_net_file(model(), good)
    assert check.ok and check.num_positions == 4 and not check.legal_disagreements
    assert check.worst["policy"].difference < 1e-4
    assert check.worst["whiteWin"].difference < 1e-4
    assert check.worst["whiteLead"].difference < 2e-3
    assert check.worst["whiteOwnership"].difference < 1e-4

    # A changed lead and a legal point marked illegal are both caught and located.
    bad = json.loads(json.dumps(chinese[:4]))
    bad[1]["katago"]["whiteLead"] += 0.5
    legal_point = next(i for i, v in enumerate(bad[2]["katago"]["policy"]) if v is not None)
    bad[2]["katago"]["policy"][legal_point] = None
    check = verify_net_file(model(), write_positions(tmp_path / "bad.jsonl", bad))
    assert not check.ok
    lead = check.worst["whiteLead"]
    assert not lead.ok and lead.position == bad[1]["id"] and 0.49 < lead.difference < 0.51
    vertex = gojax.action_to_gtp(legal_point, 9)
    expected = f"{bad[2]['id']}: {vertex} is legal for us, not for KataGo"
    assert check.legal_disagreements == [expected]


def test_verify_net_evaluates_in_full_float32_precision(tmp_path, monkeypatch):
    """GPUs run float32 convolutions in TF32 by default, which moved the KataGo net's
    ownership past the check's tolerance on an H200: the check asks for full products."""
    import gojax._verify_net as verify

    seen, real_evaluator = [], verify.make_evaluator

    def recording_evaluator(*args, **kwargs):
        run = real_evaluator(*args, **kwargs)

        def wrapped(variables, states):
            seen.append(jax.config.jax_default_matmul_precision)
            return run(variables, states)

        return wrapped

    monkeypatch.setattr(verify, "make_evaluator", recording_evaluator, raising=True)
    record = next(r for r in positions().values() if r["size"] == 9)
    check = verify_net_file(model(), write_positions(tmp_path / "one.jsonl", [record]))
    assert check.ok and seen == ["highest"]
    assert jax.config.jax_default_matmul_precision != "highest"  # restored afterwards


@pytest.mark.slow
def test_verify_net_cli_on_every_reference_position(capsys, monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")
    code = cli.main(
        [
            "verify-net",
            "--model",
            str(reference_path("katago", MODEL)),
            str(reference_path("katago", "positions.jsonl")),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "46 positions" in out and "legal sets: 0 disagreements" in out and "OK" in out


# --- Symmetries -------------------------------------------------------------------------------


def test_symmetric_positions_give_symmetric_outputs():
    """Evaluating P under symmetry k equals evaluating the turned position T_k(P) unturned.

    This holds exactly only if every input feature (ladders, area, bans,
    history) commutes with the board symmetries.
    """
    record = positions()["g101-6-m34"]  # 9x9 tromp-taylor, 34 moves
    size = record["size"]
    original = state_of(record)
    turned = stack([state_of(record, k) for k in range(8)])
    ks = jnp.arange(8)
    m = model()
    run = jax.jit(lambda v, s, syms: evaluate(m.module(), v, s, version=m.version, symmetries=syms))
    # Each turned position at symmetry 0, and the original at each symmetry.
    plain = run(m.variables, turned, jnp.zeros(8, jnp.int32))
    viewed = run(m.variables, stack([original] * 8), ks)
    for k in range(8):
        policy_back = gojax.transform_policy(viewed["policy"][k], k)
        np.testing.assert_allclose(plain["policy"][k], policy_back, atol=2e-6)
        owner_back = gojax.transform_board(viewed["white_ownership"][k], k)
        np.testing.assert_allclose(plain["white_ownership"][k], owner_back, atol=2e-6)
        for key in ("white_win", "white_loss", "white_lead"):
            np.testing.assert_allclose(plain[key][k], viewed[key][k], rtol=1e-5, atol=1e-5)
    # The symmetries genuinely differ (the net is not exactly equivariant).
    assert float(jnp.max(jnp.abs(viewed["policy"][0] - viewed["policy"][5]))) > 1e-4
    assert int(np.asarray(plain["legal"][0]).sum()) == int(np.asarray(plain["legal"][3]).sum())
    del size


def test_symmetry_average_is_equivariant_and_the_mean_of_all_eight():
    record = positions()["g101-4-m14"]
    states = stack([state_of(record, 0), state_of(record, 6)])
    average = jitted_evaluate("average")(model().variables, states)
    # The average of a turned position is the turned average.
    np.testing.assert_allclose(
        average["policy"][1], gojax.transform_policy(average["policy"][0], 6), atol=2e-6
    )
    np.testing.assert_allclose(average["white_win"][1], average["white_win"][0], atol=1e-6)
    # And it is the mean over the 8 fixed symmetries.
    m = model()
    eight = jax.tree.map(lambda x: jnp.repeat(x, 8, axis=0), states)  # [16]: each 8 times
    syms = jnp.tile(jnp.arange(8), 2)
    singles = jax.jit(lambda v, s, k: evaluate(m.module(), v, s, version=m.version, symmetries=k))(
        m.variables, eight, syms
    )
    mean_lead = np.asarray(singles["white_lead"]).reshape(2, 8).mean(axis=1)
    np.testing.assert_allclose(average["white_lead"], mean_lead, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(average["policy"]).sum(-1), 1.0, atol=1e-5)


def test_random_symmetry_needs_a_key_and_bad_symmetries_are_refused():
    states = stack([state_of(positions()["g101-4-m14"])])
    with pytest.raises(ValueError, match="PRNG key"):
        evaluate(model().module(), model().variables, states, symmetry="random")
    out = jitted_evaluate("random")(model().variables, states, key=jax.random.key(3))
    assert abs(float(out["white_win"][0] + out["white_loss"][0]) - 1.0) < 1e-5
    for bad in (8, -1, "mean", True):
        with pytest.raises(ValueError, match="symmetry must be"):
            check_symmetry(bad)


# --- Positions from move lists ----------------------------------------------------------------


def test_handicap_moves_add_compensation_and_clear_history():
    moves = [("B", "C3"), ("B", "G7"), ("B", "G3"), ("W", "E5")]
    for rules, bonus in (("chinese", 3), ("aga", 2), ("tromp-taylor", 0), ("new-zealand", 0)):
        state = state_from_moves(9, moves, komi=0.5, rules=rules)
        assert float(state.komi) == pytest.approx(0.5 + bonus), rules
        assert handicap_bonus(rules, 3) == bonus
    assert handicap_bonus("chinese", 1) == 0
    state = state_from_moves(9, moves, komi=7.5, rules="chinese")
    # The out-of-turn Black moves forgot what came before them: history shows G3 and E5 only.
    spatial, glob = katago_inputs(state)
    last = {gojax.action_to_gtp(int(a), 9) for a in np.flatnonzero(spatial[..., 9].reshape(-1))}
    before = {gojax.action_to_gtp(int(a), 9) for a in np.flatnonzero(spatial[..., 10].reshape(-1))}
    assert last == {"E5"} and before == {"G3"}
    assert float(np.asarray(spatial[..., 11]).sum()) == 0.0
    assert float(glob[5]) == pytest.approx(-(7.5 + 3) / 20)  # Black to play: komi negated


def test_handicap_counted_as_katago_counts_it_through_gtp():
    # A lone White pass between Black's opening moves keeps the opening going.
    moves = [("B", "C3"), ("W", "pass"), ("B", "G7"), ("W", "E5")]
    assert float(state_from_moves(9, moves, komi=0.5, rules="chinese").komi) == 2.5
    assert float(state_from_moves(9, moves, komi=0.5, rules="aga").komi) == 1.5
    # White answering twice: a set-up problem, no handicap.
    moves = [("B", "C3"), ("B", "G7"), ("W", "E5"), ("W", "D4")]
    assert float(state_from_moves(9, moves, komi=0.5, rules="chinese").komi) == 0.5


def test_friendly_pass_hides_history_only_before_the_game_ends():
    """KataGo (area rules but tromp-taylor) hides the history and global 14 when a
    pass would end the game, not once two passes have ended it: then the last
    move shows (one turn) and global 14 is set."""
    one = state_from_moves(9, [("B", "E5"), ("W", "pass")], komi=7.5, rules="chinese")
    spatial, glob = (np.asarray(x) for x in katago_inputs(one))
    assert glob[0] == 0.0 and glob[14] == 0.0 and not spatial[..., 10].any()
    moves = [("B", "E5"), ("W", "C3"), ("B", "pass"), ("W", "pass")]
    for rules in ("chinese", "aga", "tromp-taylor"):
        ended = state_from_moves(9, moves, komi=7.5, rules=rules)
        assert bool(ended.terminated)
        spatial, glob = (np.asarray(x) for x in katago_inputs(ended))
        assert list(glob[:5]) == [1.0, 0.0, 0.0, 0.0, 0.0] and glob[14] == 1.0, rules
        assert not spatial[..., 9:14].any()  # one turn of history: the pass


def test_state_from_moves_names_bad_moves():
    with pytest.raises(ValueError, match=r"move 2 \(W C3\) is illegal"):
        state_from_moves(9, [("B", "C3"), ("W", "C3")], komi=7.5, rules="chinese")
    with pytest.raises(ValueError, match="off a 9x9 board"):
        state_from_moves(9, [("B", "Z99")], komi=7.5, rules="chinese")
    with pytest.raises(ValueError, match="malformed vertex"):
        state_from_moves(9, [("B", "5E")], komi=7.5, rules="chinese")
    with pytest.raises(ValueError, match="after the game ended"):
        moves = [("B", "pass"), ("W", "pass"), ("B", "E5")]
        state_from_moves(9, moves, komi=7.5, rules="chinese")
    with pytest.raises(ValueError, match="colour"):
        state_from_moves(9, [("X", "E5")], komi=7.5, rules="chinese")


def test_superko_ban_reaches_the_input_plane():
    """Plane 6 holds superko bans beyond the simple-ko point, only under superko rules."""
    # Send two, return one: after B C5 W A5 (two stones taken, so no ko point),
    # Black's retake at B5 would recreate the starting stones.
    send_two = """
        . X . O .
        X O O . .
        . . . . .
        . . . . .
        . . . . .
    """
    banned = {}
    for rules in ("chinese", "tromp-taylor"):
        state = play_moves(position(send_two, rules=rules), "B C5", "W A5")
        assert int(state.ko) == -1
        spatial, _ = katago_inputs(state)
        banned[rules] = {
            gojax.action_to_gtp(int(a), 5) for a in np.flatnonzero(spatial[..., 6].ravel())
        }
    assert banned == {"chinese": set(), "tromp-taylor": {"B5"}}


# --- gojax analyze ----------------------------------------------------------------------------


def test_analyze_cli_prints_numbers_and_draws_maps(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")
    game = reference_path("sgf", "katago-9x9", "kg9-9-0000.sgf")
    svg, summary = tmp_path / "own.svg", tmp_path / "a.json"
    code = cli.main(
        ["analyze", str(game), "--model", str(reference_path("katago", MODEL)),
         "--move", "20", "--symmetry", "0", "--svg", str(svg), "--json", str(summary)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Black win rate" in out and "Score lead" in out and "Top policy moves" in out
    data = json.loads(summary.read_text())
    assert data["move"] == 20 and data["to_play"] == "B"
    assert data["black_win"] + data["white_win"] == pytest.approx(1.0, abs=1e-5)
    assert len(data["white_ownership"]) == 81 and len(data["policy"]) == 5
    assert max(data["policy"].values()) <= 1.0
    assert "<svg" in svg.read_text() and "<svg" in (tmp_path / "own-policy.svg").read_text()


def test_analyze_and_verify_net_report_bad_input_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GOJAX_CACHE", "")
    junk = tmp_path / "junk.bin.gz"
    junk.write_bytes(b"not a model")
    game = tmp_path / "g.sgf"
    game.write_text("(;SZ[9];B[ee])")
    code = cli.main(["analyze", str(game), "--model", str(junk)])
    err = capsys.readouterr().err
    assert code == 2 and "junk.bin.gz" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    lines = tmp_path / "p.jsonl"
    lines.write_text('{"size": 9, "komi": 7.5, "rules": "chinese", "moves": []}\n')
    code = cli.main(["verify-net", str(lines), "--model", str(reference_path("katago", MODEL))])
    err = capsys.readouterr().err
    assert code == 2 and "no katago.policy" in err
    with pytest.raises(SystemExit) as exit_info:  # argparse's own usage error
        cli.main(["analyze", str(game), "--model", str(junk), "--symmetry", "9"])
    assert exit_info.value.code == 2 and "symmetry must be" in capsys.readouterr().err


def test_a_forgotten_history_shows_only_the_moves_played_since():
    """KataGo's ignorePreRootHistory: a position whose past moves are forgotten has the
    inputs of the same stones set up afresh (no move, no board before it for the ladder
    planes), before and after a move searched from it; on the reference positions."""
    from gojax.katago_features import forget_history

    inputs = jax.jit(_katago_inputs)
    checked = differed = 0
    for record in positions().values():
        size, moves = record["size"], record["moves"]
        if not moves or moves[-1][1] == "pass" or record["rules"] in ("japanese", "korean"):
            continue  # nothing to forget; the passes and captures count for the rules
        state = state_from_moves(size, moves, komi=record["komi"], rules=record["rules"])
        if int(state.ko) >= 0 or size > 9:
            continue  # a ko point is the rules' record too
        fresh = gojax.new_game(
            size, komi=record["komi"], rules=record["rules"], board=state.board,
            to_play=state.to_play, max_moves=state.max_moves,
        )  # fmt: skip
        forgotten = forget_history(state)
        hidden, shown = inputs(forgotten), inputs(state)
        for ours, theirs in zip(hidden, inputs(fresh), strict=True):
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), record["id"])
        differed += not np.array_equal(np.asarray(hidden[0]), np.asarray(shown[0]))
        ladders = np.asarray(hidden[0][..., 14:17])  # ladder planes now, 1 and 2 moves ago
        differed += not np.array_equal(ladders, np.asarray(shown[0][..., 14:17]))
        legal = np.flatnonzero(np.asarray(gojax.legal_moves(state))[:-1])
        move = int(legal[len(legal) // 2])
        after = inputs(gojax.play(forgotten, move))
        for ours, theirs in zip(after, inputs(gojax.play(fresh, move)), strict=True):
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), record["id"])
        assert np.asarray(after[0][..., 9]).sum() == 1  # the move since: shown
        checked += 1
    assert checked >= 10 and differed > checked  # premise: the moves (and ladders) showed


def test_rules_kept_as_data_give_katago_numbers_in_one_program():
    """``runtime_rules``: every reference position, of every rule set, in one batch
    (one compiled program): the same legal moves, inputs, score and network outputs
    as under its own static rules."""
    records = [r for r in positions().values() if r["size"] == 9]
    assert len({r["rules"] for r in records}) >= 3
    static, runtime = [], []
    for record in records:
        moves, rules = record["moves"], record["rules"]
        game = functools.partial(state_from_moves, 9, moves, komi=record["komi"], rules=rules)
        static.append(game())
        runtime.append(game(runtime_rules=True, max_moves=200))  # one shape for the batch
        assert runtime[-1].rules == gojax.RUNTIME_RULES
    batch = stack(runtime)
    inputs = jax.jit(jax.vmap(_katago_inputs))(batch)
    legal = jax.jit(jax.vmap(gojax.legal_moves))(batch)
    scores = jax.jit(jax.vmap(gojax.score))(batch)
    out = jitted_evaluate(0)(model().variables, batch)
    for i, (record, state) in enumerate(zip(records, static, strict=True)):
        for ours, theirs in zip(inputs, katago_inputs(state), strict=True):
            np.testing.assert_array_equal(np.asarray(ours[i]), np.asarray(theirs), record["id"])
        np.testing.assert_array_equal(np.asarray(legal[i]), np.asarray(gojax.legal_moves(state)))
        assert float(scores[i]) == float(gojax.score(state)), record["id"]
        alone = jitted_evaluate(0)(model().variables, stack([state]))
        for name in alone:  # every output: policy, value, score, no-result, ...
            np.testing.assert_allclose(out[name][i], alone[name][0], 1e-5, 1e-4, err_msg=name)
