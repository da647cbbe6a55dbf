"""The GTP engine's refusal of a request (:mod:`eval.engine`).

In a module of its own because every part of the engine raises it (the game, its
scoring, its rules in KataGo's form) and the analysis protocol's query parser catches
it, none of them needing the rest of the engine.
"""


class EngineError(ValueError):
    """A request the engine refuses; the message is GTP's error text."""
