"""The rule presets as GTP controllers name them: KGS's rule names and KataGo's JSON
rules (``kata-get-rules``, ``kata-set-rules``, the analysis protocol's ``rules``
objects). Apart from the engine (:mod:`eval.engine`) because they are names only: the
GTP front end and the analysis query parser read them with no game.
"""

from __future__ import annotations

from eval._engine_error import EngineError
from gojax import RULE_PRESETS

RULES_FOR_KGS = {
    "chinese": "chinese-ogs",
    "aga": "aga",
    "new_zealand": "new-zealand",
    "japanese": "japanese",
}


def rules_json(name: str) -> dict:
    """``kata-get-rules``: a preset in KataGo's JSON form."""
    rules = RULE_PRESETS[name]
    bonus = {"none": "0", "n": "N", "n-1": "N-1"}[rules.handicap_bonus]
    return {
        "hasButton": False,
        "ko": rules.ko.upper(),
        "scoring": rules.scoring.upper(),
        "suicide": rules.multi_stone_suicide,
        "tax": "SEKI" if rules.territory else "NONE",
        "whiteHandicapBonus": bonus,
    }


def rules_from_json(fields: dict) -> str:
    """The preset matching KataGo's JSON rules; raises EngineError where none does."""
    wanted = rules_json("tromp-taylor") | {
        "ko": None,
        "suicide": None,
        "whiteHandicapBonus": None,
    }
    for key, value in fields.items():
        wanted[key] = str(value).upper() if isinstance(value, str) else value
    for name in RULE_PRESETS:
        candidate = rules_json(name)
        if all(wanted[k] is None or wanted[k] == candidate[k] for k in candidate):
            if set(wanted) == set(candidate):
                return name
    raise EngineError("rules not supported")
