"""Rule sets, named as KataGo names them.

The presets differ in how repetition and suicide are treated and in how the
end position is counted:

============  ===========  ====================  =========================
preset        ko rule      multi-stone suicide   scoring
============  ===========  ====================  =========================
tromp-taylor  positional   legal                 area (Tromp-Taylor)
chinese       simple       illegal               area (Tromp-Taylor)
chinese-ogs   positional   illegal               area (Tromp-Taylor)
aga           situational  illegal               area (Tromp-Taylor)
new-zealand   situational  legal                 area (Tromp-Taylor)
japanese      simple       illegal               territory, no points in seki
============  ===========  ====================  =========================

``korean`` is another name for ``japanese``, as in KataGo. Territory scoring
counts the end position as KataGo does when a game ends by two passes without
its cleanup phase (``gojax._territory``): territory and prisoners, with dead
stones removed only where the opponent's area is pass-alive, and no points for
either side in seki.

Single-stone suicide is illegal under every preset (a lone stone with no
liberty would change nothing but the move number, as in KataGo). The simple
ko point is banned under every preset; positional and situational superko
additionally ban any move that recreates an earlier position (situational:
the same position with the same player to move).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

KoRule = Literal["simple", "positional", "situational"]
Scoring = Literal["area", "territory"]


@dataclasses.dataclass(frozen=True)
class Rules:
    """A static rule set; hashable so that it can live in a pytree's treedef."""

    name: str
    ko: KoRule
    multi_stone_suicide: bool
    # Handicap stones that White is compensated for under area scoring
    # (KataGo: chinese N, aga N-1, others 0). Only reported; the score itself
    # uses ``komi`` alone.
    handicap_bonus: Literal["none", "n", "n-1"] = "none"
    # "territory" scores with KataGo's seki tax (TAX_SEKI): points in seki
    # count for nobody.
    scoring: Scoring = "area"

    @property
    def runtime(self) -> bool:
        """Whether this is :data:`RUNTIME_RULES`: each state's ``rule_code`` names its preset."""
        return self.name == _RUNTIME_NAME

    @property
    def superko(self) -> bool:
        """Whether repetition bans go beyond the simple ko point."""
        return self.ko != "simple"

    @property
    def territory(self) -> bool:
        """Whether the game is counted by territory (and prisoners) instead of area."""
        return self.scoring == "territory"

    @property
    def friendly_pass_ok(self) -> bool:
        """KataGo's ``friendlyPassOk``: a pass answering a pass need not end the game.

        True for the area presets but tromp-taylor; it decides whether KataGo's
        input features hide the history when a pass would end the game.
        """
        return not self.territory and self.name != "tromp-taylor"


RULE_PRESETS: dict[str, Rules] = {
    "tromp-taylor": Rules("tromp-taylor", "positional", True),
    "chinese": Rules("chinese", "simple", False, "n"),
    "chinese-ogs": Rules("chinese-ogs", "positional", False, "n"),
    "aga": Rules("aga", "situational", False, "n-1"),
    "new-zealand": Rules("new-zealand", "situational", True),
    "japanese": Rules("japanese", "simple", False, scoring="territory"),
}

_ALIASES = {
    "tromptaylor": "tromp-taylor",
    "tt": "tromp-taylor",
    "cn": "chinese",
    "chineseogs": "chinese-ogs",
    "chinese_ogs": "chinese-ogs",
    "nz": "new-zealand",
    "newzealand": "new-zealand",
    "new_zealand": "new-zealand",
    "korean": "japanese",
    "jp": "japanese",
}


# A rule set kept as data (``new_game(..., runtime_rules=True)``): the static stand-in
# that every such state carries, so that one compiled program plays and scores every
# preset (a client switching rules compiles nothing). It keeps a superko table, as the
# superko presets need; each state's ``rule_code`` (an index into RULE_PRESETS) says
# which preset it plays, read where the program needs it through :func:`rule_values`.
_RUNTIME_NAME = "runtime"
RUNTIME_RULES = Rules(_RUNTIME_NAME, "situational", True)
_PRESETS = tuple(RULE_PRESETS.values())


def rules_code(rules: str | Rules) -> int:
    """The ``rule_code`` of a preset kept as data (its index in ``RULE_PRESETS``)."""
    rules = get_rules(rules)
    if rules not in _PRESETS:
        raise ValueError(f"only a preset can be kept as data, not {rules}")
    return _PRESETS.index(rules)


@dataclasses.dataclass(frozen=True)
class RuleValues:
    """A state's rules as a program reads them: Python values under a static rule set
    (the program is specialised), ``[]`` arrays under :data:`RUNTIME_RULES` (the
    program reads the state's preset)."""

    superko: bool | jax.Array  # positional or situational
    situational: bool | jax.Array
    multi_stone_suicide: bool | jax.Array
    territory: bool | jax.Array
    friendly_pass_ok: bool | jax.Array
    ko_features: tuple[float | jax.Array, float | jax.Array]  # KataGo's globals 6 and 7


# KataGo's input globals 6 and 7 for each ko rule.
KO_FEATURES = {"simple": (0.0, 0.0), "positional": (1.0, 0.5), "situational": (1.0, -0.5)}


def _static_values(rules: Rules) -> RuleValues:
    return RuleValues(
        superko=rules.superko,
        situational=rules.ko == "situational",
        multi_stone_suicide=rules.multi_stone_suicide,
        territory=rules.territory,
        friendly_pass_ok=rules.friendly_pass_ok,
        ko_features=KO_FEATURES[rules.ko],
    )


_FLAG_NAMES = ("superko", "situational", "multi_stone_suicide", "territory", "friendly_pass_ok")
# Per preset (rows by code): its flags, and its two ko features.
_FLAGS = np.array([[getattr(_static_values(r), f) for f in _FLAG_NAMES] for r in _PRESETS], bool)
_KO_FEATURES = np.array([KO_FEATURES[r.ko] for r in _PRESETS], np.float32)


def rule_values(rules: Rules, code: jax.Array | None = None) -> RuleValues:
    """What a program reads of ``rules``; under :data:`RUNTIME_RULES`, of the preset
    ``code`` names (a state's ``rule_code``, ``[...]`` int: the values take its shape)."""
    if not rules.runtime:
        return _static_values(rules)
    if code is None:
        raise ValueError("a state under runtime rules carries its rule_code")
    flags = jnp.asarray(_FLAGS)[code]
    ko = jnp.asarray(_KO_FEATURES)[code]
    named = {name: flags[..., i] for i, name in enumerate(_FLAG_NAMES)}
    return RuleValues(**named, ko_features=(ko[..., 0], ko[..., 1]))


def get_rules(rules: str | Rules) -> Rules:
    """A preset by name (case-insensitive, KataGo's spellings), or ``rules`` itself.

    >>> get_rules("Chinese").ko
    'simple'
    """
    if isinstance(rules, Rules):
        return rules
    key = str(rules).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in RULE_PRESETS:
        known = ", ".join(sorted(RULE_PRESETS))
        raise ValueError(f"unknown rule set {rules!r}; known: {known}")
    return RULE_PRESETS[key]
