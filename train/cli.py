"""``gojax train``: parse the flags and the ``--config.KEY=VALUE`` overrides, call ``train``.

Kept apart from ``train.loop`` so that building the ``gojax`` parser imports
no JAX.
"""

from __future__ import annotations

import argparse
import os
import sys

# ----------------------------------------------------------------------------
# gojax train


def cpu_devices_hint(backend: str, local_devices: int, cores: int) -> str | None:
    """A one-line tip for a CPU run on one XLA device with several cores, else None.

    XLA's CPU platform is one device by default; self-play's board and search work
    then runs on one core at a time, and one host device per core lets the games'
    shards overlap it (docs/training.md, "Devices").
    """
    if backend != "cpu" or local_devices != 1 or cores < 2:
        return None
    return (
        f"tip: self-play runs faster with one XLA host device per core: "
        f"XLA_FLAGS=--xla_force_host_platform_device_count={cores} gojax train ... "
        "--config.learner.num_devices=1 (1.5x on 2 cores; docs/training.md)"
    )


def _cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cmd_train(args) -> int:
    # Before anything touches a backend: a multi-process job joins its coordinator.
    import jax

    from train.config_checks import check_run_config
    from train.learner import initialize_distributed
    from train.loop import apply_overrides, load_config, train

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    check_run_config(config)  # one line naming a bad key, before anything starts
    if not initialize_distributed() and config.multihost:
        jax.distributed.initialize()  # TPU pods and SLURM: everything auto-detected
    hint = cpu_devices_hint(jax.default_backend(), jax.local_device_count(), _cores())
    if hint and jax.process_count() == 1:
        print(hint, file=sys.stderr)
    summary = train(config, args.workdir)
    if jax.process_index() == 0:
        print(
            f"stopped at step {summary['step']} ({summary['stopped']}), "
            f"iteration {summary['iteration']}, {summary['games']} games; "
            f"workdir {args.workdir}",
            file=sys.stderr,
        )
    return 0


class _TrainParser(argparse.ArgumentParser):
    """Keeps ``--config.KEY=VALUE`` arguments (unknown to argparse) as ``overrides``.

    argparse would reject them as unrecognised options: a subparser hands its
    leftovers to the top-level parser, so this one claims them first.
    """

    def parse_known_args(self, args=None, namespace=None):
        namespace, rest = super().parse_known_args(args, namespace)
        overrides, unknown = [], []
        i = 0
        while i < len(rest):
            if rest[i].startswith("--config."):
                # "--config.k=v" or "--config.k v".
                width = 1 if "=" in rest[i] or i + 1 == len(rest) else 2
                overrides.extend(rest[i : i + width])
                i += width
            else:
                unknown.append(rest[i])
                i += 1
        namespace.overrides = overrides
        return namespace, unknown


