"""``gojax export``: a training run's network as a KataGo model file.

    gojax export runs/aux_on --out aux_on.bin.gz          # the newest checkpoint
    gojax export runs/aux_on --step 600 --out aux_on-600.txt.gz

The run's KataGo-architecture net (presets ``tiny`` ... ``b60c320`` and the
nested-bottleneck ``tiny_nbt`` ... ``b28c512nbt``; trained on KataGo's version-7
input features) is written in KataGo's model format, binary or text by the
file name's suffix, with its BatchNorm statistics folded into each layer's
scale and bias as KataGo's own exporter does (``gojax.katago_model.save_model``).
The file is what ``gojax.katago_model.load_model`` reads, so ``gojax gtp
--model``, ``gojax analysis``, ``gojax analyze`` and sweeps take it like any
KataGo net.

The version is the oldest that holds the net: 8 for ReLU nets (nested blocks
included: KataGo's engine reads them in any version), 11 for nets trained with
another ``model.activation`` (activation kinds start there), 12 for nets with
``model.short_term_heads`` (the optimistic policy starts there; its short-term
error outputs are trained, its temporal-difference outputs are training targets
and stay behind, as in KataGo's exporter). What the file holds that gojax does
not train, and what is written there:

* the score head's ``scoreMean`` (channel 0): gojax trains one score output,
  channel 2 (KataGo's ``lead``), on the game's final score, which is
  KataGo's ``scoreMean`` target; both channels get its weights, so a program
  that reads either reads the trained prediction. ``scoreStdev`` (channel 1;
  trained if the run set ``learner.score_stdev_weight``) and ``varTimeLeft``
  (channel 3) are written as the run left them;
* version 11's short-term error outputs (score channels 4 and 5) of a net
  without short-term heads: zero weights, so the file predicts the same errors
  for every position;
* the opponent-reply output of a ``model.opponent_policy`` net is not part
  of these versions and is left out (the move policy, and the optimistic one,
  are written).

Before it returns, the export reads the file back and evaluates it and the
checkpoint's net on a few positions; a difference beyond float32 rounding of
the folded BatchNorms is an error, and the file is not left behind.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import gojax
from gojax.evaluate import KATAGO_ROOT_POLICY_OPTIMISM, evaluate
from gojax.games import random_action
from gojax.katago_outputs import score_channels
from gojax.nn import KataGoConfig
from train.model import score_mean_from_lead

__all__ = ["export_run", "file_version", "register"]

# What gojax.katago_model.load_model reads (binary unless the name says text).
SUFFIXES = (".bin.gz", ".txt.gz", ".bin", ".txt", ".gz")
# The outputs compared between the file and the checkpoint: ``gojax.evaluate``'s key and
# the largest difference allowed (float32 rounding of the folded BatchNorms; lead in points).
COMPARED = {
    "policy": ("policy", 1e-4),
    "value": ("value", 1e-4),
    "ownership": ("white_ownership", 1e-4),
    "score_lead": ("white_lead", 1e-2),
}


# Also compared for nets with short-term heads (version 12 files).
SHORT_TERM_COMPARED = {
    "optimistic_policy": ("optimistic_policy", 1e-4),
    "shortterm_winloss_error": ("shortterm_winloss_error", 1e-4),
    "shortterm_score_error": ("shortterm_score_error", 1e-2),
}


def _optimistic_policy(module, variables, states, version) -> dict[str, jax.Array]:
    """``{"optimistic_policy": [B, A]}``: ``module``'s policy at KataGo's root optimism
    (its engine's default at a search root and in ``kata-raw-nn``)."""
    optimistic = module.clone(policy_optimism=KATAGO_ROOT_POLICY_OPTIMISM)
    return {"optimistic_policy": evaluate(optimistic, variables, states, version=version)["policy"]}


def _sample_states(size: int, count: int = 4) -> gojax.GoState:
    """The empty board and ``count - 1`` positions of one seeded random game."""
    states = [gojax.new_game(size)]
    for key in jax.random.split(jax.random.key(0), count - 1):
        states.append(gojax.play(states[-1], random_action(key, gojax.legal_moves(states[-1]))))
    return jax.tree.map(lambda *x: jnp.stack(x), *states)


def file_version(config: KataGoConfig) -> int:
    """The oldest KataGo model version that holds a trained net of ``config``."""
    if config.optimistic_policy:
        return 12
    return 8 if config.activation == "relu" else 11


def file_config(config: KataGoConfig) -> KataGoConfig:
    """The shape of ``config``'s net as its file holds it (:func:`file_version`): the
    score head at the version's width, no opponent-reply or temporal-difference
    outputs (KataGo's model files have neither)."""
    version = file_version(config)
    return dataclasses.replace(
        config,
        score_channels=score_channels(version),
        policy_outputs=2 if config.optimistic_policy else 1,
        td_outputs=False,
    )


def _file_variables(params: dict[str, Any], channels: int) -> dict[str, Any]:
    """``params`` with the trained score channel copied into KataGo's ``scoreMean`` and
    the score head padded with zero weights to ``channels`` outputs."""
    params = score_mean_from_lead(jax.tree.map(np.asarray, params))
    score = dict(params["value"]["sv3"])
    for name in ("kernel", "bias"):
        values = score[name]
        pad = [(0, 0)] * (values.ndim - 1) + [(0, channels - values.shape[-1])]
        score[name] = np.pad(values, pad)
    return {**params, "value": {**params["value"], "sv3": score}}


def export_run(
    workdir: str | os.PathLike, out: str | os.PathLike, step: int | None = None, name: str = ""
) -> dict[str, Any]:
    """Write checkpoint ``step`` (None: the newest) of the run in ``workdir`` to ``out``.

    Returns ``{"file", "name", "step", "preset", "version", "worst"}``, ``worst`` the largest
    differences between the file's and the checkpoint's outputs (policy
    probabilities, value, ownership, score lead in points) on the check
    positions. Raises ValueError naming the problem (no such run or step, an
    AlphaGo Zero net, a bad name, outputs that do not match).
    """
    from gojax.katago_model import load_model, save_model
    from train.checkpoint import restore_variables
    from train.model import build, spec_from_config

    out = Path(out)
    if not out.name.lower().endswith(SUFFIXES):
        raise ValueError(f"{out}: model file names end in {', '.join(SUFFIXES)}")
    run = restore_variables(workdir, step)
    # Compared in float32, whatever the run computed in.
    spec = dataclasses.replace(spec_from_config(run.config["model"]), dtype="float32")
    if not spec.is_katago:
        raise ValueError(
            f"{workdir}: {spec.preset} is an AlphaGo Zero net; KataGo's file format holds "
            "KataGo-architecture nets only"
        )
    name = name or f"{Path(os.fspath(workdir)).resolve().name}-s{run.step}"
    module = build(spec)
    version = file_version(module.config)
    config = file_config(module.config)
    params = _file_variables(run.variables["params"], config.score_channels)
    variables = {"params": params, "batch_stats": run.variables["batch_stats"]}
    # Written beside the target and checked before it takes the target's name.
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.")
    try:
        staged = Path(folder) / out.name
        save_model(staged, config, variables, name=name, version=version)
        model = load_model(staged)
        # Both through the evaluation the engine plays with (KataGo's post-processing).
        states = _sample_states(int(run.config["board"]["size"]))
        # The checkpoint's net read as the version whose outputs it has (8: four scores).
        own_version = version if config.optimistic_policy else 8
        ours = evaluate(module, run.variables, states, version=own_version)
        theirs = evaluate(model.module(), model.variables, states, version=model.output_spec)
        compared = COMPARED | (SHORT_TERM_COMPARED if config.optimistic_policy else {})
        if config.optimistic_policy:  # also the policy a KataGo engine plays (optimism 0.2)
            ours |= _optimistic_policy(module, run.variables, states, own_version)
            theirs |= _optimistic_policy(model.module(), model.variables, states, model.output_spec)
        worst = {
            label: float(jnp.max(jnp.abs(ours[key] - theirs[key])))
            for label, (key, _) in compared.items()
        }
        bad = {label: v for label, v in worst.items() if not v <= compared[label][1]}
        if bad:
            raise ValueError(f"{out}: the written net differs from the checkpoint's: {bad}")
        os.replace(staged, out)
    finally:
        for leftover in Path(folder).iterdir():
            leftover.unlink()
        os.rmdir(folder)
    return {
        "file": str(out),
        "name": name,
        "step": run.step,
        "preset": spec.preset,
        "version": version,
        "worst": worst,
    }


def cmd_export(args) -> int:
    result = export_run(args.workdir, args.out, args.step, args.name)
    worst = ", ".join(f"{k} {v:.1e}" for k, v in result["worst"].items())
    print(
        f"wrote {result['file']}: {result['preset']} net of step {result['step']}, "
        f"KataGo model version {result['version']}, name {result['name']}; read back, "
        f"largest differences from the checkpoint: {worst}"
    )
    return 0


def register(commands) -> None:
    """Add ``gojax export`` to the subcommands of the ``gojax`` parser."""
    parser = commands.add_parser(
        "export",
        help="write a training run's network as a KataGo model file (.bin.gz)",
        description="Writes a checkpoint of a gojax train run (KataGo-architecture presets) "
        "as a KataGo model file, version 8 (version 11 for activations other than ReLU): "
        "binary for .bin/.bin.gz, text for .txt/.txt.gz.",
    )
    parser.add_argument("workdir", help="the run's workdir (as given to gojax train)")
    parser.add_argument("--out", required=True, help="the model file to write")
    parser.add_argument("--step", type=int, help="the checkpoint's step (default: the newest)")
    parser.add_argument("--name", default="", help="the model's name (default: <run>-s<step>)")
    parser.set_defaults(run=cmd_export)
