"""Games: the primitives training and evaluation play and record games with.

The public home of names whose code lives in private modules: the board
sizes gojax plays on, game records to and from board states
(``gojax._game``), uniformly random play (``gojax._random_play``) and the
points a sensible move never fills (``gojax._alphago_features``). The board
functions themselves (``new_game``, ``play``, ``legal_moves``, ``score``, ...)
are the ``gojax`` package's own names.

>>> from gojax import sgf
>>> from gojax.games import record_from_actions, result_string, state_at
>>> record = record_from_actions([40, 41], size=9, komi=7.0, rules="chinese",
...                              result=result_string(-7.0))
>>> int(state_at(record).move_number), record.result
(2, 'W+7')
"""

from __future__ import annotations

from gojax._alphago_features import true_eyes
from gojax._board import neighbor_table
from gojax._coords import MAX_SIZE, MIN_SIZE
from gojax._game import (
    DEFAULT_RULES,
    handicap_bonus,
    handicap_stones,
    record_from_actions,
    result_string,
    rules_of_record,
    state_at,
    state_from_moves,
)
from gojax._random_play import RandomPlayResult, play_random_games, random_action

__all__ = [
    "DEFAULT_RULES",
    "MAX_SIZE",
    "MIN_SIZE",
    "RandomPlayResult",
    "handicap_bonus",
    "handicap_stones",
    "neighbor_table",
    "play_random_games",
    "random_action",
    "record_from_actions",
    "result_string",
    "rules_of_record",
    "state_at",
    "state_from_moves",
    "true_eyes",
]