def add_config_command(commands, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose parser keeps ``--config.KEY=VALUE`` overrides (``_TrainParser``)."""
    parser_class = commands._parser_class
    commands._parser_class = _TrainParser
    try:
        return commands.add_parser(name, **kwargs)
    finally:
        commands._parser_class = parser_class


def register(commands) -> None:
    """Add ``gojax train`` to the subcommands of the ``gojax`` parser."""
    parser = add_config_command(
        commands,
        "train",
        help="self-play training from a config file (resumes from the workdir)",
        description="Trains from a config file; overrides: --config.KEY=VALUE with dotted "
        "keys, e.g. --config.train.total_steps=100.",
    )
    parser.add_argument("--config", required=True, help="a Python config file with get_config()")
    parser.add_argument("--workdir", required=True, help="checkpoints, metrics, plots, SGF")
    parser.set_defaults(run=cmd_train, overrides=[])


# ----------------------------------------------------------------------------
# gojax snapshot


def cmd_snapshot(args) -> int:
    from train.continuation import snapshot

    step = snapshot(args.workdir, args.out, args.step)
    print(f"step {step} of {args.workdir} -> {os.path.join(args.out, 'checkpoints', str(step))}")
    return 0


def register_snapshot(commands) -> None:
    """Add ``gojax snapshot`` (a replay-free copy of a checkpoint, to continue from)."""
    parser = commands.add_parser(
        "snapshot",
        help="copy a training checkpoint without its replay (to continue elsewhere)",
        description="Writes OUT/checkpoints/<step>/: the train state (parameters, optimiser state, "
        "step), the config, the counters and the lineage of a run's checkpoint, without "
        "the replay; `gojax train --config.train.init_from=OUT` starts a fresh "
        "workdir from it.",
    )
    parser.add_argument("--workdir", required=True, help="the training run's workdir")
    parser.add_argument("--out", required=True, help="a folder that reads as a run's workdir")
    parser.add_argument("--step", type=int, default=None, help="default: the newest")
    parser.set_defaults(run=cmd_snapshot)


# ----------------------------------------------------------------------------
# gojax train-sl


def cmd_train_sl(args) -> int:
    from train.loop import apply_overrides, load_config
    from train.supervised import train_sl

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    if args.sgf_dir:
        config.data.sgf_dir = args.sgf_dir
    summary = train_sl(config, args.workdir)
    print(
        f"stopped at step {summary['step']} ({summary['stopped']}); {summary['games_read']} "
        f"games read, {summary['skipped']} files skipped; workdir {args.workdir}",
        file=sys.stderr,
    )
    return 0


def register_sl(commands) -> None:
    """Add ``gojax train-sl`` to the subcommands of the ``gojax`` parser."""
    parser = add_config_command(
        commands,
        "train-sl",
        help="supervised learning from a folder of SGF games (resumes from the workdir)",
        description="Trains a policy and value net on the moves and results of SGF games; "
        "overrides: --config.KEY=VALUE, e.g. --config.train.total_steps=100.",
    )
    parser.add_argument("--config", required=True, help="a Python config file with get_config()")
    parser.add_argument("--workdir", required=True, help="checkpoints, metrics, plots")
    parser.add_argument("--sgf-dir", help="the SGF folder (sets data.sgf_dir)")
    parser.set_defaults(run=cmd_train_sl, overrides=[])


# ----------------------------------------------------------------------------
# gojax train-pg


def cmd_train_pg(args) -> int:
    from train.loop import apply_overrides, load_config
    from train.policy_gradient import train_pg

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    if args.init:
        config.init.workdir = args.init
    summary = train_pg(config, args.workdir)
    e = summary["eval"]
    low, high = e["ci95"]
    print(
        f"against the starting policy: {e['wins']} wins, {e['draws']} draws in {e['games']} "
        f"games, win rate {e['win_rate']:.3f} [{low:.3f}, {high:.3f}]",
        file=sys.stderr,
    )
    print(
        f"stopped at iteration {summary['step']} ({summary['stopped']}); pool of "
        f"{summary['pool']} policies; workdir {args.workdir}",
        file=sys.stderr,
    )
    return 0


def register_pg(commands) -> None:
    """Add ``gojax train-pg`` to the subcommands of the ``gojax`` parser."""
    parser = add_config_command(
        commands,
        "train-pg",
        help="AlphaGo's RL policy stage: policy-gradient games against a pool of earlier "
        "policies (resumes from the workdir)",
        description="Trains a policy net by REINFORCE on games against its earlier selves, "
        "starting from a train-sl run; overrides: --config.KEY=VALUE.",
    )
    parser.add_argument("--config", required=True, help="a Python config file with get_config()")
    parser.add_argument("--workdir", required=True, help="checkpoints, metrics, plots")
    parser.add_argument("--init", help="the run to start from (sets init.workdir)")
    parser.set_defaults(run=cmd_train_pg, overrides=[])


# ----------------------------------------------------------------------------
# gojax train-value


def cmd_train_value(args) -> int:
    from train.loop import apply_overrides, load_config
    from train.value_network import train_value

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    if args.init:
        config.init.workdir = args.init
    if args.rl:
        config.players.rl_workdir = args.rl
    summary = train_value(config, args.workdir)
    mse = summary["eval"]["mse"]
    print(
        f"held-out MSE on {summary['holdout']} positions: value net {mse['value']:.3f} "
        f"(start {mse['start']:.3f}), random rollouts {mse['rollouts']:.3f}, "
        f"mix {mse['mix']:.3f}, always 0 {mse['zero']:.3f}; "
        f"training positions {summary['eval']['train_mse']:.3f}",
        file=sys.stderr,
    )
    print(
        f"stopped at step {summary['step']} ({summary['stopped']}) on "
        f"{summary['positions']} positions; workdir {args.workdir}",
        file=sys.stderr,
    )
    return 0


def register_value(commands) -> None:
    """Add ``gojax train-value`` to the subcommands of the ``gojax`` parser."""
    parser = add_config_command(
        commands,
        "train-value",
        help="AlphaGo's value-network stage: regression on one position from each of many "
        "SL/RL games (resumes from the workdir)",
        description="Plays games with an SL and an RL policy run, keeps one position per game "
        "and fits the value network of the init run on their results; overrides: "
        "--config.KEY=VALUE.",
    )
    parser.add_argument("--config", required=True, help="a Python config file with get_config()")
    parser.add_argument("--workdir", required=True, help="data, checkpoints, metrics, plots")
    parser.add_argument(
        "--init",
        help="the run whose value net is trained and whose policy is kept "
        "(sets init.workdir; AlphaGo: the SL run)",
    )
    parser.add_argument(
        "--rl", help="the RL policy run that finishes the games (sets players.rl_workdir)"
    )
    parser.set_defaults(run=cmd_train_value, overrides=[])


# ----------------------------------------------------------------------------
# gojax train-rollout


def cmd_train_rollout(args) -> int:
    from train.loop import apply_overrides, load_config
    from train.rollout_policy import train_rollout

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    if args.sgf_dir:
        config.data.sgf_dir = args.sgf_dir
    summary = train_rollout(config, args.workdir)
    held = summary["eval"]["holdout"]
    print(
        f"held-out moves predicted: {held['accuracy']:.1%} (uniform over the same moves "
        f"{held['uniform_accuracy']:.1%}), log-loss {held['nll']:.3f} (uniform "
        f"{held['uniform_nll']:.3f}) on {summary['holdout']} positions; training positions "
        f"{summary['eval']['train']['accuracy']:.1%}",
        file=sys.stderr,
    )
    print(
        f"stopped at step {summary['step']} ({summary['stopped']}) on {summary['positions']} "
        f"positions; policy {os.path.join(args.workdir, 'rollout_policy.npz')}",
        file=sys.stderr,
    )
    return 0


def register_rollout(commands) -> None:
    """Add ``gojax train-rollout`` to the subcommands of the ``gojax`` parser."""
    parser = add_config_command(
        commands,
        "train-rollout",
        help="AlphaGo's fast rollout policy: a linear softmax over local patterns fitted to "
        "a folder of SGF games (resumes from the workdir)",
        description="Fits the pattern weights of gojax.rollout_policy to the moves of SGF "
        "games; overrides: --config.KEY=VALUE.",
    )
    parser.add_argument("--config", required=True, help="a Python config file with get_config()")
    parser.add_argument("--workdir", required=True, help="policy, checkpoint, metrics, plots")
    parser.add_argument("--sgf-dir", help="the SGF folder (sets data.sgf_dir)")
    parser.set_defaults(run=cmd_train_rollout, overrides=[])


# ----------------------------------------------------------------------------
# gojax balance-rollout


def cmd_balance_rollout(args) -> int:
    from train.loop import apply_overrides, load_config
    from train.rollout_balance import balance_rollout

    config = load_config(args.config)
    apply_overrides(config, args.overrides)
    for flag, key in (("init", "init"), ("model", "model"), ("sgf_dir", "sgf_dir")):
        if getattr(args, flag):
            config.data[key] = getattr(args, flag)
    summary = balance_rollout(config, args.workdir)
    start, balanced = summary["holdout"]["start"], summary["holdout"]["balanced"]
    n = summary["eval_rollouts"]
    print(
        f"held-out MSE of {n} rollouts against the value net: {start['mse_target']:.3f} -> "
        f"{balanced['mse_target']:.3f}; against the results: {start['mse_result']:.3f} -> "
        f"{balanced['mse_result']:.3f} (the value net itself: "
        f"{summary['holdout_value_net_mse_result']:.3f}) on {balanced['positions']} positions",
        file=sys.stderr,
    )
    print(
        f"stopped at step {summary['step']} ({summary['stopped']}); policy "
        f"{os.path.join(args.workdir, 'rollout_policy.npz')}",
        file=sys.stderr,
    )
    return 0


def register_balance(commands) -> None:
    """Add ``gojax balance-rollout`` to the subcommands of the ``gojax`` parser."""
    parser = add_config_command(
        commands,
        "balance-rollout",
        help="simulation balancing: refit a fast rollout policy so that its rollouts' mean "
        "matches a value net's (resumes from the workdir)",
        description="Fits the weights of a gojax train-rollout policy by Silver and Tesauro's "
        "simulation balancing; overrides: --config.KEY=VALUE.",
    )
    parser.add_argument("--config", required=True, help="a Python config file with get_config()")
    parser.add_argument("--workdir", required=True, help="policy, checkpoint, metrics, plots")
    parser.add_argument("--init", help="the starting rollout_policy.npz (sets data.init)")
    parser.add_argument("--model", help="the KataGo model giving V* (sets data.model)")
    parser.add_argument("--sgf-dir", help="the SGF folder (sets data.sgf_dir)")
    parser.set_defaults(run=cmd_balance_rollout, overrides=[])
