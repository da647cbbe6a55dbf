"""Scoring for the GTP engine (:mod:`eval.engine`): dead stones and the final count.

``final_status`` judges each chain alive or dead from the network's ownership, as
KataGo's engine does (:func:`dead_chains`), and ``final_score`` removes the dead chains
before counting by the rule preset (Tromp-Taylor area, or under ``japanese`` territory
and prisoners with no points in seki, the removed stones the opponent's prisoners), so
that the two agree. :class:`_Scoring` holds those methods, which
``eval.engine.Engine`` inherits; apart from the engine's game (setup, moves, search)
because they only read the position at the end.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from eval._engine_error import EngineError
from eval.players import Analysis, _live
from gojax import BLACK, WHITE, GoState, score
from gojax.games import result_string

# KataGo's engine (final_status_list, final_score) calls a chain alive when its
# stones' mean ownership for their own colour is above 0.2 and none is below -0.6.
ALIVE_MEAN_OWNERSHIP = 0.2
ALIVE_WORST_OWNERSHIP = -0.6


def dead_chains(board: np.ndarray, chain: np.ndarray, ownership: np.ndarray) -> np.ndarray:
    """``[P]`` bool: the stones of the chains the ownership calls dead.

    Args:
      board: ``[P]`` stones (+1 black, -1 white, 0 empty).
      chain: ``[P]`` each stone's chain label (``GoState.chain``).
      ownership: ``[P]`` in [-1, 1], +1 owned by Black.

    A chain lives when the mean of its stones' ownership for their own colour
    is above :data:`ALIVE_MEAN_OWNERSHIP` and its worst stone's above
    :data:`ALIVE_WORST_OWNERSHIP`; whole chains live or die together.
    """
    board = np.asarray(board)
    stones = np.flatnonzero(board)
    if not len(stones):
        return np.zeros(board.shape, bool)
    own = np.asarray(ownership, np.float64)[stones] * board[stones]
    _, label = np.unique(np.asarray(chain)[stones], return_inverse=True)
    count = np.bincount(label)
    mean = np.bincount(label, weights=own) / count
    worst = np.full(len(count), np.inf)
    np.minimum.at(worst, label, own)
    alive = (mean > ALIVE_MEAN_OWNERSHIP) & (worst > ALIVE_WORST_OWNERSHIP)
    dead = np.zeros(board.shape, bool)
    dead[stones] = ~alive[label]
    return dead


class _Scoring:
    """The scoring side of :class:`eval.engine.Engine`: its margin, dead stones and the
    GTP commands ``final_score`` and ``final_status_list``.

    A mixin: it reads what the engine holds (``state``, ``rules``, ``player``,
    ``to_play``, ``_new_state``).
    """

    def margin(self, dead: np.ndarray | None = None) -> float:
        """Black's margin by the rules' count (:func:`gojax.score`), handicap bonus in komi.

        ``dead``: ``[P]`` bool, stones removed first (the opponent's prisoners).
        """
        state = self.state if dead is None or not np.any(dead) else self._without(dead)
        return float(score(state))

    def _without(self, dead: np.ndarray) -> GoState:
        """The position with the ``dead`` stones taken off as the opponent's prisoners."""
        board = np.asarray(self.state.board)
        captured = [np.sum(dead & (board == WHITE)), np.sum(dead & (board == BLACK))]
        state = self._new_state(np.where(dead, 0, board).astype(np.int8), self.to_play)
        captures = np.asarray(self.state.captures, np.int64) + captured  # [by Black, by White]
        return state.replace(captures=jnp.asarray(captures, state.captures.dtype))

    def dead_stones(
        self, *, game_over: bool | None = None, ownership: np.ndarray | None = None
    ) -> np.ndarray:
        """``[P]`` bool: the stones ``final_score`` removes and ``final_status`` calls dead.

        None of them when the position counts as it stands (see the module's
        docstring); ``game_over`` (default: whether the game has ended) decides
        that under ``tromp-taylor`` rules. Otherwise :func:`dead_chains` of
        ``ownership`` (``[P]``, Black's view) or, if None, of one network
        evaluation of the position.
        """
        board = np.asarray(self.state.board)
        over = bool(self.state.terminated) if game_over is None else game_over
        as_it_stands = self.rules == "tromp-taylor" and over
        if as_it_stands or not self.player.has_ownership or not np.any(board):
            return np.zeros(board.shape, bool)
        if ownership is None:
            ownership = self.evaluate().ownership * self.to_play  # Black's view
        return dead_chains(board, np.asarray(self.state.chain), ownership)

    def evaluate(self) -> Analysis:
        """The player's own evaluation of the position (no search), from the view of the
        player to move; a finished game is evaluated as if it went on."""
        return self.player.evaluate(_live(self.state))

    def final_score(self) -> str:
        """GTP ``final_score``: ``B+3.5``, ``W+0.5`` or ``0``, dead stones removed."""
        return result_string(self.margin(self.dead_stones()))

    def final_status(self, status: str) -> list[int]:
        """Points of the stones with ``status`` (``alive``, ``dead``, ``seki``).

        Dead as :meth:`dead_stones` judges them; seki is not told apart from
        life (that list is always empty, the stones in seki ``alive``).
        """
        if status not in ("alive", "dead", "seki"):
            raise EngineError("syntax error")
        board = np.asarray(self.state.board)
        if status == "seki":
            return []
        dead = self.dead_stones()
        chosen = dead if status == "dead" else (board != 0) & ~dead
        return [int(p) for p in np.flatnonzero(chosen)]
