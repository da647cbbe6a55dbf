"""The pieces a run builds from its config: searches, self-play, the train step, batches.

``selfplay_config`` and ``learner_config`` turn a run config's groups into the
dataclasses ``train.selfplay`` and ``train.learner`` take; ``selfplay_functions``
and ``_train_step`` are the static (cached) functions self-play and the learner
compile once per process; the rest moves data between the replay, the learner and
the processes of a multi-host job. Kept apart from ``train.loop`` (which
re-exports these names) so that the other trainers and benchmarks build the same
pieces without the loop.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_collections
import numpy as np

from gojax.search import KATAGO_PUCT_RANGES, SearchConfig
from train import model as model_lib
from train.learner import LearnerConfig, make_train_step
from train.selfplay import SelfPlayConfig, agz_encode, alphago_encode


def _katago_encode(states) -> dict[str, jax.Array]:
    """KataGo features for the replay: ``spatial [B, N, N, 22]``, ``global [B, 19]`` float32."""
    spatial, global_features = model_lib.encode(model_lib.ModelSpec("tiny"), states)
    return {"global": global_features, "spatial": spatial}


@functools.cache
def _evaluator_fn(spec: model_lib.ModelSpec):
    """``variables -> Evaluator``; cached so that every call passes the same static object."""
    return functools.partial(model_lib.evaluator, spec, model_lib.build(spec))


def replay_encoder(spec: model_lib.ModelSpec) -> Callable:
    """How positions are stored for a ``spec`` net: ``[B]`` states -> its inputs
    (uint8 planes, or KataGo's features as a dict)."""
    if spec.is_katago:
        return _katago_encode
    return {"agz": agz_encode, "alphago": alphago_encode}[spec.encoder]


def selfplay_functions(spec: model_lib.ModelSpec) -> tuple[Callable, Callable]:
    """The static ``(evaluator_fn, encode_fn)`` that ``train.selfplay.play_games`` plays a
    ``spec`` net's games with, as the training loop does (the same objects every call)."""
    return _evaluator_fn(spec), replay_encoder(spec)


@functools.cache
def _train_step(spec: model_lib.ModelSpec, config: LearnerConfig, mesh):
    """One compiled train step per (spec, learner config, mesh), shared by runs in a process."""
    return make_train_step(spec, model_lib.build(spec), config, mesh)


def _search_config(s: ml_collections.ConfigDict, **play: Any) -> SearchConfig:
    """The ``selfplay`` group's search, with ``play`` overriding any of its fields
    (evaluation and gating: their own simulations, ``gumbel_scale`` and AlphaGo Zero's
    move temperature; they also drop the root's exploration,
    ``SearchConfig.without_root_exploration``)."""
    fields = dict(
        kind=s.search_kind,
        num_simulations=s.num_simulations,
        dirichlet_fraction=s.dirichlet_fraction,
        temperature_moves=s.temperature_moves,
        pb_c_init=s.pb_c_init,
        moves=s.moves,
        max_num_considered_actions=s.gumbel_considered,
        gumbel_scale=s.gumbel_scale,
        forced_playouts=s.forced_playouts,
        normalise_values=s.normalise_values,
        static_score_utility=s.static_score_utility,
        dynamic_score_utility=s.dynamic_score_utility,
        **{field: s[field] for field in KATAGO_PUCT_RANGES},
        root_policy_temperature=s.root_policy_temperature,
        root_policy_temperature_early=s.root_policy_temperature_early,
        move_temperature=s.move_temperature,
        move_temperature_early=s.move_temperature_early,
        temperature_halflife=s.temperature_halflife,
    )
    return SearchConfig(**{**fields, **play})


def selfplay_config(config: ml_collections.ConfigDict) -> SelfPlayConfig:
    """The ``SelfPlayConfig`` of a run config (``board`` and ``selfplay`` groups)."""
    b, s = config.board, config.selfplay
    return SelfPlayConfig(
        size=b.size,
        komi=b.komi,
        rules=b.rules,
        num_games=s.num_games,
        num_slots=s.num_slots or None,
        max_moves=b.max_moves or None,
        num_steps=s.num_steps or None,
        search=_search_config(s),
        resign_threshold=s.resign_threshold or None,
        no_resign_fraction=s.no_resign_fraction,
        fast_simulations=s.fast_simulations or None,
        full_search_prob=s.full_search_prob,
        num_devices=s.num_devices,
    )


def learner_config(config: ml_collections.ConfigDict) -> LearnerConfig:
    """The ``LearnerConfig`` of a run config (its ``learner`` group, field by field)."""
    fields = {f.name for f in dataclasses.fields(LearnerConfig)}
    given = config.learner.to_dict()
    unknown = sorted(set(given) - fields)
    if unknown:
        raise ValueError(f"unknown learner keys {unknown}")
    return LearnerConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})


def _to_learner_batch(sample: dict[str, np.ndarray], spec: model_lib.ModelSpec) -> dict:
    """A replay sample as the learner's batch (inputs as the encoder's tuple)."""
    inputs = sample["inputs"]
    if spec.is_katago:
        inputs = (inputs["spatial"], inputs["global"])
    else:
        inputs = (inputs,)
    batch = {
        "inputs": inputs,
        "policy": sample["policy"],
        "policy_mask": sample["policy_mask"],
        "value": sample["value"],
        "value_mask": sample["value_mask"],
        "score": sample["score"],
        "ownership": sample["ownership"],
        "ownership_mask": sample["score_mask"],
    }
    if spec.opponent_policy:  # only then: the step's input shapes stay as they were
        batch["opponent_policy"] = sample["opponent_policy"]
        batch["opponent_policy_mask"] = sample["opponent_policy_mask"]
    if spec.short_term_heads:
        batch["td_value"] = sample["td_value"]
        batch["td_score"] = sample["td_score"]
    return batch


def _host_variables(state) -> dict[str, Any]:
    """Params and BN statistics as host arrays, for self-play and evaluation on one device."""
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        # tiled: the global value of each array (replicated or split over the mesh);
        # without it process_allgather refuses arrays that span other processes' devices.
        return multihost_utils.process_allgather(variables, tiled=True)
    return jax.device_get(variables)


def _across_processes(values: Sequence[int]) -> np.ndarray:
    """``[process_count, len(values)]``: every process's ``values`` (a collective in a
    multi-process job: every process must call it at the same point)."""
    local = np.asarray(values, np.int32)
    if jax.process_count() == 1:
        return local[None]
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(local))


def _past(deadline: float) -> bool:
    """Whether the time limit is reached, agreed by every process (each process stopping
    on its own clock would leave the others waiting in the next learner step)."""
    if deadline == math.inf:  # no limit: nothing to agree on (the same for every process)
        return False
    return bool(_across_processes([time.perf_counter() > deadline]).any())
