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
