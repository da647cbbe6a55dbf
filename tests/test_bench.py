"""The benchmark scripts run end to end at smoke sizes and end with their JSON line."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def run_bench(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--smoke", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_search_bench_compares_with_pgx():
    result = run_bench("search.py")
    rows = {row["rules"]: row for row in result["search"]}
    assert set(rows) == {"chinese"}  # the smoke's one row: the rules pgx's mask enforces
    for row in rows.values():
        assert row["ours_sims_per_s"] > 0 and row["pgx_sims_per_s"] > 0
        assert row["ratio_ours_over_pgx"] == pytest.approx(
            row["ours_sims_per_s"] / row["pgx_sims_per_s"]
        )
        # Shares of a search's time: the net's passes never take more than all of it.
        assert row["ours_overhead"] < 1 and row["pgx_overhead"] < 1
        assert row["ours_rules_share"] > 0 and row["ratio_ceiling"] > 0
    (reuse,) = result["reuse"]
    # A reused subtree leaves fewer simulations to run than a fresh search.
    assert reuse["reuse_mean_simulations_run"] < reuse["simulations"]


def test_net_bench_rows_compare_with_their_own_matmul():
    result = run_bench("net.py")
    (row,) = result["rows"]
    assert row["size"] == 9 and row["batch"] == 4 and row["net_evals_per_s"] > 0
    # The best call is at least as fast as the median one.
    assert 0 < row["net_evals_per_s_median"] <= row["net_evals_per_s"]
    assert row["mflops_per_eval"] > 0 and row["matmul_gflops"] > 0
    # The fraction is the row's own achieved rate over the matmul timed right after it.
    assert row["fraction_of_matmul"] == pytest.approx(row["net_gflops"] / row["matmul_gflops"])
    assert row["features_per_s"] > 0 and row["evaluate_per_s"] > 0


def test_accelerator_bench_counts_convolution_and_matmul_flops():
    """The accelerator script counts FLOPs on the jaxpr (XLA's GPU cost analysis misses
    cuDNN convolutions): 2 per multiply-add, nested jits and grouped convolutions included."""
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, str(REPO / "bench"))
    from accelerator import _product_flops

    def conv(x, w, groups=1):
        dims = ("NHWC", "HWIO", "NHWC")
        return jax.lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=dims, feature_group_count=groups
        )

    @jax.jit
    def head(h, m):
        return h.reshape(h.shape[0], -1) @ m

    def net(x, w, w_grouped, m):
        h = conv(x, w)
        h = conv(h, w_grouped, groups=2)
        return head(h, m)

    x = jnp.ones((2, 19, 19, 8))
    w, w_grouped = jnp.ones((3, 3, 8, 16)), jnp.ones((3, 3, 8, 16))
    m = jnp.ones((19 * 19 * 16, 5))
    outputs = 2 * 19 * 19 * 16
    expected = 2 * outputs * 3 * 3 * 8 + 2 * outputs * 3 * 3 * 8 + 2 * (2 * 5) * (19 * 19 * 16)
    assert _product_flops(net, x, w, w_grouped, m) == expected
    # Each grouped filter reads half the channels: half the work of a full one.
    assert _product_flops(lambda x, w: conv(x, w, groups=2), x, jnp.ones((3, 3, 4, 16))) == (
        2 * outputs * 3 * 3 * 4
    )


def test_accelerator_bench_budget_skips_and_unknown_sections_are_refused(tmp_path):
    script = [sys.executable, str(REPO / "bench" / "accelerator.py"), "--smoke"]
    out = tmp_path / "accel"
    done = subprocess.run(
        [*script, "--only", "network", "devices", "--budget", "0", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Past the budget every section is skipped, in the order asked for, and recorded.
    assert list(result)[2:] == ["network", "devices"]
    assert all("budget" in result[name]["skipped"] for name in ("network", "devices"))
    assert json.loads((out / "results.json").read_text()) == result

    refused = subprocess.run(
        [*script, "--only", "boards", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2
    assert "unknown section(s) boards" in refused.stderr and "Traceback" not in refused.stderr


@pytest.mark.slow  # CI runs every section of the smoke after the tests (.ci/run)
def test_accelerator_training_section_times_features_selfplay_and_learner_apart(tmp_path):
    """The recipe's self-play (4 games capped at 6 moves at smoke size) and its learner are
    timed separately, so a slow self-play still leaves the learner's figure and vice versa."""
    out = tmp_path / "accel"
    result = run_bench("accelerator.py", "--only", "training", "--out", str(out))
    training = result["training"]
    assert training["selfplay_games"] == 4 and training["selfplay_positions"] == 4 * 6
    assert training["learner_batch"] == 8 and training["features_batch"] == 4
    for key in ("features_per_s", "selfplay_moves_per_s", "learner_samples_per_s"):
        assert training[key] > 0, key
    assert json.loads((out / "results.json").read_text()) == result


