"""The ``gojax`` command: thin subcommands over library functions.

Each subcommand parses its flags and calls one library function that tests
call directly; errors in the user's input are reported in one line, never as
a traceback.

This module is the top layer (``gojax`` <- ``train`` <- ``eval`` <- the command
line): it gathers the subcommands the packages register, and no other module
imports it (``lint-imports`` checks). ``pyproject.toml`` installs its ``main``
as the ``gojax`` script; ``python -m eval.cli`` runs it from a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from eval.arguments import fraction, positive, symmetry_arg

EXIT_USAGE = 2
_python_format_warning = warnings.formatwarning


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A damaged results file as one line naming it (the user's to act on, not a
    place in our code); every other warning as Python prints it."""
    from gojax.atomic import DamagedFileWarning

    if issubclass(category, DamagedFileWarning):
        return f"gojax: warning: {message}\n"
    return _python_format_warning(message, category, filename, lineno, line)


def _enable_compilation_cache() -> None:
    """Keep compiled XLA programs between runs (a repeat run starts in seconds)."""
    import jax

    cache = os.environ.get("GOJAX_CACHE", str(Path.home() / ".cache" / "gojax" / "xla"))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


# ----------------------------------------------------------------------------
# gojax show


def cmd_show(args: argparse.Namespace) -> int:
    from gojax import area, render, score, sgf
    from gojax.games import result_string, state_at

    record = sgf.load(args.file)
    state = state_at(record, move=args.move, rules=args.rules)
    print(render.state_to_text(state))
    rules = state.rules.name
    if state.rules.territory:
        print(f"Rules {rules}; territory and prisoners, no points in seki")
    else:
        black, white = (int(x) for x in area(state))
        print(f"Rules {rules}; Tromp-Taylor area: Black {black}, White {white}")
    print(f"Score with komi: {result_string(float(score(state)))}")
    if record.result:
        print(f"Recorded result: {record.result}")
    if args.svg:
        title = f"{Path(args.file).name}, move {int(state.move_number)}"
        render.save_svg(render.state_to_svg(state, title=title), args.svg)
        print(f"Wrote {args.svg}")
    return 0


# ----------------------------------------------------------------------------
# gojax selfplay-random


