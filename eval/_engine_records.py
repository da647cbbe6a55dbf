"""Game records for the GTP engine (:mod:`eval.engine`): its moves, SGF out and in.

:class:`Move` is one move of the game the engine keeps (for ``undo`` and ``printsgf``);
:class:`_Records` holds ``to_record``/``to_sgf`` (``printsgf``: the setup, then the
moves) and ``load_record`` (``loadsgf``: size, komi, rules and the position before a
given move), which ``eval.engine.Engine`` inherits. :data:`MOVES_PER_POINT` bounds the
game the engine keeps, the longest record it loads. Apart from the engine's play
(setup, moves, search, time) because it is the game's conversion to and from SGF.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from eval._engine_error import EngineError
from gojax import BLACK, EMPTY, WHITE, SetupError, place_stones, sgf
from gojax.games import MAX_SIZE, MIN_SIZE, rules_of_record

# Moves a game keeps in its superko history, per point of the board (Engine.max_moves).
MOVES_PER_POINT = 4


def _colour(player: int) -> str:
    return "B" if player == BLACK else "W"


@dataclasses.dataclass
class Move:
    """A move of the game record: ``colour`` +1/-1, ``action`` (pass = size*size)."""

    colour: int
    action: int


class _Records:
    """The record side of :class:`eval.engine.Engine`: the game as an SGF record, and a
    record loaded as the game.

    A mixin: it reads and sets what the engine holds (``size``, ``komi``, ``rules``,
    ``handicap``, ``setup``, ``first_player``, ``moves``, ``player``, ``_low_winrate``)
    and replays a loaded game with its ``_replay``.
    """

    def to_record(self) -> sgf.GameRecord:
        """The game so far as an SGF record (root setup, then the moves)."""
        setup_black = [int(p) for p in np.flatnonzero(self.setup == BLACK)]
        setup_white = [int(p) for p in np.flatnonzero(self.setup == WHITE)]
        nodes = [sgf.Node(color=_colour(m.colour), action=m.action) for m in self.moves]
        first = _colour(self.first_player)
        return sgf.GameRecord(
            size=self.size,
            komi=self.komi,
            rules=self.rules,
            handicap=self.handicap,
            setup_black=setup_black,
            setup_white=setup_white,
            # PL only where it is not what a reader would assume.
            to_play=first if (first == "W") != (self.handicap > 1) else None,
            player_black=None,
            player_white=None,
            extra={"AP": ["gojax"]},
            nodes=nodes,
        )

    def to_sgf(self) -> str:
        return sgf.dumps(self.to_record())

    def load_record(self, record: sgf.GameRecord, move_number: int | None = None) -> None:
        """GTP ``loadsgf``: size, komi, rules (``RU[]``) and the position before move
        ``move_number`` (1-based; all moves when ``None``). Later setup nodes
        (``AB``/``AW``/``AE`` after the root) are not supported, nor a game longer
        than :attr:`max_moves` for the size (its superko history would not fit)."""
        if not MIN_SIZE <= record.size <= MAX_SIZE:
            raise EngineError("unacceptable size")
        if any(n.add_black or n.add_white or n.add_empty for n in record.nodes):
            raise EngineError("setup stones after the first node are not supported")
        rules = rules_of_record(record, default=self.rules)
        stones = [(BLACK, p) for p in record.setup_black] + [(WHITE, p) for p in record.setup_white]
        try:
            board = place_stones(record.size, stones + [(EMPTY, p) for p in record.setup_empty])
        except SetupError as err:
            raise EngineError(f"illegal setup stones: {err}") from None
        first = BLACK
        if record.to_play in ("B", "W"):
            first = BLACK if record.to_play == "B" else WHITE
        elif record.setup_black and not record.setup_white and record.handicap > 1:
            first = WHITE
        handicap = record.handicap if record.handicap > 1 and not record.setup_white else 0
        moves = [Move(BLACK if c == "B" else WHITE, int(a)) for c, a in record.moves]
        if move_number is not None:
            moves = moves[: max(move_number - 1, 0)]
        limit = MOVES_PER_POINT * record.size * record.size  # max_moves of that size
        if len(moves) > limit:
            raise EngineError(
                f"{len(moves)} moves, more than the {limit} ({MOVES_PER_POINT} x "
                f"{record.size} x {record.size}) whose superko history the engine keeps"
            )
        saved = (self.size, self.komi, self.rules)
        self.size, self.komi, self.rules = record.size, float(record.komi), rules
        try:
            self._replay(board, first, handicap, moves)
        except EngineError:
            self.size, self.komi, self.rules = saved
            raise EngineError("illegal move in the file") from None
        self._low_winrate = {BLACK: 0, WHITE: 0}
        self.player.new_game()