@pytest.mark.slow  # CI runs every section of the smoke after the tests (.ci/run)
def test_accelerator_one_game_section_times_each_leaf_batch(tmp_path):
    """One 9x9 game at K = 1 and 4 (smoke), each row beside the net alone, and the best K
    named with its speed-up over K = 1."""
    out = tmp_path / "accel"
    one_game = run_bench("accelerator.py", "--only", "one_game", "--out", str(out))["one_game"]
    if "skipped" in one_game:
        pytest.skip("the reference net (../shared/reference) is not here")
    assert one_game["size"] == 9 and one_game["visits"] == 8
    assert [row["leaf_batch"] for row in one_game["rows"]] == [1, 4]
    assert all(row["search_visits_per_s"] > 0 for row in one_game["rows"])
    best = max(one_game["rows"], key=lambda row: row["search_visits_per_s"])
    assert one_game["best_leaf_batch"] == best["leaf_batch"]
    assert one_game["best_over_k1"] == pytest.approx(
        best["search_visits_per_s"] / one_game["rows"][0]["search_visits_per_s"]
    )


def test_accelerator_results_write_jax_scalars_as_numbers(tmp_path):
    """A figure left as a JAX scalar is still written as a number."""
    sys.path.insert(0, str(REPO / "bench"))
    import jax.numpy as jnp
    from accelerator import _write_results

    line = _write_results(tmp_path, True, {"x": {"rate": jnp.float32(2.5), "obj": object}})
    assert json.loads(line)["x"]["rate"] == 2.5
    assert "object" in json.loads((tmp_path / "results.json").read_text())["x"]["obj"]


def test_features_bench_times_every_encoder_against_katagos():
    rows = run_bench("features.py", "--repeats", "1")["rows"]
    assert [(r["size"], r["encoder"]) for r in rows] == [
        (9, "agz"),
        (9, "alphago"),
        (9, "katago"),
    ]
    assert all(r["positions_per_s"] > 0 for r in rows)
    katago = rows[-1]
    assert katago["vs_katago"] == 1.0


def test_rollouts_bench_times_both_policies():
    result = run_bench("rollouts.py")
    (row,) = result["rows"]
    assert row["random_games_per_s"] > 0 and row["fast_games_per_s"] > 0
    assert row["fast_cost"] == pytest.approx(row["random_games_per_s"] / row["fast_games_per_s"])


@pytest.mark.slow  # two engines compiled (with and without the cache): minutes
def test_review_bench_finds_the_way_back_in_the_cache():
    result = run_bench("review.py")
    cached, plain = result["rows"]
    assert (cached["nn_cache"], plain["nn_cache"]) == (8, 0)
    assert cached["backward_hit_rate"] > 0.9 and "backward_hit_rate" not in plain
    for row in (cached, plain):
        assert row["forward_over_backward"] == pytest.approx(row["forward_s"] / row["backward_s"])


