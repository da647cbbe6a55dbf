"""The command line ``gojax gtp``: its flags and the engine they build.

:func:`register` adds the subcommand and its flags, :func:`make_engine` builds the
:class:`eval.engine.Engine` they describe (the player, KataGo's ``-config`` and
``-override-config`` folded in), :func:`cmd_gtp` serves it over stdin and stdout.
Apart from the protocol (``eval._gtp_server``) because choosing and loading a player
is a different job from speaking GTP, and tests build servers around engines of their
own.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eval import gtp_params
from eval._gtp_server import GTPServer
from eval.engine import Engine
from eval.katago_config import DEFAULT_NN_CACHE
from gojax.games import MAX_SIZE, MIN_SIZE


def _rollout_weights(args: argparse.Namespace):
    """The ``--rollout-policy`` file's weights, or None (uniform rollouts)."""
    if not args.rollout_policy:
        return None
    from gojax.rollout_policy import load

    return load(args.rollout_policy)


def _cache_size(text: str) -> int:
    """``--nn-cache``'s argument: 0 (none) or a table of 2 ** 1..30 positions."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer 0..30, not {text!r}") from None
    if not 0 <= value <= 30:
        raise argparse.ArgumentTypeError(f"expected an integer 0..30, not {value}")
    return value


# gojax gtp's flags that a KataGo config's keys set too (eval.katago_config.gtp_options):
# a key sets one only where it was left at its default.
_KATAGO_FLAGS = ("visits", "rules", "lag", "resign_threshold", "nn_cache")


def _katago_form(args: argparse.Namespace) -> tuple[argparse.Namespace, Any]:
    """``args`` with KataGo's command line (``-config``, ``-override-config``,
    ``-human-model``) folded in, and what of it ``eval.katago_config`` took (None
    without it): the flags it sets, the parameters to set once the engine is made."""
    from eval import katago_config

    config = getattr(args, "config", None)
    overrides = getattr(args, "katago_overrides", None)
    human = getattr(args, "human_model", None)
    if not (config or overrides or human):
        return args, None
    mapped = katago_config.gtp_options(katago_config.read_settings(config, overrides))
    defaults = getattr(args, "flag_defaults", {})
    changed = {
        flag: value
        for flag, value in mapped.options.items()
        if getattr(args, flag) == defaults.get(flag, getattr(args, flag))
    }
    if human:
        mapped.not_supported("-human-model", "no human SL model")
    return argparse.Namespace(**vars(args) | changed), mapped


def make_engine(args: argparse.Namespace) -> Engine:
    """The engine ``gojax gtp`` runs, from its parsed flags (and KataGo's command line:
    ``-config FILE -override-config ...``, ``eval.katago_config``)."""
    from eval import katago_config, players

    args, katago = _katago_form(args)

    if args.rollout_policy and args.player in ("policy", "uniform"):
        raise ValueError("--rollout-policy plays rollouts: use it with --player uct or search")

    optimism_flags = (args.root_policy_optimism, args.policy_optimism)
    if args.player in ("uniform", "uct") and any(flag is not None for flag in optimism_flags):
        raise ValueError(f"--player {args.player} has no network: policy optimism needs one")
    if args.player == "uniform":
        player = players.UniformPlayer()
    elif args.player == "uct":
        player = players.UCTPlayer(
            visits=args.visits,
            rollout_weights=_rollout_weights(args),
            ponder_visits=args.ponder_visits,
        )
    else:
        if bool(args.model) == bool(args.checkpoint):
            raise ValueError(
                "give one network: --model (a KataGo .bin.gz file) or --checkpoint "
                "(a gojax train workdir)"
            )
        if args.model:
            from gojax.katago_model import load_model

            model = load_model(args.model)
        else:
            from eval.trained_model import load_trained_model

            model = load_trained_model(args.checkpoint, args.step)
        optimism = players.policy_optimism(model, *optimism_flags)
        # A gojax checkpoint plays over the move set its self-play searched.
        moves = args.moves or getattr(model, "moves", "legal")
        kind = args.player
        if kind == "auto":
            kind = "search" if args.visits > 1 else "policy"
        if kind == "search":
            symmetry = "random" if args.symmetry is None else args.symmetry
            player = players.SearchPlayer(
                model,
                symmetry=symmetry,
                optimism=optimism,
                visits=args.visits,
                search=args.search,
                gumbel_scale=args.gumbel_scale,
                considered=args.gumbel_considered,
                rollout_lambda=args.rollout_lambda,
                rollouts=args.rollouts,
                rollout_weights=_rollout_weights(args),
                lcb=bool(args.lcb),
                score_utility=not args.no_score_utility,
                ponder_visits=args.ponder_visits,
                moves=moves,
                nn_cache=_nn_cache(args),
            )
            leaf_batch = getattr(args, "leaf_batch", None) or default_leaf_batch()
            if leaf_batch > 1:  # gojax.search's virtual loss: K leaves per network call
                # Its visits spread under virtual loss: play the best bound unless told not to.
                lcb = players.PLAY_LCB if args.lcb is None and args.search != "gumbel" else {}
                player.set_search(leaf_batch=leaf_batch, **lcb)
        else:
            if args.rollout_policy:
                raise ValueError(
                    "--rollout-policy plays rollouts: a search (--visits > 1) needs it"
                )
            symmetry = "average" if args.symmetry is None else args.symmetry
            player = players.PolicyPlayer(
                model, symmetry=symmetry, policy_optimism=optimism[0], moves=moves
            )
    sizes = getattr(player, "board_sizes", None)
    size = args.size or (sizes[0] if sizes else 19)
    if sizes is not None and size not in sizes:
        raise ValueError(f"{player.name} plays only on {' or '.join(map(str, sizes))}x boards")
    settings = gtp_params.settings_from_text(args.override_config or "")
    later = bool(settings) or bool(katago and katago.settings)
    engine = Engine(
        player,
        size=size,
        komi=args.komi,
        rules=args.rules,
        visits=args.visits,
        resign_threshold=args.resign_threshold,
        lag=args.lag,
        seed=args.seed,
        warm=not later,
    )
    if katago is not None:  # the config's parameters this player honours; the flag's win
        settings = katago_config.gtp_parameters(katago, gtp_params.names(engine)) | settings
    if settings:
        gtp_params.set_params(engine, settings, warm=False)
    if later:  # then warmed once, as set
        engine.warm_again()
    if katago is not None:
        ignored = katago_config.ignored_line("gtp", getattr(args, "config", None), katago)
        if ignored:
            print(ignored, file=sys.stderr, flush=True)
    return engine


def _nn_cache(args: argparse.Namespace) -> int:
    """``--nn-cache``'s table size (log2), 0 for none; by default ``DEFAULT_NN_CACHE``,
    none with ``--rollout-lambda`` (random rollouts are not kept)."""
    chosen = getattr(args, "nn_cache", None)
    if chosen is not None:
        if chosen and args.rollout_lambda:
            raise ValueError("--nn-cache keeps no rollout values: give --nn-cache 0")
        return chosen
    return 0 if args.rollout_lambda else DEFAULT_NN_CACHE


def default_leaf_batch() -> int:
    """``--leaf-batch``'s default: 8 on an accelerator, whose network runs far faster per
    position in batches; 1 on a CPU, the search as it was (a b6c96 net runs 1.5-1.8x
    faster per position at batch 8 there too: ``bench/one_game.py`` measures whether the
    search keeps it)."""
    import jax

    return 1 if jax.default_backend() == "cpu" else 8


def cmd_gtp(args: argparse.Namespace) -> int:
    engine = make_engine(args)
    print(f"gojax gtp: {engine.player.name}, GTP ready", file=sys.stderr, flush=True)
    GTPServer(engine, sys.stdout, log=sys.stderr).serve_stream(sys.stdin)
    return 0


def register(commands) -> None:
    """Add ``gtp`` to the ``gojax`` subcommands (``commands`` from ``add_subparsers``)."""
    from eval.arguments import fraction, positive, symmetry_arg
    from gojax import RULE_PRESETS

    gtp = commands.add_parser("gtp", help="play and analyse over GTP (Sabaki, Lizzie, GoGui)")
    gtp.add_argument("--model", "-model", help="a KataGo model file (.bin.gz)")
    from eval.katago_config import add_katago_arguments

    add_katago_arguments(gtp)
    gtp.add_argument(
        "--checkpoint", help="a gojax train workdir: play its newest (or --step) network"
    )
    gtp.add_argument("--step", type=int, default=None, help="the checkpoint step (--checkpoint)")
    gtp.add_argument(
        "--player",
        choices=("auto", "policy", "search", "uct", "uniform"),
        default="auto",
        help="policy: the raw network policy; search: tree search with --visits; "
        "uct: classical UCT with --visits random playouts, no network; "
        "uniform: random moves; auto (default): search when --visits > 1, else policy",
    )
    gtp.add_argument("--visits", type=positive, default=1, help="search visits per move")
    gtp.add_argument(
        "--leaf-batch",
        type=positive,
        default=None,
        metavar="K",
        help="--player search: leaves evaluated per network call, K descents of the tree "
        "under virtual loss (SearchConfig.leaf_batch; default 1 on a CPU, 8 on a GPU or TPU)",
    )
    gtp.add_argument(
        "--nn-cache",
        type=_cache_size,
        default=None,
        metavar="LOG2",
        help="--player search: keep the network's evaluations of 2^LOG2 positions between "
        "searches (KataGo's nnCacheSizePowerOfTwo), so a position searched again is not "
        f"evaluated again; 0 keeps none (default {DEFAULT_NN_CACHE}, 0 with --rollout-lambda)",
    )
    gtp.add_argument(
        "--ponder-visits",
        type=positive,
        default=None,
        help="--player search or uct: the root visits lz-analyze/kata-analyze grow their "
        "search to (default: 16 moves' visits, at least 256); the tree holds one node a visit",
    )
    gtp.add_argument(
        "--search",
        choices=("puct", "katago", "gumbel"),
        default="puct",
        help="the network's tree search (--player search): puct (AlphaGo Zero, default), "
        "katago (KataGo's PUCT on KataGo's utility, the value plus a score term: "
        "first-play urgency reduction, exploration that grows with visits and the "
        "utilities' spread) or gumbel (Gumbel MuZero's sequential halving over a few root "
        "moves)",
    )
    gtp.add_argument(
        "--moves",
        choices=("legal", "sensible"),
        default=None,
        help="the moves the network chooses from (--player search or policy): legal, or "
        "sensible (no filling of one's own eyes; a pass only after a pass or with nothing "
        "else to play), the set gojax's self-play recipes train over; default: a "
        "--checkpoint's own run's, legal for a --model file",
    )
    gtp.add_argument(
        "--no-score-utility",
        action="store_true",
        help="--search katago: search on the win-loss value alone, without KataGo's score utility",
    )
    gtp.add_argument(
        "--lcb",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--search puct or katago: play the root move with the best lower confidence "
        "bound on its utility among those with at least 15%% of the most visits (KataGo's "
        "useLcbForSelection; 3 standard errors, a spread of at least 0.4) instead of the "
        "most visited (default: on with --leaf-batch above 1, whose visits spread under "
        "virtual loss; off otherwise)",
    )
    gtp.add_argument(
        "--gumbel-scale",
        type=float,
        default=0.0,
        help="--search gumbel: scale of the Gumbel noise that samples the moves to search "
        "(0, default: the network's favourites, stronger in play; 1: the paper's, for "
        "self-play)",
    )
    gtp.add_argument(
        "--gumbel-considered",
        type=positive,
        default=None,
        help="--search gumbel: root moves searched by sequential halving (default: a quarter "
        "of --visits, 2 to 16); with no more visits than this, each visit goes to a "
        "different root move",
    )
    gtp.add_argument(
        "--rollout-lambda",
        type=fraction,
        default=0.0,
        help="--player search: value leaves as AlphaGo did, (1 - lambda) * network value + "
        "lambda * mean of --rollouts random games (AlphaGo: 0.5; default 0: the network alone)",
    )
    gtp.add_argument(
        "--rollouts", type=positive, default=1, help="random games per leaf (--rollout-lambda)"
    )
    gtp.add_argument(
        "--rollout-policy",
        metavar="NPZ",
        help="play the rollouts (--player uct, or --rollout-lambda) with this fast rollout "
        "policy (gojax train-rollout's rollout_policy.npz) instead of uniform random moves",
    )
    add_policy_optimism_arguments(gtp)
    gtp.add_argument("--rules", choices=sorted(RULE_PRESETS), default="tromp-taylor")
    gtp.add_argument("--komi", type=float, default=7.5)
    gtp.add_argument(
        "--size",
        type=int,
        choices=range(MIN_SIZE, MAX_SIZE + 1),
        default=None,
        metavar=f"{MIN_SIZE}..{MAX_SIZE}",
        help="initial board size (default: 19, or the size an AlphaGo Zero net was trained on)",
    )
    gtp.add_argument(
        "--override-config",
        default=None,
        metavar="NAME=VALUE,...",
        help="KataGo's parameters to start with, as kata-set-param sets them "
        "(e.g. maxVisits=200,maxTime=5,fpuReductionMax=0.1; docs/gtp.md lists them)",
    )
    gtp.add_argument(
        "--resign-threshold",
        type=float,
        default=None,
        help="resign when the win rate stays below this for 3 moves (default: never)",
    )
    gtp.add_argument(
        "--symmetry",
        type=symmetry_arg,
        default=None,
        help="0..7, random or average (default: average for policy, random for search)",
    )
    gtp.add_argument("--lag", type=float, default=1.0, help="seconds kept back per timed move")
    gtp.add_argument("--seed", type=int, default=0)
    gtp.set_defaults(
        run=cmd_gtp, flag_defaults={flag: gtp.get_default(flag) for flag in _KATAGO_FLAGS}
    )


def add_policy_optimism_arguments(parser: argparse.ArgumentParser) -> None:
    """``--root-policy-optimism`` and ``--policy-optimism`` (``gojax gtp`` and ``analysis``)."""
    from eval import players
    from eval.arguments import fraction

    parser.add_argument(
        "--root-policy-optimism",
        type=fraction,
        default=None,
        help="mix of the optimistic policy (KataGo model versions >= 12) into the root's "
        f"prior and the reported policy (default: KataGo's "
        f"{players.KATAGO_ROOT_POLICY_OPTIMISM:g} for such nets, 0 for others)",
    )
    parser.add_argument(
        "--policy-optimism",
        type=fraction,
        default=None,
        help="the same below the root (default: KataGo's "
        f"{players.KATAGO_POLICY_OPTIMISM:g} for such nets, 0 for others)",
    )
