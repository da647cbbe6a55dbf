"""Rule sets, named as KataGo names them.

Every preset here scores by area (Tromp-Taylor counting) and differs only in
how repetition and suicide are treated:

============  ===========  ====================
preset        ko rule      multi-stone suicide
============  ===========  ====================
tromp-taylor  positional   legal
chinese       simple       illegal
chinese-ogs   positional   illegal
aga           situational  illegal
new-zealand   situational  legal
============  ===========  ====================

Single-stone suicide is illegal under every preset (a lone stone with no
liberty would change nothing but the move number, as in KataGo). The simple
ko point is banned under every preset; positional and situational superko
additionally ban any move that recreates an earlier position (situational:
the same position with the same player to move).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

KoRule = Literal["simple", "positional", "situational"]


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

    @property
    def superko(self) -> bool:
        """Whether repetition bans go beyond the simple ko point."""
        return self.ko != "simple"


RULE_PRESETS: dict[str, Rules] = {
    "tromp-taylor": Rules("tromp-taylor", "positional", True),
    "chinese": Rules("chinese", "simple", False, "n"),
    "chinese-ogs": Rules("chinese-ogs", "positional", False, "n"),
    "aga": Rules("aga", "situational", False, "n-1"),
    "new-zealand": Rules("new-zealand", "situational", True),
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
}


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
