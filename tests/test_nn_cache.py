"""The network cache (``gojax._nn_cache``, ``search(..., cache=)``): positions keyed by
everything the evaluator sees, a cached search equal to the uncached one with a
deterministic evaluator, a repeated search that never calls the evaluator, and a table
whose every slot holds one position's own evaluation."""

from __future__ import annotations

import functools
import io
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from boards import fast_jit, jit_play, new_game, position
from test_search import CAPTURE, KO, stack

import gojax
from gojax._nn_cache import cached_evaluate, position_keys
from gojax.search import SearchConfig, cache_stats, new_cache, search

GAMES = (
    position(KO, to_play="B", max_moves=12),
    position(**dict(CAPTURE, max_moves=12)),
    new_game(5, komi=0.5, max_moves=12),
)


def positional_evaluator(states: gojax.GoState, key: jax.Array):
    """Priors, value, score distribution and ownership computed from the stones alone
    (the key unused): the same position always gets the same evaluation."""
    del key
    board = states.board.astype(jnp.float32)  # [B, P]
    points = jnp.arange(board.shape[1], dtype=jnp.float32)
    mover = states.to_play.astype(jnp.float32)[:, None]
    mixed = jnp.sin(board * mover * 1.7 + points * 0.37) + jnp.cos(jnp.cumsum(board, 1) * 0.9)
    logits = jnp.concatenate([mixed, jnp.full_like(mixed[:, :1], -1.0)], axis=1)
    value = jnp.tanh(jnp.sum(mixed * 0.11, axis=1))
    lead = jnp.sum(board * mover, axis=1) + 0.25 * value
    stdev = 2.0 + jnp.abs(value)
    return logits, value, lead, lead, stdev, jnp.tanh(board + 0.1 * mixed)


def recording(evaluator, calls: list):
    """``evaluator`` appending its batch size each time it actually runs."""

    def evaluate(states, key):
        jax.debug.callback(lambda n: calls.append(int(n)), states.to_play.shape[0])
        return evaluator(states, key)

    return evaluate


@functools.cache
def searcher(evaluator, config: SearchConfig):
    return fast_jit(functools.partial(search, evaluator, config=config))


def config(kind: str, **kwargs) -> SearchConfig:
    defaults = dict(kind=kind, num_simulations=24, temperature_moves=0, dirichlet_fraction=0.0)
    return SearchConfig(**(defaults | kwargs))