# A stand-in for KataGo's GTP engine: answers the commands the one-game bench sends,
# writes each one to a log, and "searches" by sleeping SEARCH_S seconds.
FAKE_KATAGO = """\
import os, sys, time
log = open(os.environ["FAKE_KATAGO_LOG"], "w")
assert sys.argv[1] == "gtp" and "-model" in sys.argv and "-config" in sys.argv
for line in sys.stdin:
    command = line.split()
    log.write(line); log.flush()
    if command[0] == "quit":
        print("=\\n", flush=True); break
    if command[0] == "kata-search":
        time.sleep(0.25)
        print("= D4\\n", flush=True)
    elif command[0] == "version":
        print("= 0.0-fake\\n", flush=True)
    elif command[0] in ("boardsize", "clear_board", "komi", "kata-set-rules", "play",
                        "clear_cache"):
        print("=\\n", flush=True)
    else:
        print("? unknown command\\n", flush=True)
"""


def test_one_game_bench_times_katagos_engine_on_the_same_position(tmp_path, monkeypatch):
    """``--katago``: the engine is set up on the bench's position (its moves played from
    an empty board) and each timed search starts from a cleared cache; its visits/s is
    the visits over the search's wall time, and the ratio is our best K's over it."""
    fake = tmp_path / "katago"
    fake.write_text(f"#!{sys.executable}\n" + FAKE_KATAGO)
    fake.chmod(0o755)
    log = tmp_path / "commands.txt"
    monkeypatch.setenv("FAKE_KATAGO_LOG", str(log))
    result = run_bench("one_game.py", "--katago", str(fake), "--move", "6")
    (peer,) = result["katago"]
    assert peer["engine"] == "0.0-fake" and peer["threads"] == 2
    # 8 visits (the smoke's) in a little over 0.25 s
    assert 8 / 0.4 < peer["katago_visits_per_s"] <= 8 / 0.25
    ours = max(row["search_visits_per_s"] for row in result["rows"])
    assert peer["ours_visits_per_s"] == ours
    assert peer["ours_over_katago"] == pytest.approx(ours / peer["katago_visits_per_s"])
    commands = log.read_text().splitlines()
    assert commands[:5] == ["version", "boardsize 9", "clear_board", commands[3], commands[4]]
    assert commands[3].startswith("komi ") and commands[4] == "kata-set-rules tromp-taylor"
    plays = [c for c in commands if c.startswith("play ")]
    assert len(plays) == 6 and [p.split()[1] for p in plays] == ["B", "W"] * 3
    searches = [c for c in commands if c.startswith("kata-search")]
    assert searches and all(c == "kata-search B" for c in searches)  # Black after 6 moves
    # every search follows a clear_cache (a timed search has no tree and no cache)
    assert all(commands[i - 1] == "clear_cache" for i, c in enumerate(commands) if c in searches)


@pytest.mark.slow  # four self-play programs compiled: a minute and a half
def test_slots_bench_plays_whole_games_at_each_slot_count():
    rows = run_bench("selfplay_slots.py")["rows"]
    assert [(r["games"], r["slots"]) for r in rows] == [(4, 4), (4, 2)]
    for r in rows:
        # 5x5 capped at 12 moves: every game whole.
        assert r["positions"] == 4 * r["mean_game_length"] and r["longest_game"] <= 12
        assert r["fill"] == pytest.approx(r["positions"] / (r["slots"] * r["call_steps"]))
    # One slot a game: the call lasts the longest game; two slots play two games each.
    assert rows[0]["call_steps"] == rows[0]["longest_game"] and rows[0]["speedup"] == 1.0
    assert rows[1]["longest_game"] <= rows[1]["call_steps"] <= 2 * 12


def test_slots_bench_counts_the_steps_of_a_call_as_self_play_assigns_slots():
    sys.path.insert(0, str(REPO / "bench"))
    from selfplay_slots import call_steps

    assert call_steps(np.array([3, 5, 2, 4]), 4) == 5  # one slot each: the longest
    # Two slots: slot 0 plays 3 then game 2 (2): 5 steps; slot 1 plays 5 then game 3 (4): 9.
    assert call_steps(np.array([3, 5, 2, 4]), 2) == 9
    # A slot whose game ends early plays more of the games.
    assert call_steps(np.array([1, 6, 1, 1, 1, 1]), 2) == 6
