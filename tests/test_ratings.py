"""Bradley-Terry/Elo fits: known ratings recovered, intervals that cover, anchoring, priors."""

import math

import numpy as np
import pytest

from eval.ratings import PairCounts, fit_ratings, pair_counts, plot_ratings, ratings_table

TRUE = {"random": 0.0, "a": 150.0, "b": 300.0, "c": 520.0}


def expected_score(elo_i: float, elo_j: float) -> float:
    return 1.0 / (1.0 + 10 ** ((elo_j - elo_i) / 400.0))


def round_robin(rng: np.random.Generator, games_per_pair: int) -> list[PairCounts]:
    names = list(TRUE)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            wins = rng.binomial(games_per_pair, expected_score(TRUE[a], TRUE[b]))
            out.append(PairCounts(a, b, wins, 0, games_per_pair - wins))
    return out


def test_expected_counts_give_the_true_ratings_exactly():
    names = list(TRUE)
    counts = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            p = expected_score(TRUE[a], TRUE[b])
            counts.append((a, b, 1000 * p, 0, 1000 * (1 - p)))
    ratings = fit_ratings(counts, anchor="random", prior_draws=0.0)
    for name, elo in TRUE.items():
        assert ratings[name].elo == pytest.approx(elo, abs=1e-6)
    assert list(ratings) == ["c", "b", "a", "random"]  # best first


def test_intervals_cover_the_true_ratings_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    errors = {name: [] for name in ("a", "b", "c")}
    halves = {name: [] for name in ("a", "b", "c")}
    covered = 0
    for _ in range(200):
        ratings = fit_ratings(round_robin(rng, 60), anchor="random")
        for name in errors:
            r = ratings[name]
            covered += r.lo <= TRUE[name] <= r.hi
            errors[name].append(r.elo - TRUE[name])
            halves[name].append((r.hi - r.lo) / 2)
    coverage = covered / 600
    assert 0.92 <= coverage <= 0.98, coverage
    for name in errors:
        half = np.mean(halves[name])
        # The spread of the estimates is what the Fisher interval claims...
        assert 0.8 < np.std(errors[name]) / (half / 1.96) < 1.2
        # ...and the weak prior's pull towards the pool is small beside it.
        assert abs(np.mean(errors[name])) < 0.2 * half


def test_one_round_robin_recovers_every_rating_within_its_interval():
    ratings = fit_ratings(round_robin(np.random.default_rng(7), 400), anchor="random")
    for name, elo in TRUE.items():
        assert ratings[name].lo <= elo <= ratings[name].hi
        assert ratings[name].games == 3 * 400
    width = ratings["b"].hi - ratings["b"].lo
    assert 40 < width < 120  # ~1200 games: intervals of tens of Elo, not hundreds


def test_anchor_shifts_every_rating_and_has_a_point_interval():
    counts = round_robin(np.random.default_rng(1), 50)
    base = fit_ratings(counts, anchor="random")
    shifted = fit_ratings(counts, anchor="random", anchor_elo=1000.0)
    for name in TRUE:
        assert shifted[name].elo == pytest.approx(base[name].elo + 1000.0)
    assert shifted["random"].elo == shifted["random"].lo == shifted["random"].hi == 1000.0
    # Another anchor: the same differences, the anchor's interval now a point.
    other = fit_ratings(counts, anchor="b", anchor_elo=0.0)
    assert other["b"].lo == other["b"].hi == 0.0
    for name in TRUE:
        assert other[name].elo - other["a"].elo == pytest.approx(base[name].elo - base["a"].elo)
    assert other["random"].hi - other["random"].lo > 0


def test_a_perfect_record_gets_a_finite_rating():
    ratings = fit_ratings([("net", "random", 100, 0, 0)], anchor="random")
    net = ratings["net"]
    assert math.isfinite(net.elo) and math.isfinite(net.lo) and math.isfinite(net.hi)
    assert 700 < net.elo < 1100 and net.lo > 300
    # All losses: the mirror image.
    losing = fit_ratings([("net", "random", 0, 0, 100)], anchor="random")["net"]
    assert losing.elo == pytest.approx(-net.elo)


def test_single_games_and_counts_agree_and_draws_count_half():
    games = [("a", "b", 1)] * 7 + [("a", "b", 0.5)] * 2 + [("a", "b", 0)] * 3
    counted = fit_ratings([("a", "b", 7, 2, 3)], anchor="b")
    single = fit_ratings(games, anchor="b")
    assert single["a"].elo == pytest.approx(counted["a"].elo)
    assert single["a"].games == 12
    # 8 points of 12, plus the virtual draw: 8.5 / 13.
    assert counted["a"].elo == pytest.approx(400 * math.log10(8.5 / 4.5))


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="anchor 'x' played no game"):
        fit_ratings([("a", "b", 1)], anchor="x")
    with pytest.raises(ValueError, match="2 separate pools"):
        fit_ratings([("a", "b", 1), ("c", "d", 0)], anchor="a")
    with pytest.raises(ValueError, match="1, 0.5 or 0"):
        pair_counts([("a", "b", 2)])
    with pytest.raises(ValueError, match="cannot play itself"):
        pair_counts([("a", "a", 1)])
    with pytest.raises(ValueError, match="expected"):
        pair_counts([("a", "b")])


def test_table_and_plot(tmp_path):
    ratings = fit_ratings(round_robin(np.random.default_rng(2), 30), anchor="random")
    table = ratings_table(ratings).splitlines()
    assert table[0].split()[:3] == ["rank", "agent", "Elo"]
    assert [line.split()[1] for line in table[1:]] == list(ratings)
    path = plot_ratings(ratings, tmp_path / "elo.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name != "elo.png"]  # no temporary left
