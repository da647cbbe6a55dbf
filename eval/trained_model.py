"""A network from a ``gojax train`` run, usable wherever the engine takes a KataGo model.

The GTP engine's players (``eval.players``) need what a loaded KataGo file
offers: ``name``, ``variables``, ``version`` and ``module()``.
:func:`load_trained_model` builds the same from a training workdir's
checkpoint, so that ``gojax gtp --checkpoint runs/go9_tiny`` plays our own
nets through the same search, analysis and time control:

* KataGo-architecture presets (``tiny``, ``b6c96``, ...) are trained on
  KataGo's version-8 features and evaluate exactly as a version-8 file;
* AlphaGo Zero presets (``agz_*``) evaluate with ``version="agz"`` and
  AlphaGo presets (``alphago*``) with ``version="alphago"``
  (``gojax.evaluate``): policy and value only, and only on the board size
  they were trained on (their dense heads fix it), which ``board_sizes``
  tells the engine.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp

from gojax.nn import with_winograd_kernels

__all__ = ["TrainedModel", "load_trained_model"]

# The KataGo model version whose inputs and outputs ``train/`` uses; nets with short-term
# heads (six score outputs, an optimistic policy) are read as version 12's.
KATAGO_VERSION = 8
SHORT_TERM_VERSION = 12


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedModel:
    """One checkpoint's network, shaped like ``gojax.katago_model.KataGoModel`` for players."""

    name: str
    preset: str
    variables: dict[str, Any]  # {"params", "batch_stats"} (+ "winograd" on a CPU)
    version: int | str  # KATAGO_VERSION, or gojax.evaluate.AGZ or ALPHAGO (the encoder's name)
    board_sizes: tuple[int, ...] | None  # None: any size the board supports (2..25)
    step: int
    opponent_policy: bool = False  # the net has an opponent-reply output (not used in play)
    activation: str = ""  # a KataGo net's activation if not its preset's (train.model.ModelSpec)
    short_term_heads: bool = False  # KataGo's short-term heads, optimistic policy included
    ownership_trained: bool = True  # self-play with learner.ownership_weight > 0
    moves: str = "legal"  # the move set its self-play searched (SearchConfig.moves)

    @property
    def has_ownership(self) -> bool:
        """Whether the ownership output means anything: a KataGo-architecture net whose
        run learned it (AGZ and AlphaGo nets have no such head)."""
        return isinstance(self.version, int) and self.ownership_trained

    @property
    def output_spec(self) -> int | str:
        """What ``gojax.evaluate.evaluate`` takes as ``version`` (``KataGoModel``'s name for
        it): the version itself, since a trained net stores no output multipliers."""
        return self.version

    @property
    def config(self) -> Any:
        """The net's shape (``gojax.nn.KataGoConfig`` for KataGo nets), as ``KataGoModel``'s."""
        return getattr(self.module(), "config", None)

    def module(self, dtype: Any = jnp.float32, policy_optimism: float = 0.0):
        """The flax module (a ``KataGoNet``, ``AlphaGoZeroNet`` or ``AlphaGoNet``).

        ``policy_optimism`` (``KataGoModel.module``'s) mixes in the optimistic policy of a
        net trained with short-term heads; any other net must have 0."""
        from train.model import ModelSpec, build

        if policy_optimism and not self.short_term_heads:
            raise ValueError(
                f"{self.name} has no optimistic policy (train it with "
                "model.short_term_heads): policy optimism needs that head"
            )

        spec = ModelSpec(
            self.preset,
            dtype=jnp.dtype(dtype).name,
            opponent_policy=self.opponent_policy,
            activation=self.activation,
            short_term_heads=self.short_term_heads,
        )
        module = build(spec)
        return module.clone(policy_optimism=policy_optimism) if policy_optimism else module


def load_trained_model(workdir: str | os.PathLike, step: int | None = None) -> TrainedModel:
    """The network of checkpoint ``step`` (None: the newest) of the run in ``workdir``.

    Raises ValueError naming the problem (no checkpoints, no such step, an
    unreadable checkpoint).
    """
    from train.checkpoint import restore_variables
    from train.model import build, score_mean_from_lead, spec_from_config

    run = restore_variables(workdir, step)
    # float32 whatever the run computed in: the engine picks its own dtype (module()).
    spec = dataclasses.replace(spec_from_config(run.config["model"]), dtype="float32")
    size = int(run.config["board"]["size"])
    name = f"{os.path.basename(os.path.normpath(os.fspath(workdir)))}@{run.step}"
    module = build(spec)
    variables = run.variables
    if spec.is_katago:  # read scoreMean as the trained score, as a model file holds it
        variables = {**variables, "params": score_mean_from_lead(variables["params"])}
    return TrainedModel(
        name=name,
        preset=spec.preset,
        # Device arrays (a jitted call copies numpy arguments in anew at every call) and, on
        # a CPU, the Winograd-transformed kernels the convolutions read (computed once).
        variables=with_winograd_kernels(module, jax.device_put(variables)),
        version=(SHORT_TERM_VERSION if spec.short_term_heads else KATAGO_VERSION)
        if spec.is_katago
        else spec.encoder,
        board_sizes=None if spec.is_katago else (size,),
        step=run.step,
        opponent_policy=spec.opponent_policy,
        activation=spec.activation,
        short_term_heads=spec.short_term_heads,
        ownership_trained=_learned_ownership(run.config),
        moves=str(run.config.get("selfplay", {}).get("moves", "legal")),
    )


def _learned_ownership(config: dict[str, Any]) -> bool:
    """Whether a run's config trained the ownership output: self-play (the other
    trainers have no final positions to learn it from) with a positive weight."""
    weight = float(config.get("learner", {}).get("ownership_weight", 1.0))
    return "selfplay" in config and weight > 0
