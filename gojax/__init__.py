"""gojax: exact, batched Go rules in JAX.

The board functions are written for one board; batch them with ``jax.vmap``:

>>> import jax, gojax
>>> state = gojax.new_game(9, rules="chinese", komi=7.0)
>>> state = gojax.play(state, gojax.gtp_to_action("E5", 9))
>>> bool(gojax.legal_moves(state)[40])  # E5 is now occupied
False
"""

from gojax._xla_flags import prefer_eigen_convolutions

prefer_eigen_convolutions()  # before JAX starts its CPU backend; see gojax/_xla_flags.py

from gojax._alphago_features import ALPHAGO_PLANES, ALPHAGO_POLICY_PLANES, alphago_planes
from gojax._board import (
    BLACK,
    EMPTY,
    WHITE,
    GoState,
    area,
    handicap_points,
    legal_moves,
    new_game,
    play,
    position_hash,
    repetition_bans,
    score,
    set_board,
    winner,
)
from gojax._coords import (
    action_to_gtp,
    action_to_sgf,
    gtp_to_action,
    pass_action,
    sgf_to_action,
)
from gojax._features import AGZ_PLANES, agz_planes
from gojax._replay import replay
from gojax._rules import RULE_PRESETS, Rules, get_rules
from gojax._setup import SetupError, place_stones
from gojax._symmetry import (
    NUM_SYMMETRIES,
    inverse_symmetry,
    symmetric_point,
    transform_action,
    transform_board,
    transform_planes,
    transform_policy,
)

__all__ = [
    "AGZ_PLANES",
    "ALPHAGO_PLANES",
    "ALPHAGO_POLICY_PLANES",
    "NUM_SYMMETRIES",
    "agz_planes",
    "alphago_planes",
    "inverse_symmetry",
    "replay",
    "symmetric_point",
    "transform_action",
    "transform_board",
    "transform_planes",
    "transform_policy",
    "BLACK",
    "EMPTY",
    "RULE_PRESETS",
    "WHITE",
    "GoState",
    "Rules",
    "SetupError",
    "action_to_gtp",
    "action_to_sgf",
    "area",
    "get_rules",
    "gtp_to_action",
    "handicap_points",
    "legal_moves",
    "new_game",
    "pass_action",
    "place_stones",
    "play",
    "position_hash",
    "repetition_bans",
    "score",
    "set_board",
    "sgf_to_action",
    "winner",
]
