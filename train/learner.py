"""The learner: losses, optimisers, a sharded ``jax.jit`` train step, multi-host setup.

One code path for every machine: a ``jax.sharding.Mesh`` with a single
``"data"`` axis over all devices (1 CPU, 8 fake CPU devices, local processes,
a GPU, a TPU slice). The batch is split over ``"data"``; parameters (and the
optimiser state that mirrors them) are either replicated or, with
``param_sharding="fsdp"``, split along their largest axis over the same
devices. XLA inserts the collectives: the step is written as if for one
device, on the global batch::

    mesh = make_mesh(config)
    state = create_train_state(spec, config, key, size=9, mesh=mesh)
    step = make_train_step(spec, build(spec), config, mesh)
    state, metrics = step(state, shard_batch(batch, mesh))
    check_finite(metrics, step=int(state.step))

Batch format (a dict of arrays, leading axis ``B`` = global batch size):

* ``inputs``: the encoder's tuple (``train.model.encode``);
* ``policy [B, A]`` target distribution (search visits), ``policy_mask [B]``;
* ``value [B]``: outcome ``z`` in {-1, 0, 1} for the side to move, ``value_mask [B]``;
* optional ``score [B]`` (final score lead, points, side to move; masked by
  ``value_mask``) and ``ownership [B, P]`` in [-1, 1] for the side to move with
  ``ownership_mask [B]``. Optional targets are used only by KataGo nets;
* optional ``opponent_policy [B, A]`` (the policy target of the position after
  this one, the opponent's turn) and ``opponent_policy_mask [B]``, for nets with
  an opponent-reply output;
* optional ``td_value [B, 3]`` (expected win minus loss, horizons long, mid,
  short; masked by ``value_mask``) and ``td_score [B, 3]`` (points; masked by
  ``ownership_mask``), for nets with short-term heads
  (``ModelSpec.short_term_heads``; ``train.selfplay.td_targets``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from train.model import ModelSpec, forward, init_variables, win_loss

DATA_AXIS = "data"
OPTIMIZERS = ("sgd", "adamw")
VALUE_LOSSES = ("auto", "mse", "cross_entropy")
PARAM_SHARDINGS = ("replicated", "fsdp")
# Points: the smallest standard deviation of the final score the loss believes in
# (scores move in steps of a point; below it the likelihood would reward overconfidence).
SCORE_STDEV_FLOOR = 0.5
# KataGo's short-term optimistic policy learns from a move when the short-term value or
# score beat the prediction by about this many predicted standard deviations.
OPTIMISM_STDEVS = 1.5

Batch = dict[str, Any]
Metrics = dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """Hyperparameters of the learner. Defaults follow AlphaGo Zero (Silver et al. 2017).

    Loss weights (the total is their weighted sum):
      policy_weight: policy cross-entropy against the search distribution.
      value_weight: value loss against the outcome ``z``.
      value_loss: ``"mse"`` ``(v - z)^2`` (AlphaGo Zero), ``"cross_entropy"``
        of KataGo's win/loss/noResult logits against ``((1+z)/2, (1-z)/2, 0)``
        (a draw is half a win), or ``"auto"``: cross-entropy when the net has
        value logits, MSE otherwise.
      score_weight: Huber loss of the predicted score lead (points) against the
        final lead; ``score_huber_delta`` in points. KataGo nets only.
      score_stdev_weight: Gaussian negative log-likelihood of the final lead
        under the predicted lead (held fixed) and the predicted standard
        deviation ``sigma`` (KataGo's ``scoreStdev``; floored at
        ``SCORE_STDEV_FLOOR`` points in the loss): ``log sigma + (s - mu)^2 /
        (2 sigma^2)``, which ``sigma`` minimises at the spread of the final score
        about the prediction. KataGo nets only; 0 leaves ``scoreStdev`` untrained.
      ownership_weight: per-point binary cross-entropy of ``(1+o)/2`` against
        ``(1+o_target)/2``, averaged over points. KataGo nets only.
      opponent_policy_weight: cross-entropy of the opponent-reply output against
        the next position's policy target (KataGo: 0.15). Nets built with
        ``ModelSpec.opponent_policy`` only.

    Short-term heads (nets built with ``ModelSpec.short_term_heads``; defaults are
    KataGo's coefficients divided by its value loss's 1.2, to sit beside
    ``value_weight`` 1):
      td_value_weight: per horizon, cross-entropy of the temporal-difference
        value logits against ``((1+v)/2, (1-v)/2, 0)`` less that target's entropy.
      td_score_weight: per horizon, Huber loss (12 points) of the predicted
        temporal-difference score.
      shortterm_value_error_weight: Huber loss (0.4) of the predicted short-term
        value error against the squared error of the short-horizon value
        prediction (held fixed) against its target.
      shortterm_score_error_weight: the same for the score (Huber 100 points^2).
      optimistic_policy_weight: policy cross-entropy of the optimistic policy,
        each position weighted by ``min(1, s(e_v) + s(e_s))``,
        ``s(e) = sigmoid(3 (e - 1.5))``, ``e_v`` and ``e_s`` how many predicted
        standard deviations the short-term value and score targets beat the
        predictions by (KataGo's short-term optimistic policy); finished games
        with a score only.
      l2: coefficient ``c`` of ``c * sum(w^2)`` over kernels (AlphaGo Zero's
        1e-4), part of the loss; BN scales and biases are not decayed.

    Optimiser:
      optimizer: ``"sgd"`` (momentum, AlphaGo Zero's step schedule) or
        ``"adamw"`` (linear warmup to ``learning_rate`` then cosine decay to
        ``learning_rate * end_lr_factor`` at ``total_steps``).
      lr_drops, lr_drop_factor: AdamW's annealing steps: the rate is multiplied
        by ``lr_drop_factor`` from each step of ``lr_drops`` on (a run that has
        stopped improving at one rate; AlphaGo Zero's drops, on AdamW).
      lr_boundaries, lr_values: SGD's schedule: ``lr_values[i]`` from step
        ``lr_boundaries[i-1]`` on (one more value than boundaries).
      momentum: SGD momentum.
      weight_decay: decoupled weight decay on kernels (SGD and AdamW).
      grad_clip_norm: clip gradients to this global norm; 0 disables.

    Scale:
      batch_size: global batch size (divisible by the number of devices).
      num_devices: devices on the ``"data"`` axis; 0 = all of ``jax.devices()``.
      param_sharding: ``"replicated"`` or ``"fsdp"`` (each parameter and
        optimiser-state leaf of at least ``fsdp_min_size`` elements split along
        its largest axis divisible by the device count).
    """

    policy_weight: float = 1.0
    value_weight: float = 1.0
    value_loss: str = "auto"
    score_weight: float = 0.02
    score_huber_delta: float = 10.0
    score_stdev_weight: float = 0.0
    ownership_weight: float = 1.0
    opponent_policy_weight: float = 0.15
    td_value_weight: float = 0.6
    td_score_weight: float = 0.0004 / 1.2
    shortterm_value_error_weight: float = 2.0 / 1.2
    shortterm_score_error_weight: float = 0.00002 / 1.2
    optimistic_policy_weight: float = 0.2
    l2: float = 1e-4

    optimizer: str = "sgd"
    lr_boundaries: tuple[int, ...] = (400_000, 600_000)
    lr_values: tuple[float, ...] = (1e-2, 1e-3, 1e-4)
    momentum: float = 0.9
    learning_rate: float = 1e-3
    warmup_steps: int = 1_000
    total_steps: int = 700_000
    end_lr_factor: float = 0.01
    lr_drops: tuple[int, ...] = ()
    lr_drop_factor: float = 0.3
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0

    batch_size: int = 256
    num_devices: int = 0
    param_sharding: str = "replicated"
    fsdp_min_size: int = 2**14

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, not {self.optimizer!r}")
        if self.value_loss not in VALUE_LOSSES:
            raise ValueError(f"value_loss must be one of {VALUE_LOSSES}, not {self.value_loss!r}")
        if self.param_sharding not in PARAM_SHARDINGS:
            raise ValueError(
                f"param_sharding must be one of {PARAM_SHARDINGS}, not {self.param_sharding!r}"
            )
        weights = (
            "policy_weight",
            "value_weight",
            "score_weight",
            "score_stdev_weight",
            "ownership_weight",
        )
        short_term = (
            "td_value_weight",
            "td_score_weight",
            "shortterm_value_error_weight",
            "shortterm_score_error_weight",
            "optimistic_policy_weight",
        )
        for name in (*weights, "opponent_policy_weight", *short_term, "l2"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        if len(self.lr_values) != len(self.lr_boundaries) + 1:
            raise ValueError("lr_values needs exactly one more entry than lr_boundaries")
        object.__setattr__(self, "lr_boundaries", tuple(int(b) for b in self.lr_boundaries))
        object.__setattr__(self, "lr_values", tuple(float(v) for v in self.lr_values))
        object.__setattr__(self, "lr_drops", tuple(int(s) for s in self.lr_drops))
        if list(self.lr_drops) != sorted(set(self.lr_drops)) or any(s < 0 for s in self.lr_drops):
            raise ValueError(f"lr_drops must be increasing steps >= 0, not {self.lr_drops}")
        if not 0 < self.lr_drop_factor <= 1:
            raise ValueError(f"lr_drop_factor must be in (0, 1], not {self.lr_drop_factor}")


class TrainState(flax.struct.PyTreeNode):
    """Everything a step changes; a pytree (checkpointed whole)."""

    step: jax.Array  # [] int32, optimiser steps taken
    params: Any  # flax "params" collection, float32
    batch_stats: Any  # flax "batch_stats" collection (BN running means/variances)
    opt_state: Any  # optax state of ``make_optimizer(config)``
    rng: jax.Array  # [2] uint32, a raw PRNG key; per-step keys are fold_in(rng, step)


# ----------------------------------------------------------------------------
# Optimiser.


def learning_rate_schedule(config: LearnerConfig) -> optax.Schedule:
    """Learning rate as a function of the step (see ``LearnerConfig``)."""
    if config.optimizer == "adamw":
        cosine = optax.warmup_cosine_decay_schedule(
            init_value=0.0,
            peak_value=config.learning_rate,
            warmup_steps=config.warmup_steps,
            decay_steps=max(config.total_steps, config.warmup_steps + 1),
            end_value=config.learning_rate * config.end_lr_factor,
        )
        if not config.lr_drops:
            return cosine
        drops = jnp.asarray(config.lr_drops, jnp.int32)

        def annealed(step: jax.Array) -> jax.Array:
            passed = jnp.searchsorted(drops, step, side="right")
            return cosine(step) * jnp.float32(config.lr_drop_factor) ** passed

        return annealed
    boundaries = jnp.asarray(config.lr_boundaries, jnp.int32)
    values = jnp.asarray(config.lr_values, jnp.float32)

    def schedule(step: jax.Array) -> jax.Array:
        return values[jnp.searchsorted(boundaries, step, side="right")]

    return schedule


def _kernel_mask(params: Any) -> Any:
    """True on weight matrices and conv kernels (ndim >= 2), False on biases and BN."""
    return jax.tree.map(lambda p: p.ndim >= 2, params)


def make_optimizer(config: LearnerConfig) -> optax.GradientTransformation:
    """Clip, decay, then SGD with momentum or AdamW, on ``learning_rate_schedule``."""
    schedule = learning_rate_schedule(config)
    parts = []
    if config.grad_clip_norm > 0:
        parts.append(optax.clip_by_global_norm(config.grad_clip_norm))
    if config.optimizer == "sgd":
        if config.weight_decay > 0:
            parts.append(optax.add_decayed_weights(config.weight_decay, mask=_kernel_mask))
        parts.append(optax.sgd(schedule, momentum=config.momentum))
    else:
        parts.append(optax.adamw(schedule, weight_decay=config.weight_decay, mask=_kernel_mask))
    return optax.chain(*parts)


# ----------------------------------------------------------------------------
# Mesh and shardings.


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> bool:
    """Join a multi-process run when a coordinator is given; a no-op otherwise.

    Arguments default to the environment variables ``JAX_COORDINATOR_ADDRESS``
    (``host:port``), ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``. Must run
    before anything touches a JAX backend. Returns whether it initialised.
    """
    coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if not coordinator_address:
        return False
    if num_processes is None and "JAX_NUM_PROCESSES" in os.environ:
        num_processes = int(os.environ["JAX_NUM_PROCESSES"])
    if process_id is None and "JAX_PROCESS_ID" in os.environ:
        process_id = int(os.environ["JAX_PROCESS_ID"])
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
    )
    return True


def make_mesh(config: LearnerConfig) -> Mesh:
    """A 1-D mesh ``("data",)`` over the first ``config.num_devices`` global devices (0: all)."""
    devices = jax.devices()
    n = config.num_devices or len(devices)
    if n > len(devices):
        raise ValueError(f"num_devices={n} but only {len(devices)} devices exist")
    if config.batch_size % n:
        raise ValueError(f"batch_size {config.batch_size} is not divisible by {n} devices")
    return Mesh(np.asarray(devices[:n]), (DATA_AXIS,))


def _leaf_spec(shape: tuple[int, ...], config: LearnerConfig, n: int) -> PartitionSpec:
    """FSDP rule for one array: split its largest axis divisible by ``n``, if big enough."""
    if config.param_sharding == "replicated" or n == 1 or math.prod(shape) < config.fsdp_min_size:
        return PartitionSpec()
    axes = sorted(range(len(shape)), key=lambda a: -shape[a])
    for axis in axes:
        if shape[axis] % n == 0:
            spec = [None] * len(shape)
            spec[axis] = DATA_AXIS
            return PartitionSpec(*spec)
    return PartitionSpec()


def state_shardings(state: Any, config: LearnerConfig, mesh: Mesh) -> Any:
    """``NamedSharding``s for a train state (arrays or ``jax.ShapeDtypeStruct``s).

    One rule for every leaf, so that momentum and Adam moments get exactly
    their parameter's sharding; step, rng and small leaves are replicated.
    """
    n = mesh.shape[DATA_AXIS]
    return jax.tree.map(lambda x: NamedSharding(mesh, _leaf_spec(tuple(x.shape), config, n)), state)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Every batch leaf is split along its leading (batch) axis over ``"data"``."""
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def shard_batch(batch: Batch, mesh: Mesh) -> Batch:
    """Put a host batch on the mesh.

    One process: ``batch`` is the global batch. Several processes: each passes
    its own slice (``global_batch / process_count`` rows) and the result is
    the global array.
    """
    sharding = batch_sharding(mesh)
    if jax.process_count() == 1:
        return jax.device_put(batch, sharding)
    return jax.tree.map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), batch
    )


# ----------------------------------------------------------------------------
# State.


def create_train_state(
    spec: ModelSpec,
    config: LearnerConfig,
    key: jax.Array,
    size: int,
    mesh: Mesh | None = None,
) -> TrainState:
    """A fresh state for ``size x size`` boards; on ``mesh``'s shardings when given.

    ``key`` is a raw ``jax.random.PRNGKey``; it seeds the parameters and the
    state's ``rng``. With a mesh the state is built by a jit whose
    ``out_shardings`` place every leaf where the train step wants it (no copy
    of the full parameters on one device under FSDP).
    """
    tx = make_optimizer(config)
    key_init, key_state = jax.random.split(key)

    def init() -> TrainState:
        variables = init_variables(spec, key_init, size)
        return TrainState(
            step=jnp.zeros((), jnp.int32),
            params=variables["params"],
            batch_stats=variables["batch_stats"],
            opt_state=tx.init(variables["params"]),
            rng=key_state,
        )

    if mesh is None:
        return jax.jit(init)()
    shardings = state_shardings(jax.eval_shape(init), config, mesh)
    return jax.jit(init, out_shardings=shardings)()


def abstract_train_state(
    spec: ModelSpec, config: LearnerConfig, size: int, mesh: Mesh | None = None
) -> TrainState:
    """Shapes, dtypes (and shardings, with a mesh) of a state: a template for restoring."""
    shapes = jax.eval_shape(lambda: create_train_state(spec, config, jax.random.PRNGKey(0), size))
    if mesh is None:
        return shapes
    shardings = state_shardings(shapes, config, mesh)
    return jax.tree.map(
        lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, shardings
    )


# ----------------------------------------------------------------------------
# Losses and the step.


def _masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    mask = mask.astype(jnp.float32)
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def _short_term_losses(out: dict[str, Any], batch: Batch) -> Metrics:
    """The short-term heads' terms (KataGo's, see ``LearnerConfig``), unweighted."""
    if "td_value" not in batch or "td_score" not in batch:
        raise ValueError("a net with short-term heads needs td_value and td_score targets")
    value_mask, score_mask = batch["value_mask"], batch["ownership_mask"]
    td_value = batch["td_value"].astype(jnp.float32)  # [B, 3]
    td_score = batch["td_score"].astype(jnp.float32)
    terms: Metrics = {}

    target = jnp.stack([(1 + td_value) / 2, (1 - td_value) / 2, jnp.zeros_like(td_value)], -1)
    log_v = jax.nn.log_softmax(out["td_value_logits"].astype(jnp.float32), axis=-1)
    # Less the target's own entropy, so that a perfect prediction costs 0.
    excess = jnp.sum(target * (jnp.log(jnp.maximum(target, 1e-30)) - log_v), axis=-1)
    terms["td_value_loss"] = _masked_mean(excess.sum(-1), value_mask)
    huber = optax.huber_loss(out["td_score"], td_score, delta=12.0)
    terms["td_score_loss"] = _masked_mean(huber.sum(-1), score_mask)

    # The short horizon's errors, the prediction held fixed: what the error heads learn.
    value_error = jax.lax.stop_gradient(win_loss(out["td_value_logits"][:, 2])) - td_value[:, 2]
    score_error = jax.lax.stop_gradient(out["td_score"][:, 2]) - td_score[:, 2]
    terms["shortterm_value_error_loss"] = _masked_mean(
        optax.huber_loss(out["shortterm_value_error"], jnp.square(value_error) + 1e-8, delta=0.4),
        score_mask,
    )
    terms["shortterm_score_error_loss"] = _masked_mean(
        optax.huber_loss(out["shortterm_score_error"], jnp.square(score_error) + 1e-4, delta=100.0),
        score_mask,
    )

    # Moves whose short-term outcome beat the expectation by ~1.5 predicted stdevs.
    value_sigma = jnp.sqrt(jax.lax.stop_gradient(out["shortterm_value_error"]) + 1e-4)
    score_sigma = jnp.sqrt(jax.lax.stop_gradient(out["shortterm_score_error"]) + 0.25)
    surprise = jax.nn.sigmoid((-value_error / value_sigma - OPTIMISM_STDEVS) * 3.0)
    surprise += jax.nn.sigmoid((-score_error / score_sigma - OPTIMISM_STDEVS) * 3.0)
    weight = jnp.minimum(surprise, 1.0) * score_mask.astype(jnp.float32)
    log_o = jax.nn.log_softmax(out["optimistic_policy_logits"].astype(jnp.float32), axis=-1)
    cross_entropy = -jnp.sum(batch["policy"].astype(jnp.float32) * log_o, axis=-1)
    policy_mask = batch["policy_mask"]
    # Averaged over all policy rows, as KataGo's weighted sum over its batch.
    terms["optimistic_policy_loss"] = _masked_mean(weight * cross_entropy, policy_mask)
    terms["optimistic_policy_fraction"] = _masked_mean(weight, policy_mask)
    return terms


def losses(
    spec: ModelSpec, config: LearnerConfig, out: dict[str, Any], params: Any, batch: Batch
) -> tuple[jax.Array, Metrics]:
    """Total loss and every term, from ``forward``'s outputs and a batch."""
    metrics: Metrics = {}
    log_p = jax.nn.log_softmax(out["policy_logits"].astype(jnp.float32), axis=-1)
    policy_mask = batch["policy_mask"]
    target = batch["policy"].astype(jnp.float32)
    metrics["policy_loss"] = _masked_mean(-jnp.sum(target * log_p, axis=-1), policy_mask)
    # 0 * log 0 is 0: entropy of the net's own policy.
    entropy = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
    metrics["policy_entropy"] = _masked_mean(entropy, policy_mask)

    z = batch["value"].astype(jnp.float32)
    value_mask = batch["value_mask"]
    use_ce = config.value_loss == "cross_entropy" or (
        config.value_loss == "auto" and "value_logits" in out
    )
    if use_ce:
        if "value_logits" not in out:
            raise ValueError(f"value_loss='cross_entropy': {spec.preset} has no value logits")
        wld = jnp.stack([(1 + z) / 2, (1 - z) / 2, jnp.zeros_like(z)], axis=-1)
        log_v = jax.nn.log_softmax(out["value_logits"].astype(jnp.float32), axis=-1)
        metrics["value_loss"] = _masked_mean(-jnp.sum(wld * log_v, axis=-1), value_mask)
    else:
        metrics["value_loss"] = _masked_mean((out["value"] - z) ** 2, value_mask)
    decided = value_mask.astype(bool) & (z != 0)
    agree = jnp.sign(out["value"]) == jnp.sign(z)
    metrics["value_accuracy"] = _masked_mean(agree.astype(jnp.float32), decided)

    total = config.policy_weight * metrics["policy_loss"]
    total += config.value_weight * metrics["value_loss"]
    if "score" in batch and "score_lead" in out:
        huber = optax.huber_loss(
            out["score_lead"], batch["score"].astype(jnp.float32), delta=config.score_huber_delta
        )
        metrics["score_loss"] = _masked_mean(huber, value_mask)
        total += config.score_weight * metrics["score_loss"]
    if "score" in batch and "score_stdev" in out and config.score_stdev_weight:
        # The spread about the lead as predicted: the lead learns from its own loss only.
        error = jax.lax.stop_gradient(out["score_lead"]) - batch["score"].astype(jnp.float32)
        sigma = jnp.maximum(out["score_stdev"], SCORE_STDEV_FLOOR)
        nll = jnp.log(sigma) + 0.5 * jnp.square(error / sigma)
        metrics["score_stdev_loss"] = _masked_mean(nll, value_mask)
        total += config.score_stdev_weight * metrics["score_stdev_loss"]
    if "ownership" in batch and "ownership_logits" in out:
        # tanh(r) = 2 sigmoid(2r) - 1, so (1 + o) / 2 = sigmoid(2r).
        per_point = optax.sigmoid_binary_cross_entropy(
            2.0 * out["ownership_logits"].astype(jnp.float32),
            (1.0 + batch["ownership"].astype(jnp.float32)) / 2.0,
        )
        metrics["ownership_loss"] = _masked_mean(per_point.mean(-1), batch["ownership_mask"])
        total += config.ownership_weight * metrics["ownership_loss"]
    if "opponent_policy_logits" in out:
        if "opponent_policy" not in batch:
            raise ValueError(f"{spec.preset}'s opponent-reply output: the batch has no target")
        log_q = jax.nn.log_softmax(out["opponent_policy_logits"].astype(jnp.float32), axis=-1)
        reply = batch["opponent_policy"].astype(jnp.float32)
        metrics["opponent_policy_loss"] = _masked_mean(
            -jnp.sum(reply * log_q, axis=-1), batch["opponent_policy_mask"]
        )
        total += config.opponent_policy_weight * metrics["opponent_policy_loss"]
    if "td_value_logits" in out:
        terms = _short_term_losses(out, batch)
        metrics.update(terms)
        for name in ("td_value", "td_score", "shortterm_value_error", "shortterm_score_error"):
            total += getattr(config, f"{name}_weight") * terms[f"{name}_loss"]
        total += config.optimistic_policy_weight * terms["optimistic_policy_loss"]

    kernels = [p for p in jax.tree.leaves(params) if p.ndim >= 2]
    metrics["l2_loss"] = sum(jnp.sum(jnp.square(p)) for p in kernels)
    total += config.l2 * metrics["l2_loss"]
    metrics["total_loss"] = total
    return total, metrics


def make_train_step(
    spec: ModelSpec, module: nn.Module, config: LearnerConfig, mesh: Mesh
) -> Callable[[TrainState, Batch], tuple[TrainState, Metrics]]:
    """A jitted ``step(state, batch) -> (state, metrics)`` on ``mesh``.

    ``state`` is donated (its buffers are reused for the new state; do not use
    it after the call). ``batch`` must be on ``batch_sharding(mesh)`` (see
    ``shard_batch``) and its global size divisible by the device count.
    ``metrics`` are replicated float32 scalars: every loss term,
    ``total_loss``, ``policy_entropy``, ``value_accuracy`` (sign agreement on
    decided games), ``grad_norm`` (before clipping) and ``learning_rate``.
    """
    tx = make_optimizer(config)
    schedule = learning_rate_schedule(config)

    def step(state: TrainState, batch: Batch) -> tuple[TrainState, Metrics]:
        def loss_fn(params):
            variables = {"params": params, "batch_stats": state.batch_stats}
            # train=True BN: under jit the batch mean and variance are reductions over
            # the global (sharded) batch, so with data parallelism XLA all-reduces them
            # and every device normalises with the statistics of the whole batch.
            out = forward(spec, module, variables, batch["inputs"], train=True)
            total, metrics = losses(spec, config, out, params, batch)
            return total, (metrics, out["batch_stats"])

        grads, (metrics, batch_stats) = jax.grad(loss_fn, has_aux=True)(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics["grad_norm"] = optax.tree.norm(grads)
        metrics["learning_rate"] = jnp.asarray(schedule(state.step), jnp.float32)
        new_state = state.replace(
            step=state.step + 1,
            params=params,
            batch_stats=batch_stats,
            opt_state=opt_state,
        )
        return new_state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    # Shardings depend on parameter shapes, which depend on the board size (AGZ's dense
    # layers): compile once per state structure and shapes.
    cache: dict[Any, Callable] = {}
    replicated = NamedSharding(mesh, PartitionSpec())

    def compiled_for(state: TrainState) -> Callable:
        key = jax.tree.structure(state), tuple(x.shape for x in jax.tree.leaves(state))
        if key not in cache:
            shardings = state_shardings(state, config, mesh)
            cache[key] = jax.jit(
                step,
                in_shardings=(shardings, batch_sharding(mesh)),
                out_shardings=(shardings, replicated),
                donate_argnums=0,
            )
        return cache[key]

    def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, Metrics]:
        return compiled_for(state)(state, batch)

    return train_step


# ----------------------------------------------------------------------------
# Failing loudly.


def check_finite(metrics: Metrics, step: int | None = None) -> None:
    """Raise ``FloatingPointError`` if any metric is NaN or infinite (fetches to host).

    ``metrics`` holds scalars of one step, or ``[n]`` arrays of the ``n`` steps that
    ended at ``step`` (the training loops stack an iteration's metrics): the error
    names the first step with a non-finite value, and each such metric's value there.
    """
    values = {k: np.asarray(v, np.float64).reshape(-1) for k, v in jax.device_get(metrics).items()}
    bad_rows = [np.flatnonzero(~np.isfinite(v)) for v in values.values()]
    first = min((int(rows[0]) for rows in bad_rows if rows.size), default=None)
    if first is None:
        return
    n = max(v.size for v in values.values())
    names = ", ".join(
        f"{k}={v[first]}"
        for k, v in sorted(values.items())
        if v.size > first and not np.isfinite(v[first])
    )
    where = f" at step {step - (n - 1 - first)}" if step is not None else ""
    raise FloatingPointError(f"training stopped: non-finite {names}{where}")


@jax.jit
def _leaves_finite(leaves: list[jax.Array]) -> jax.Array:
    """``[len(leaves)]`` bool: whether each leaf holds only finite values."""
    return jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])


def first_non_finite(tree: Any) -> str | None:
    """The path of the first leaf of ``tree`` (params, optimiser state, ...) holding a NaN
    or an infinity, or None when every value is finite. One program reduces every leaf:
    on several processes each eager reduction would be a collective of its own, and
    dispatched one after another they deadlocked a 2-process run."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    floats = [(path, x) for path, x in leaves if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
    if not floats:
        return None
    finite = jax.device_get(_leaves_finite([x for _, x in floats]))
    for (path, _), ok in zip(floats, finite, strict=True):
        if not ok:
            return jax.tree_util.keystr(path)
    return None
