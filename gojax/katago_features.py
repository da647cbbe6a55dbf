"""KataGo's input features for model version 8 (input version 7): 22 spatial, 19 global.

Written for one :class:`gojax.GoState` and batched with ``jax.vmap``, like the
rules. The meaning of every plane follows KataGo's ``fillRowV7``
(``cpp/neuralnet/nninputs.cpp``); ``shared/reference/KATAGO_NOTES.md`` §3
describes each in words. Everything here is from the point of view of the
player to move ("pla"); "opp" is the other player.

Spatial planes, ``[N, N, 22]``:
  0 on board; 1/2 pla/opp stones; 3/4/5 stones whose chain has 1/2/3
  liberties; 6 ko and superko bans; 7, 8 unused here (encore); 9..13 where the
  last 5 moves were played (9 the most recent, by opp); 14 stones of chains
  that are ladder-captured now, 15/16 the same one and two moves ago; 17 for
  opp chains with two liberties that can be laddered, the liberties where
  pla's first move starts the ladder; 18/19 area that is pla's/opp's by
  KataGo's pass-alive and territory rules (area scoring only: under territory
  scoring KataGo shows them in its second encore, which is not modelled); 20,
  21 unused (encore).

Global features, ``[19]``:
  0..4 the move 1..5 turns ago was a pass; 5 komi from pla's view / 20 (under
  territory scoring plus KataGo's ``whiteBonusScore``, a point a stone placed);
  6, 7 ko rule; 8 multi-stone suicide legal; 9 territory scoring; 10, 11 tax;
  12, 13 encore; 14 a pass now would end the game; 15, 16 playout doubling
  advantage; 17 button; 18 the komi parity wave (area scoring only).

Territory rules (``japanese``) give KataGo's inputs for its main phase as its
GTP engine plays it (``preventCleanupPhase``): no encore, so planes 7, 18..21
and globals 12, 13 stay 0.

Not modelled: KataGo's encore phases, the button, handicap compensation in
komi (pass the komi you want), and the "Spight-like" pass repeat under simple
ko.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gojax._board import GoState, repetition_bans
from gojax._ladders import ladder_features_of_boards
from gojax._pass_alive import area_ownership
from gojax._territory import white_bonus

NUM_SPATIAL = 22
NUM_GLOBAL = 19
HISTORY_MOVES = 5


def _komi_parity_wave(self_komi: jax.Array, area: int) -> jax.Array:
    """Global 18: where komi sits between the integers a game on this board can end at."""
    if area % 2 == 0:
        floor = 2.0 * jnp.floor(self_komi / 2.0)
    else:
        floor = 2.0 * jnp.floor((self_komi - 1.0) / 2.0) + 1.0
    delta = jnp.clip(self_komi - floor, 0.0, 2.0)
    return jnp.where(delta < 0.5, delta, jnp.where(delta < 1.5, 1.0 - delta, delta - 2.0))


def forget_history(state: GoState, rows: jax.Array | None = None) -> GoState:
    """``state`` (batched or not) with its past moves unknown: KataGo's
    ``ignorePreRootHistory``. Its inputs show no history (no past move, and the
    current board in place of the past ones, as KataGo's with none); a position
    searched from it shows the moves played since, as KataGo's search shows a node
    the moves below its root. The rules' own record (ko, superko, passes) is kept.
    ``rows [B]`` bool: of a batch, forget only these."""
    moves = jnp.full_like(state.recent_moves, -1)
    boards = jnp.broadcast_to(state.board[..., None, :], state.past_boards.shape)
    if rows is not None:
        moves = jnp.where(rows[:, None], moves, state.recent_moves)
        boards = jnp.where(rows[:, None, None], boards, state.past_boards)
    return state.replace(recent_moves=moves, past_boards=boards)


def katago_inputs(state: GoState) -> tuple[jax.Array, jax.Array]:
    """``(spatial [N, N, 22], global [19])`` float32 inputs for the player to move."""
    size = state.size
    p = size * size
    rules = state.rule_values  # Python values, or arrays under runtime rules
    pla = state.to_play
    opp = -pla
    board = state.board
    libs = state.liberties
    stones = board != 0
    # KataGo still shows bans in a finished game (a raw evaluation after two passes).
    live = state.replace(terminated=jnp.asarray(False))

    # How many past moves the features may show. Under the area presets but
    # tromp-taylor a pass that would end the game is "friendly" and KataGo
    # hides the history (and global 14) so that the net does not see the end.
    # Only the pass that would be the second in a row is hidden: once two
    # passes have ended the game a third would not, and KataGo shows the last
    # move and global 14 again (its shouldSuppressEndGameFromFriendlyPass).
    pass_would_end = state.passes >= 1
    suppress = (state.passes == 1) & rules.friendly_pass_ok
    max_turns = jnp.where(suppress, 0, jnp.where(state.terminated, 1, HISTORY_MOVES))
    max_turns = jnp.minimum(max_turns, state.move_number)

    ago = jnp.arange(HISTORY_MOVES)  # 0 = the last move
    included = ago < max_turns
    moves = state.recent_moves[:HISTORY_MOVES].astype(jnp.int32)
    was_pass = included & (moves == p)
    placed = included & (moves >= 0) & (moves < p)
    move_planes = (jnp.arange(p)[None, :] == moves[:, None]) & placed[:, None]  # [5, P]

    turns = jnp.sum(included)
    history = state.past_boards
    previous = jnp.where(turns >= 1, history[0], board) if history.shape[0] >= 1 else board
    before_previous = (
        jnp.where(turns >= 2, history[1], previous) if history.shape[0] >= 2 else previous
    )
    # The three scans (now with the ko point, one and two moves ago without) run in one
    # loop, as long as the longest of them instead of the three one after the other.
    scanned = jnp.stack([board, previous, before_previous])
    kos = jnp.stack([state.ko.astype(jnp.int32), jnp.int32(-1), jnp.int32(-1)])
    ladders, workings = ladder_features_of_boards(scanned, kos, pla)
    laddered, laddered_1, laddered_2 = ladders
    working = workings[0]
    zeros = jnp.zeros(p, bool)
    if rules.territory is True:
        area_pla = area_opp = zeros
    else:
        # KataGo: getSuicideLegalForPassAlive = the rules' multi-stone suicide.
        area = area_ownership(board, multi_stone_suicide_legal=rules.multi_stone_suicide)
        by_area = ~jnp.asarray(rules.territory)
        area_pla, area_opp = (area == pla) & by_area, (area == opp) & by_area
    spatial = jnp.stack(
        [
            jnp.ones(p, bool),
            board == pla,
            board == opp,
            stones & (libs == 1),
            stones & (libs == 2),
            stones & (libs == 3),
            repetition_bans(live),
            zeros,
            zeros,
            *move_planes,
            laddered,
            laddered_1,
            laddered_2,
            working,
            area_pla,
            area_opp,
            zeros,
            zeros,
        ],
        axis=-1,
    ).astype(jnp.float32)

    limit = float(p + 20)
    territory = jnp.asarray(rules.territory, jnp.float32)  # 1 under territory scoring, else 0
    white_komi = state.komi + territory * white_bonus(state)
    self_komi = jnp.clip(jnp.where(pla == 1, -white_komi, white_komi), -limit, limit)
    ko_a, ko_b = rules.ko_features
    glob = jnp.zeros(NUM_GLOBAL, jnp.float32)
    glob = glob.at[0:HISTORY_MOVES].set(was_pass.astype(jnp.float32))
    glob = glob.at[5].set(self_komi / 20.0)
    glob = glob.at[6].set(ko_a).at[7].set(ko_b)
    glob = glob.at[8].set(jnp.asarray(rules.multi_stone_suicide, jnp.float32))
    glob = glob.at[9].set(territory).at[10].set(territory)  # territory scoring; seki tax (1, 0)
    glob = glob.at[14].set((pass_would_end & ~suppress).astype(jnp.float32))
    # KataGo computes the wave under area scoring (or encore 2).
    glob = glob.at[18].set(_komi_parity_wave(self_komi, p) * (1.0 - territory))
    return spatial.reshape(size, size, NUM_SPATIAL), glob
