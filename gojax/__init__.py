"""gojax: Go in JAX -- exact, batched rules, and the features, networks and search
built on them.

The package's own names are the rules: positions (``GoState``), moves, legality and
scoring under the rule presets, coordinates, board symmetries, setup stones, replays,
and the input planes of AlphaGo Zero and AlphaGo. The board functions are written for
one board; batch them with ``jax.vmap``:

>>> import jax, gojax
>>> state = gojax.new_game(9, rules="chinese", komi=7.0)
>>> state = gojax.play(state, gojax.gtp_to_action("E5", 9))
>>> bool(gojax.legal_moves(state)[40])  # E5 is now occupied
False

The rest are modules, imported by name:

* ``gojax.katago_features``, ``gojax.katago_outputs``: KataGo's input features and the
  post-processing of its nets' outputs;
* ``gojax.nn``: the Flax networks (KataGo's, AlphaGo Zero's, AlphaGo's) and their
  presets; ``gojax.katago_model`` reads and writes KataGo model files;
  ``gojax.winograd``: the CPU's 3x3 convolutions;
* ``gojax.evaluate``: batched evaluation of positions by a net (features, symmetries,
  post-processing);
* ``gojax.search``: batched tree search (PUCT, KataGo's PUCT, Gumbel MuZero, UCB1) on
  ``mctx`` trees, with tree reuse, virtual loss and KataGo's score utility;
  ``gojax.uct``: classical UCT with random rollouts, ``gojax.rollout_policy``: AlphaGo's
  fast rollout policy;
* ``gojax.games``: what games are played and recorded with; ``gojax.sgf``: SGF records;
  ``gojax.render``: text and SVG boards;
* ``gojax.verify``: checks of the rules and of a net against KataGo's records;
  ``gojax.atomic``: atomic file writes.

The code lives in private (``_``-prefixed) modules behind these. Training (``train``)
and evaluation (``eval``, the ``gojax`` command line) sit above this package and import
from it, never the other way round.
"""

from gojax._xla_flags import prefer_eigen_convolutions

prefer_eigen_convolutions()  # before JAX starts its CPU backend; see gojax/_xla_flags.py

from gojax._alphago_features import ALPHAGO_PLANES, ALPHAGO_POLICY_PLANES, alphago_planes
from gojax._board import (
    BLACK,
    EMPTY,
    WHITE,
    GoState,
    legal_moves,
    new_game,
    play,
    position_hash,
    repetition_bans,
    set_board,
)
from gojax._coords import (
    action_to_gtp,
    action_to_sgf,
    gtp_to_action,
    pass_action,
    sgf_to_action,
)
from gojax._counting import area, score, winner
from gojax._features import AGZ_PLANES, agz_planes
from gojax._replay import replay
from gojax._rules import RULE_PRESETS, RUNTIME_RULES, Rules, get_rules
from gojax._setup import SetupError, handicap_points, place_stones
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
    "RUNTIME_RULES",
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