def assert_same_trees(a, b) -> None:
    for name in ("node_visits", "children_index", "parents", "action_from_parent"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    # Two programs may round a mean differently in its last bits (scores reach tens of
    # points, where a float32 step is 2e-6): equal to a few steps.
    for name in ("node_values", "node_scores", "children_prior_logits", "raw_ownership"):
        np.testing.assert_allclose(
            getattr(a, name), getattr(b, name), rtol=1e-6, atol=1e-6, err_msg=name
        )


@pytest.mark.parametrize(
    "kind, leaf_batch", [("puct", 1), ("katago", 1), ("katago", 4), ("gumbel", 4)]
)
def test_a_cached_search_is_the_search_and_a_repeat_never_runs_the_evaluator(kind, leaf_batch):
    states = stack(GAMES)
    cfg = config(kind, leaf_batch=leaf_batch, max_num_considered_actions=8)
    key = jax.random.key(5)
    plain = searcher(positional_evaluator, cfg)(states, key)
    assert plain.cache is None
    calls: list[int] = []
    counted = recording(positional_evaluator, calls)
    cache = new_cache(positional_evaluator, states, key, size_log2=14)
    first = searcher(counted, cfg)(states, key, cache=cache)
    assert_same_trees(plain.tree, first.tree)
    np.testing.assert_array_equal(plain.action, first.action)
    assert calls, "the first search evaluated its positions"
    stats = cache_stats(first.cache)
    assert stats["lookups"] >= 3 * 25 and 0 < stats["filled"] <= stats["lookups"]

    calls.clear()
    again = searcher(counted, cfg)(states, key, cache=first.cache)
    assert calls == []  # every position, roots included, came from the table
    assert_same_trees(first.tree, again.tree)
    repeat = cache_stats(again.cache)
    assert repeat["hits"] - stats["hits"] == repeat["lookups"] - stats["lookups"] > 0


def test_a_kept_tree_and_the_cache_together():
    """A search after a move reuses its subtree and finds the positions below it."""
    states = stack(GAMES)
    cfg = config("puct")
    key = jax.random.key(1)
    calls: list[int] = []
    counted = recording(positional_evaluator, calls)
    first = searcher(counted, cfg)(states, key, cache=new_cache(counted, states, key, 10))
    nxt = jax.jit(jax.vmap(gojax.play))(states, first.action)
    kept = jax.jit(gojax.search.reuse_subtree)(first.tree, first.action)
    plain = searcher(positional_evaluator, cfg)(nxt, key, tree=kept)
    cached = searcher(counted, cfg)(nxt, key, tree=kept, cache=first.cache)
    assert_same_trees(plain.tree, cached.tree)


def test_keys_tell_apart_everything_the_evaluator_sees():
    base = new_game(5, komi=7.5, max_moves=12)
    variants = (
        base,
        jit_play(base, jnp.int32(6)),
        new_game(5, komi=6.5, max_moves=12),
        new_game(5, komi=7.5, rules="japanese", max_moves=12),
        new_game(5, komi=7.5, max_moves=12, to_play=gojax.WHITE),
    )
    keyed = jax.jit(position_keys)
    keys = [np.asarray(keyed(stack([s])))[0] for s in variants]
    assert len({tuple(k) for k in keys}) == len(keys)
    again = np.asarray(keyed(stack([new_game(5, max_moves=12)])))[0]
    np.testing.assert_array_equal(again, keys[0])  # the same position, the same key


def test_one_slot_for_many_positions_holds_one_position_and_its_own_evaluation():
    """Three positions for one set of two slots, in one batch: the set keeps one of them
    whole (one miss writes a slot), and a later lookup of any of them gets that
    position's own evaluation; the next new position takes the other slot."""
    states = stack(GAMES)
    key = jax.random.key(0)
    cached = jax.jit(cached_evaluate, static_argnums=0)
    cache = new_cache(positional_evaluator, states, key, size_log2=1)
    out, cache = cached(positional_evaluator, cache, states, key)
    want = positional_evaluator(states, key)
    for got, expected in zip(out, want, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-6)
    assert cache_stats(cache) == {"lookups": 3, "hits": 0, "size": 2, "filled": 1}
    out, cache = cached(positional_evaluator, cache, states, key)
    stats = cache_stats(cache)
    assert stats["hits"] == 1 and stats["filled"] == 2  # the one kept, and one new
    for got, expected in zip(out, want, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-6)


def test_a_bad_size_is_refused():
    states = stack(GAMES)
    with pytest.raises(ValueError, match="size_log2 must be 1..30"):
        new_cache(positional_evaluator, states, jax.random.key(0), size_log2=31)


# ----------------------------------------------------------------------------
# The GTP engine's cache: a game reviewed forward, then backward.


def test_a_game_reviewed_backward_finds_its_positions_in_the_gtp_engines_cache():
    """``kata-search`` at each position of a short game, then again at each going back with
    ``undo``: the way back looks up only positions the way forward evaluated (KataGo's
    review speed-up), the log says so, and the search is the search without a cache."""
    import io

    from reference import reference_path

    from eval.engine import Engine
    from eval.gtp import GTPServer
    from eval.players import SearchPlayer
    from gojax.katago_model import load_model

    model = load_model(reference_path("katago", "g170-b6c96-s175395328-d26788732.bin.gz"))
    moves = ["E5", "C4", "F3", "D6", "G6"]

    def review(nn_cache: int):
        player = SearchPlayer(model, symmetry=0, visits=12, nn_cache=nn_cache)
        engine = Engine(player, size=9, komi=7.0, rules="chinese", resign_threshold=None)
        log = io.StringIO()
        server = GTPServer(engine, io.StringIO(), version="test", log=log)
        forward, backward = [], []
        server.serve(io.StringIO("boardsize 9\nclear_board\n"))
        for i, move in enumerate(moves):
            colour = "BW"[i % 2]
            server.serve(io.StringIO(f"kata-search {colour}\nplay {colour} {move}\n"))
            forward.append(player.cache_stats())
        for i in reversed(range(len(moves))):
            server.serve(io.StringIO(f"undo\nkata-search {'BW'[i % 2]}\n"))
            backward.append(player.cache_stats())
        return server, log.getvalue(), forward, backward

    server, log, forward, backward = review(nn_cache=12)
    plain_server, plain_log, plain_stats, _ = review(nn_cache=0)
    out, plain_out = server.out.getvalue(), plain_server.out.getvalue()
    assert out == plain_out  # the same answers: the cache changes no evaluation
    assert plain_stats == [None] * len(moves) and "nn cache" not in plain_log
    assert forward[-1]["hits"] < forward[-1]["lookups"]
    way_back = backward[-1]["lookups"] - forward[-1]["lookups"]
    found = backward[-1]["hits"] - forward[-1]["hits"]
    assert way_back > 0 and found >= 0.9 * way_back
    lines = [line for line in log.splitlines() if line.startswith("gojax gtp:")]
    assert len(lines) == 2 * len(moves)
    assert re.fullmatch(
        r"gojax gtp: [BW] [A-T][0-9]+, 13 visits in [0-9.]+ s \([0-9,]+ visits/s\), "
        r"nn cache [0-9]+% of [0-9,]+ lookups",
        lines[-1],
    )
    # The counters on demand, as kata-get-params writes JSON.
    for serving, reply in ((server, "="), (plain_server, "?")):
        serving.out = io.StringIO()
        serving.serve(io.StringIO("gojax-nn_cache\n"))
        assert serving.out.getvalue().startswith(reply)
    report = json.loads(server.out.getvalue()[2:])
    total = backward[-1]
    assert report == {
        "nnCacheSizePowerOfTwo": 12,
        "tables": 1,
        "entries": 2**12,
        "filled": total["filled"],
        "lookups": total["lookups"],
        "hits": total["hits"],
        "hitRate": round(total["hits"] / total["lookups"], 4),
    }
    assert "no network cache" in plain_server.out.getvalue()


def test_the_analysis_engine_answers_a_repeated_query_from_its_cache():
    """``gojax analysis``'s engine: a query asked again (KaTrain re-analysing a game) looks
    up only stored positions, and every reply is the one an engine without a cache gives."""

    from reference import reference_path

    from eval.analysis import AnalysisEngine
    from gojax.katago_model import load_model

    model = load_model(reference_path("katago", "g170-b6c96-s175395328-d26788732.bin.gz"))
    moves = [["B", "E5"], ["W", "C4"], ["B", "F3"]]
    asked = {"id": "q", "moves": moves, "rules": "chinese", "komi": 7, "boardXSize": 9}
    asked |= {"boardYSize": 9, "maxVisits": 12, "analyzeTurns": [0, 1, 2, 3]}
    line = json.dumps(asked) + "\n"

    def replies(engine) -> list[dict]:
        out = io.StringIO()
        engine.serve(io.StringIO(line), out)
        return sorted((json.loads(text) for text in out.getvalue().splitlines()), key=str)

    def options(nn_cache):
        return dict(symmetry=0, visits=12, batch_size=4, min_batch=4, nn_cache=nn_cache)

    cached = AnalysisEngine(model, **options(12))
    first = replies(cached)
    before = cached.cache_stats()
    again = replies(cached)
    after = cached.cache_stats()
    assert first == again == replies(AnalysisEngine(model, **options(0)))
    assert len(first) == 4 and all("moveInfos" in reply for reply in first)
    assert before["hits"] < before["lookups"]
    assert after["hits"] - before["hits"] == after["lookups"] - before["lookups"] > 0
