"""The command line ``gojax analysis``: its flags, KataGo's command line, and the engine
they build.

:func:`register` adds the subcommand and its flags (KataGo's ``-model``, ``-config``,
``-override-config`` among them); :func:`cmd_analysis` folds a KataGo config into the
engine's options (a flag given wins), builds the :class:`eval.analysis.AnalysisEngine`,
compiles what ``--warm-up`` names (by default what a KataGo config implies:
``eval.katago_config.warm_up_boards``) and serves stdin. Apart from the engine because it is
the thin entry point over it: flags in, one engine, no protocol.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from eval._analysis_engine import AnalysisEngine
from eval._gtp_cli import default_leaf_batch
from eval.analysis_query import MAX_TREE_VISITS, MAX_VISITS, REPORT_AS
from eval.katago_config import DEFAULT_NN_CACHE
from eval.players import optimism_label

# AnalysisEngine's options that a flag sets too: a config's key sets one only where its
# flag was left at its default.
_FLAGS_OF_OPTIONS = {
    "visits": "visits_default",
    "report_as": "report_as",
    "wide_root_noise": "wide_root_noise",
    "ignore_pre_root_history": "pre_root_history",
    "root_symmetry_pruning": "no_root_symmetry_pruning",
    "nn_cache": "nn_cache",
}


def _katago_form(
    args: argparse.Namespace, options: dict[str, Any]
) -> tuple[str | None, list[tuple[int, str]] | None]:
    """Fold KataGo's command line (``-config``, ``-override-config``, ...) into the
    engine's ``options``: a config key sets an option whose flag was left at its default
    (a flag given wins). Returns the one stderr line naming what gojax does not use, and
    the boards to warm up for the config (``katago_config.warm_up_boards``; None: no
    config file and no ``gojaxWarmUp``)."""
    from eval import katago_config

    overrides = getattr(args, "katago_overrides", None) or []
    config = getattr(args, "config", None)
    settings = katago_config.read_settings(config, overrides)
    mapped = katago_config.analysis_options(settings, args.search, bool(config))
    boards = None
    if config or katago_config.WARM_UP_KEY in settings:
        boards = katago_config.warm_up_boards(settings)
    defaults = getattr(args, "flag_defaults", {})
    for name, value in mapped.options.items():
        flag = _FLAGS_OF_OPTIONS.get(name)
        if flag is None or getattr(args, flag) == defaults.get(flag, getattr(args, flag)):
            options[name] = value
    if getattr(args, "analysis_threads", None) is not None:
        mapped.no_effect.append("-analysis-threads")
    if getattr(args, "quit_without_waiting", False):
        mapped.not_supported("-quit-without-waiting", "queued queries are answered")
    if getattr(args, "human_model", None):
        mapped.not_supported("-human-model", "no human SL model")
    return katago_config.ignored_line("analysis", config, mapped), boards


def _say_warm_up(engine: AnalysisEngine, boards: list[tuple[int, str]], source: str) -> None:
    """One stderr line before the warm-up: a client waits for it (minutes on a small
    CPU, seconds with the programs in the persistent compilation cache), so say why and
    how to skip it."""
    named = ", ".join(f"{size}x{size} {rules}" for size, rules in boards)
    print(
        f"gojax analysis: compiling the search of up to {engine.visits} visits for {named} "
        f"(from {source}; --warm-up none, or gojaxWarmUp = none in the config, skips this)",
        file=sys.stderr,
        flush=True,
    )


def cmd_analysis(args: argparse.Namespace) -> int:
    from gojax.katago_model import load_model

    if args.search == "katago" and args.c_puct != 1.25:
        raise ValueError("--c-puct is the PUCT search's: add --search puct")
    options: dict[str, Any] = dict(
        symmetry=args.symmetry,
        visits=args.visits_default,
        batch_size=args.batch_size,
        min_batch=args.min_batch,
        report_as=args.report_as,
        moves_listed=args.moves_listed,
        c_puct=args.c_puct,
        seed=args.seed,
        replay_cache=args.replay_cache,
        nn_cache=args.nn_cache,
        root_policy_optimism=args.root_policy_optimism,
        policy_optimism=args.policy_optimism,
        search=args.search,
        score_utility=not args.no_score_utility,
        wide_root_noise=args.wide_root_noise,
        ignore_pre_root_history=not args.pre_root_history,
        root_symmetry_pruning=not args.no_root_symmetry_pruning,
        max_tree_visits=getattr(args, "max_tree_visits", MAX_TREE_VISITS),
    )
    katago_flags = ("config", "katago_overrides", "analysis_threads", "human_model")
    ignored, boards = None, None
    if any(getattr(args, flag, None) for flag in katago_flags):
        ignored, boards = _katago_form(args, options)
    leaf_batch = getattr(args, "leaf_batch", None) or default_leaf_batch()
    if leaf_batch > 1:  # gojax.search's virtual loss: K leaves of each tree per network call
        options["search_settings"] = options.get("search_settings", {}) | {"leaf_batch": leaf_batch}
    warm_up = getattr(args, "warm_up", None)
    if warm_up is not None:  # given: it wins over the config's
        boards = warm_up
    model = load_model(args.model)
    engine = AnalysisEngine(model, **options)
    if ignored:
        print(ignored, file=sys.stderr, flush=True)
    warmed = ""
    if boards:
        start = time.monotonic()
        _say_warm_up(engine, boards, "--warm-up" if warm_up is not None else "the KataGo config")
        engine.warm_up(boards)
        warmed = f" (compiled in {time.monotonic() - start:.0f} s)"
    noise = f" (wide root noise {engine.wide_root_noise:g})" if args.search == "katago" else ""
    print(
        f"gojax analysis: {model.name}{optimism_label(engine.optimism)}, {args.search} search"
        f"{noise}, "
        f"{engine.visits} visits by default, batches of up to {args.batch_size}; ready{warmed}",
        file=sys.stderr,
        flush=True,
    )
    engine.serve(sys.stdin, sys.stdout)
    return 0


def register(commands) -> None:
    """Add ``analysis`` to the ``gojax`` subcommands (``commands`` from ``add_subparsers``)."""
    from eval import gtp_params
    from eval.arguments import non_negative, positive, symmetry_arg
    from eval.gtp import add_policy_optimism_arguments

    def visits(text: str) -> int:
        value = positive(text)
        if value > MAX_VISITS:
            raise argparse.ArgumentTypeError(f"must be at most {MAX_VISITS}, got {text}")
        return value

    def boards(text: str) -> list[tuple[int, str]]:  # --warm-up's SIZE[:RULES],... or none
        from eval.katago_config import parse_boards

        try:
            return parse_boards(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    def wide_root_noise(text: str) -> float:  # as gtp's wideRootNoise reads it
        try:
            return gtp_params.PARAMS["wideRootNoise"].parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"must be {error}") from None

    parser = commands.add_parser(
        "analysis", help="KataGo's JSON analysis engine: batched queries on stdin, JSON on stdout"
    )
    parser.add_argument("--model", "-model", required=True, help="a KataGo model file (.bin.gz)")
    from eval.katago_config import add_katago_arguments

    add_katago_arguments(parser)
    parser.add_argument(
        "-analysis-threads",
        dest="analysis_threads",
        type=int,
        default=None,
        metavar="N",
        help="KataGo's: positions searched at once by threads (no effect: every query "
        "waiting is batched, --batch-size)",
    )
    parser.add_argument(
        "-quit-without-waiting",
        dest="quit_without_waiting",
        action="store_true",
        help="KataGo's (not supported: queries read before stdin ends are answered)",
    )
    parser.add_argument(
        "--visits-default",
        type=visits,
        default=64,
        metavar="N",
        help="visits when a query gives no maxVisits (default 64)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive,
        default=256,
        help="most queries read and positions searched at once (default 256)",
    )
    parser.add_argument(
        "--min-batch",
        type=positive,
        default=1,
        help="pad every batch to at least this many positions (fewer compiled programs)",
    )
    parser.add_argument(
        "--symmetry",
        type=symmetry_arg,
        default="random",
        help="0..7, random or average (default: a random symmetry per evaluation)",
    )
    parser.add_argument(
        "--report-as",
        choices=REPORT_AS,
        type=str.upper,
        default="BLACK",
        help="perspective of win rates, scores and ownership (KataGo's "
        "reportAnalysisWinratesAs; default BLACK)",
    )
    parser.add_argument(
        "--moves-listed", type=positive, default=16, help="most moves reported per position"
    )
    parser.add_argument(
        "--c-puct", type=float, default=1.25, help="PUCT exploration constant (--search puct)"
    )
    parser.add_argument(
        "--search",
        choices=("puct", "katago"),
        default="katago",
        help="katago (default: KataGo's PUCT on its utility, the win-loss value plus a "
        "score term, with its analysis engine's wide root noise) or puct (AlphaGo Zero's)",
    )
    parser.add_argument(
        "--no-score-utility",
        action="store_true",
        help="--search katago: search on the win-loss value alone",
    )
    parser.add_argument(
        "--no-root-symmetry-pruning",
        action="store_true",
        help="search every move at a symmetric position (by default, as KataGo's "
        "rootSymmetryPruning, one of each set of equivalent moves is searched and all "
        "are listed); a query's overrideSettings may set its own",
    )
    parser.add_argument(
        "--wide-root-noise",
        type=wide_root_noise,
        default=None,
        metavar="W",
        help="--search katago: KataGo's wideRootNoise, 0 to 5 (default 0.04, as KataGo's "
        "analysis engine: the visits spread over more moves; 0 searches as for play)",
    )
    parser.add_argument(
        "--pre-root-history",
        action="store_true",
        help="let the network see the moves played before each analysed position (KataGo's "
        "ignorePreRootHistory=false; by default, as KataGo's analysis engine, it sees only "
        "the moves searched from it)",
    )
    add_policy_optimism_arguments(parser)
    parser.add_argument("--seed", type=int, default=0, help="for random symmetries")
    parser.add_argument(
        "--replay-cache",
        type=non_negative,
        default=1024,
        metavar="N",
        help="games kept after their replay: a query that extends one replays only its new "
        "moves (default 1024; 0 keeps none)",
    )
    parser.add_argument(
        "--leaf-batch",
        type=positive,
        default=None,
        metavar="K",
        help="leaves of each search evaluated per network call, K descents of its tree under "
        "virtual loss (SearchConfig.leaf_batch; default 1 on a CPU, 8 on a GPU or TPU)",
    )
    parser.add_argument(
        "--nn-cache",
        type=non_negative,
        default=DEFAULT_NN_CACHE,
        metavar="LOG2",
        help="keep the network's evaluations of 2^LOG2 positions between searches (KataGo's "
        "nnCacheSizePowerOfTwo), so that a position analysed again is not evaluated again; "
        f"0 keeps none (default {DEFAULT_NN_CACHE})",
    )
    parser.add_argument(
        "--warm-up",
        type=boards,
        default=None,
        metavar="SIZE[:RULES],...|none",
        help="compile ahead, before the ready line, the search of a query of the default "
        "visits with ownership (KaTrain's) on these boards, e.g. 19:japanese,9 (rules: any "
        "KataGo name; default chinese), so that the first queries are answered within their "
        "maxTime; queries of fewer visits share it. Default: none, or with a KataGo -config "
        "19:japanese,9:japanese (KaTrain's boards; the config's gojaxWarmUp or "
        "maxBoardXSizeForNNBuffer may say otherwise); none: no warm-up",
    )
    parser.add_argument(
        "--max-tree-visits",
        type=positive,
        default=MAX_TREE_VISITS,
        metavar="N",
        help="the most root visits one search's tree holds (its nodes are allocated, one a "
        f"visit, when it is compiled; default {MAX_TREE_VISITS}): a query asking for more "
        "is searched until the tree is full, its maxTime is up or it is terminated",
    )
    flags = tuple(_FLAGS_OF_OPTIONS.values())
    parser.set_defaults(
        run=cmd_analysis, flag_defaults={flag: parser.get_default(flag) for flag in flags}
    )