def cmd_selfplay_random(args: argparse.Namespace) -> int:
    import numpy as np
    from tqdm import tqdm

    from gojax import render, sgf
    from gojax.games import play_random_games, record_from_actions, result_string

    bar = None

    def progress(finished: int, moves: int) -> None:
        nonlocal bar
        if bar is None:  # created after compilation, so its rate and ETA are honest
            bar = tqdm(total=args.games, unit="game", disable=args.quiet, dynamic_ncols=True)
        bar.update(finished - bar.n)
        bar.set_postfix(moves=moves, refresh=False)

    result = play_random_games(
        args.size,
        args.games,
        batch=args.batch,
        rules=args.rules,
        komi=args.komi,
        max_moves=args.max_moves,
        seed=args.seed,
        progress=progress,
    )
    if bar is not None:
        bar.close()
    n = result.games
    rows = [
        ("board", f"{result.size}x{result.size}, {result.rules}, komi {result.komi:g}"),
        ("games", f"{n} in {result.seconds:.2f} s ({result.games_per_second:,.1f} games/s)"),
        ("moves", f"{result.moves:,} ({result.moves_per_second:,.0f} moves/s)"),
        ("mean game length", f"{result.mean_length:.1f} moves ({result.capped} hit the cap)"),
        ("Black wins", f"{result.black_wins} ({100 * result.black_wins / n:.1f}%)"),
        ("White wins", f"{result.white_wins} ({100 * result.white_wins / n:.1f}%)"),
        ("draws", f"{result.draws} ({100 * result.draws / n:.1f}%)"),
        ("mean margin (Black)", f"{float(np.mean(result.margins)):+.2f}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")

    def record_of(i: int) -> sgf.GameRecord:
        actions = result.actions[i][result.actions[i] >= 0]
        return record_from_actions(
            actions,
            size=result.size,
            komi=result.komi,
            rules=result.rules,
            result=result_string(float(result.margins[i])),
            player_black="random",
            player_white="random",
        )

    if args.svg:
        margin = float(result.margins[0])
        svg = render.board_to_svg(
            result.final_boards[0],
            size=result.size,
            title=f"random game 1: {result_string(margin)} ({int(result.lengths[0])} moves)",
        )
        render.save_svg(svg, args.svg)
        print(f"Wrote the final position of game 1 to {args.svg}")
    if args.sgf_dir:
        folder = Path(args.sgf_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            sgf.save(record_of(i), folder / f"random-{i:06d}.sgf")
        print(f"Wrote {n} SGF files to {folder}")
    if args.json:
        summary = {
            "size": result.size,
            "rules": result.rules,
            "komi": result.komi,
            "games": n,
            "batch": min(args.batch, n),
            "seconds": result.seconds,
            "games_per_second": result.games_per_second,
            "moves_per_second": result.moves_per_second,
            "mean_length": result.mean_length,
            "black_wins": result.black_wins,
            "white_wins": result.white_wins,
            "draws": result.draws,
        }
        _write_text_atomic(args.json, json.dumps(summary, indent=2) + "\n")
    return 0


# ----------------------------------------------------------------------------
# gojax verify-rules


def cmd_verify_rules(args: argparse.Namespace) -> int:
    from gojax.verify import verify_rules_file

    failures = 0

    def report(check) -> None:
        nonlocal failures
        status = "ok" if not check.disagreements else f"{len(check.disagreements)} DISAGREEMENTS"
        print(
            f"game {check.game_id} (line {check.index}): {check.size}x{check.size} "
            f"{check.rules}, {check.num_moves} moves: {status}; "
            f"Tromp-Taylor B {check.black_area} W {check.white_area} komi {check.komi:g} "
            f"→ {'B' if check.margin > 0 else 'W' if check.margin < 0 else 'draw'}"
            f"{'+' + format(abs(check.margin), 'g') if check.margin else ''}",
            flush=True,
        )
        for problem in check.disagreements:
            print(f"    {problem}")
        failures += len(check.disagreements)

    checks = verify_rules_file(args.file, report)
    plies = sum(check.num_moves for check in checks)
    print(f"{len(checks)} games, {plies} plies checked: {failures} disagreements")
    return 1 if failures else 0


# ----------------------------------------------------------------------------
# gojax analyze / verify-net


def cmd_analyze(args: argparse.Namespace) -> int:
    import jax
    import numpy as np

    from eval.players import policy_optimism
    from gojax import action_to_gtp, render, sgf
    from gojax.evaluate import make_evaluator
    from gojax.games import state_at
    from gojax.katago_model import load_model

    record = sgf.load(args.file)
    state = state_at(record, move=args.move, rules=args.rules)
    model = load_model(args.model)
    # The position is a root: KataGo's kata-raw-nn and searches use the root's optimism.
    optimism, _ = policy_optimism(model, args.policy_optimism)
    run = make_evaluator(model, symmetry=args.symmetry, policy_optimism=optimism)
    batch = jax.tree.map(lambda x: x[None], state)
    outputs = run(model.variables, batch, key=jax.random.key(args.seed))
    out = {k: np.asarray(v[0]) for k, v in outputs.items()}

    size = state.size
    to_play = "Black" if int(state.to_play) == 1 else "White"
    black_win = float(out["white_loss"])
    lead = float(out["white_lead"])
    leader = f"W+{lead:.1f}" if lead > 0 else f"B+{-lead:.1f}"
    print(render.state_to_text(state))
    print(
        f"{model.name} (v{model.version}), symmetry {args.symmetry}"
        f"{f', policy optimism {optimism:g}' if optimism else ''}; "
        f"{state.rules.name} rules, komi {float(state.komi):g}, {to_play} to play"
    )
    print(f"Black win rate {100 * black_win:.1f}%, White {100 * float(out['white_win']):.1f}%")
    print(f"Score lead {leader} (stdev {float(out['score_stdev']):.1f})")
    policy = out["policy"]
    top = np.argsort(-policy)[: args.top]
    moves = ", ".join(f"{action_to_gtp(int(a), size)} {100 * policy[a]:.1f}%" for a in top)
    print(f"Top policy moves: {moves}")
    if args.svg:
        title = f"{Path(args.file).name}, move {int(state.move_number)}"
        ownership = -out["white_ownership"]  # the picture's convention: +1 = Black owns
        render.save_svg(
            render.state_to_svg(
                state, heatmap=ownership, heatmap_kind="ownership", title=f"{title}: ownership"
            ),
            args.svg,
        )
        policy_svg = Path(args.svg).with_name(Path(args.svg).stem + "-policy.svg")
        render.save_svg(
            render.state_to_svg(
                state, heatmap=policy[:-1], heatmap_kind="policy", title=f"{title}: policy"
            ),
            policy_svg,
        )
        print(f"Wrote {args.svg} (ownership) and {policy_svg} (policy)")
    if args.json:
        summary = {
            "file": str(args.file),
            "move": int(state.move_number),
            "to_play": to_play[0],
            "model": model.name,
            "symmetry": args.symmetry,
            "policy_optimism": optimism,
            "black_win": black_win,
            "white_win": float(out["white_win"]),
            "white_lead": lead,
            "score_stdev": float(out["score_stdev"]),
            "policy": {action_to_gtp(int(a), size): float(policy[a]) for a in top},
            "white_ownership": [round(float(x), 6) for x in out["white_ownership"]],
        }
        _write_text_atomic(args.json, json.dumps(summary, indent=2) + "\n")
    return 0


def cmd_verify_net(args: argparse.Namespace) -> int:
    from gojax.katago_model import load_model
    from gojax.verify import verify_net_file

    model = load_model(args.model)
    print(f"{model.name}: KataGo model version {model.version}, {model.num_params():,} parameters")

    def report(done: int, total: int) -> None:
        print(f"  evaluated {done}/{total} positions", flush=True)

    check = verify_net_file(
        model,
        args.file,
        symmetry=args.symmetry,
        policy_optimism=args.policy_optimism,
        report=report,
    )
    optimism = f", policy optimism {args.policy_optimism:g}" if args.policy_optimism else ""
    print(f"{check.num_positions} positions at symmetry {args.symmetry}{optimism}")
    print(f"{'output':<22}{'max |diff|':>12}{'tolerance':>11}  where (ours vs KataGo)")
    for worst in check.worst.values():
        where = worst.position + (f" {worst.point}" if worst.point else "")
        flag = "" if worst.ok else "  FAIL"
        print(
            f"{worst.output:<22}{worst.difference:>12.3g}{worst.tolerance:>11.3g}  "
            f"{where} ({worst.ours:.6g} vs {worst.theirs:.6g}){flag}"
        )
    print(f"legal sets: {len(check.legal_disagreements)} disagreements")
    for problem in check.legal_disagreements:
        print(f"    {problem}")
    print("OK" if check.ok else "FAILED: differences beyond tolerance")
    return 0 if check.ok else 1


# ----------------------------------------------------------------------------


def _write_text_atomic(path: str | os.PathLike, text: str) -> None:
    import tempfile

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_parser() -> argparse.ArgumentParser:
    from gojax import RULE_PRESETS

    parser = argparse.ArgumentParser(
        prog="gojax", description="Go in JAX: exact batched rules, search, training, evaluation."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    show = commands.add_parser("show", help="print (and draw) a position from an SGF file")
    show.add_argument("file", help="an SGF file")
    show.add_argument("--move", type=int, help="show the position after this many moves")
    show.add_argument("--svg", help="also write the position as an SVG picture")
    show.add_argument("--rules", choices=sorted(RULE_PRESETS), help="override the SGF's RU[]")
    show.set_defaults(run=cmd_show)

    random_play = commands.add_parser(
        "selfplay-random", help="play batched random games and report speed and results"
    )
    random_play.add_argument("--size", type=int, default=9, help="board side (2..25)")
    random_play.add_argument("--games", type=positive, default=1000)
    random_play.add_argument("--batch", type=positive, default=256, help="games played at once")
    random_play.add_argument("--rules", choices=sorted(RULE_PRESETS), default="tromp-taylor")
    random_play.add_argument("--komi", type=float, default=7.5)
    random_play.add_argument("--max-moves", type=positive, help="move cap (default 2*size^2)")
    random_play.add_argument("--seed", type=int, default=0)
    random_play.add_argument("--svg", help="write the final position of the first game here")
    random_play.add_argument("--sgf-dir", help="write every game as SGF into this folder")
    random_play.add_argument("--json", help="write the summary as JSON here")
    random_play.add_argument("--quiet", action="store_true", help="no progress bar")
    random_play.set_defaults(run=cmd_selfplay_random)

    verify = commands.add_parser(
        "verify-rules", help="replay recorded games and compare legality with the record"
    )
    verify.add_argument("file", help="JSON lines: size, komi, rules, moves, illegal_empty, ...")
    verify.set_defaults(run=cmd_verify_rules)

    analyze = commands.add_parser(
        "analyze", help="evaluate a position of an SGF file with a KataGo network"
    )
    analyze.add_argument("file", help="an SGF file")
    analyze.add_argument("--model", required=True, help="a KataGo model file (.bin.gz)")
    analyze.add_argument("--move", type=int, help="the position after this many moves")
    analyze.add_argument("--rules", choices=sorted(RULE_PRESETS), help="override the SGF's RU[]")
    analyze.add_argument(
        "--symmetry",
        type=symmetry_arg,
        default="average",
        help="0..7, random or average (default: the average of all 8)",
    )
    analyze.add_argument("--seed", type=int, default=0, help="for --symmetry random")
    analyze.add_argument(
        "--policy-optimism",
        type=fraction,
        default=None,
        help="mix of the optimistic policy of model versions >= 12 into the policy "
        "(default: KataGo's 0.2 at a root, as its kata-raw-nn, for such nets; 0 for others)",
    )
    analyze.add_argument("--top", type=positive, default=5, help="policy moves to list")
    analyze.add_argument("--svg", help="write an ownership map here (and a policy map beside it)")
    analyze.add_argument("--json", help="write the numbers as JSON here")
    analyze.set_defaults(run=cmd_analyze)

    verify_net = commands.add_parser(
        "verify-net", help="compare a network's outputs with KataGo's on recorded positions"
    )
    verify_net.add_argument("file", help="JSON lines: size, komi, rules, moves, katago{...}")
    verify_net.add_argument("--model", required=True, help="a KataGo model file (.bin.gz)")
    verify_net.add_argument("--symmetry", type=int, choices=range(8), default=0)
    verify_net.add_argument(
        "--policy-optimism",
        type=fraction,
        default=0.0,
        help="mix in the optimistic policy of model versions >= 12 as KataGo's kata-raw-nn "
        "OPTIMISM does (its GTP default is 0.2); default 0",
    )
    verify_net.set_defaults(run=cmd_verify_net)
    from eval.match import register as register_match

    register_match(commands)
    from eval.recount import register as register_recount

    register_recount(commands)
    from eval.gtp import register as register_gtp

    register_gtp(commands)
    from train.cli import register as register_train
    from train.cli import (
        register_balance,
        register_pg,
        register_rollout,
        register_sl,
        register_snapshot,
        register_value,
    )

    register_train(commands)
    register_sl(commands)
    register_pg(commands)
    register_value(commands)
    register_rollout(commands)
    register_balance(commands)
    register_snapshot(commands)
    from train.export import register as register_export

    register_export(commands)
    from eval.value_mse import register as register_value_mse

    register_value_mse(commands)
    from eval.analysis import register as register_analysis

    register_analysis(commands)
    from eval.sweep import register as register_sweep

    register_sweep(commands)
    from eval.report import register as register_report

    register_report(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    warnings.formatwarning = _format_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    from gojax.sgf import SGFError

    _enable_compilation_cache()
    try:
        return args.run(args)
    except (SGFError, ValueError, OSError) as err:
        print(f"gojax {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except FloatingPointError as err:  # a run that diverged: its checkpoints stay finite
        print(f"gojax {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gojax {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
