"""Ko and superko bans as a separate view (KataGo's input plane 6)."""

import jax
import numpy as np
import pytest

import gojax

KO_SHAPE = np.array(
    [
        [0, 1, -1, 0],
        [1, -1, 0, -1],
        [0, 1, -1, 0],
        [0, 0, 0, 0],
    ],
    np.int8,
).reshape(-1)

play = jax.jit(gojax.play)
bans = jax.jit(gojax.repetition_bans)
legal = jax.jit(gojax.legal_moves)


def vertices(mask, size=4):
    return {gojax.action_to_gtp(int(a), size) for a in np.flatnonzero(np.asarray(mask))}


@pytest.mark.parametrize("rules", ["chinese", "tromp-taylor", "aga"])
def test_ko_point_is_the_only_repetition_ban(rules):
    state = gojax.new_game(4, rules=rules, board=KO_SHAPE)
    assert vertices(bans(state)) == set()
    state = play(state, gojax.gtp_to_action("C3", 4))  # Black takes the ko at B3
    assert vertices(bans(state)) == {"B3"}
    assert not bool(legal(state)[gojax.gtp_to_action("B3", 4)])
    # After a move elsewhere by each side, White may take back.
    state = play(state, gojax.gtp_to_action("D1", 4))
    state = play(state, gojax.gtp_to_action("A1", 4))
    assert vertices(bans(state)) == set()
    assert bool(legal(state)[gojax.gtp_to_action("B3", 4)])
