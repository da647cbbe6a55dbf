"""How well do evaluators predict the outcome? AlphaGo's Fig. 2b on finished games.

Silver et al. (2016), "Mastering the game of Go with deep neural networks and
tree search", Fig. 2b: the mean squared error between an evaluator's
prediction ``v`` in [-1, 1] and the game's final outcome ``z`` in {-1, +1},
over positions of finished games, grouped by move number. Here the
evaluators are

* a value network (a KataGo net: ``white_win - white_loss`` turned to the
  player to move, one forward pass);
* the mean outcome of ``N`` random rollouts from the position, for several
  ``N`` (uniform over legal moves that do not fill one of the mover's own
  single-point eyes, played to two passes or the move cap, scored by the
  game's rules' area count: ``gojax.uct.random_rollout``);
* with ``rollout_policy``, the same ``N`` rollouts played by AlphaGo's fast
  rollout policy (``gojax.rollout_policy``, fitted by ``gojax train-rollout``);
* AlphaGo's mix ``(1 - lam) * v + lam * rollouts`` with the largest ``N``
  (the fast policy's rollouts when there are any, as AlphaGo mixed them).

Everything is seen from the player to move in the position, so the
prediction and the outcome flip sign together.

Positions: games are read from a folder of SGF files, rules and komi from
each file. A game is used when its ``RE[]`` is a score (``B+3.5``), or when
it ended otherwise (resignation, time) and the area count of its final
position names the same winner; the outcome ``z`` is the recorded winner.
Draws, games without a result, and games with setup stones after the start,
out-of-turn or illegal moves are skipped and counted. From each game,
``positions_per_game`` positions are drawn in every move-number bucket the
game reaches: bucket ``k`` holds the positions after ``k * width`` to
``(k + 1) * width - 1`` moves (AlphaGo drew one position per game, so that
the positions are independent).

Reading the games, drawing and replaying the positions, the rollouts and
the error statistics are ``train.positions``' (value training uses them too);
this module runs the comparison, and writes, reads and draws its results.

The ``N`` values share their rollouts: every position gets ``max(N)``
rollouts and the estimate for a smaller ``N`` is the mean of its first
``N``. Each column is an unbiased estimate of its own error; the columns
are correlated with each other.

>>> result = run_value_mse(ValueMSEConfig(model="b6c96.bin.gz", sgf_dir="games"))  # doctest: +SKIP
>>> print(format_table(result))                                                 # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from eval.arguments import positive, symmetry_arg
from gojax.atomic import atomic_file, write_atomic
from train.positions import (
    Game,
    group_games,
    load_games,
    mse_by_bucket,
    replay_positions,
    rollout_outcomes,
    sample_positions,
    value_estimates,
)

__all__ = [
    "Game",
    "ValueMSEConfig",
    "ValueMSEResult",
    "bucket_label",
    "bucket_of",
    "format_table",
    "load_games",
    "load_json",
    "mse_by_bucket",
    "register",
    "rollout_outcomes",
    "run_value_mse",
    "sample_positions",
    "save_json",
    "save_plot",
]

# ---------------------------------------------------------------------------- buckets


def bucket_of(move_numbers: np.ndarray, width: int) -> np.ndarray:
    """``[M]`` bucket of each position, by the moves played before it.

    >>> bucket_of(np.array([0, 19, 20, 45]), 20).tolist()
    [0, 0, 1, 2]
    """
    return np.asarray(move_numbers) // width


def bucket_label(bucket: int, width: int) -> str:
    """The moves a bucket spans, as in the table: ``bucket_label(1, 20) == "20-39"``."""
    return f"{bucket * width}-{(bucket + 1) * width - 1}"


# ---------------------------------------------------------------------------- the run


@dataclasses.dataclass(frozen=True)
class ValueMSEConfig:
    """What to compare: a network, a folder of games, the rollout counts and the sampling."""

    model: str | os.PathLike  # KataGo model file
    sgf_dir: str | os.PathLike
    rollouts: tuple[int, ...] = (1, 4, 16, 64)  # N values; the mix uses the largest
    positions_per_game: int = 1  # positions drawn per game in each bucket
    max_games: int | None = None
    bucket_width: int = 20  # moves per bucket
    lam: float = 0.5  # the mix's weight on the rollouts (AlphaGo's lambda)
    symmetry: int | str = 0  # of the network evaluation: 0..7, "random" or "average"
    batch: int = 512  # rollout games (and network positions) evaluated at once
    seed: int = 0
    # A gojax.rollout_policy file: its rollouts join the comparison, and the mix uses them.
    rollout_policy: str | None = None

    def __post_init__(self):
        if not self.rollouts or min(self.rollouts) < 1:
            raise ValueError(f"rollout counts must be positive integers, not {self.rollouts}")
        if self.positions_per_game < 1 or self.bucket_width < 1 or self.batch < 1:
            raise ValueError("positions per game, bucket width and batch must be positive")
        if self.max_games is not None and self.max_games < 1:
            raise ValueError(f"max games must be positive, not {self.max_games}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lambda must be in [0, 1], not {self.lam}")


@dataclasses.dataclass
class ValueMSEResult:
    """The comparison's numbers (``stats`` as :func:`mse_by_bucket` returns them)."""

    config: ValueMSEConfig
    model_name: str
    evaluators: dict[str, str]  # key in ``stats`` -> column label
    stats: dict[str, Any]
    games: int
    skipped: dict[str, int]
    board_sizes: list[int]
    seconds: dict[str, float]  # wall time of each stage

    def to_json(self) -> dict[str, Any]:
        config = dataclasses.asdict(self.config)
        config["model"], config["sgf_dir"] = str(config["model"]), str(config["sgf_dir"])
        config["rollouts"] = list(config["rollouts"])
        return {
            "config": config,
            "model": self.model_name,
            "games": self.games,
            "skipped": self.skipped,
            "board_sizes": self.board_sizes,
            "evaluators": self.evaluators,
            "bucket_labels": [
                bucket_label(b, self.config.bucket_width) for b in self.stats["buckets"]
            ],
            **self.stats,
            "seconds": self.seconds,
            "platform": jax.default_backend(),
        }


def run_value_mse(config: ValueMSEConfig, *, show_progress: bool = False) -> ValueMSEResult:
    """Load the games, draw positions, evaluate them every way, and compare with the outcomes.

    Raises ValueError (one line) for a missing folder, no usable games or a
    bad model file.
    """
    from gojax.evaluate import make_evaluator
    from gojax.katago_model import load_model

    weights = None
    if config.rollout_policy:  # before the slow part: a bad file fails at once
        from gojax.rollout_policy import load as load_rollout_policy

        weights = load_rollout_policy(config.rollout_policy)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()
    games, skipped = load_games(config.sgf_dir, max_games=config.max_games)
    if not games:
        reasons = ", ".join(f"{n} {why}" for why, n in skipped.most_common())
        raise ValueError(f"{config.sgf_dir}: no usable games ({reasons})")
    model = load_model(config.model)
    seconds["load"] = time.perf_counter() - clock

    rng = np.random.default_rng(config.seed)
    key = jax.random.key(config.seed)
    run = make_evaluator(model, symmetry=config.symmetry)
    variables = jax.device_put(model.variables)  # once, not at every call
    n_max = max(config.rollouts)
    game_of, move_of = sample_positions(
        [g.length for g in games],
        width=config.bucket_width,
        per_game=config.positions_per_game,
        rng=rng,
    )
    values = np.zeros(game_of.size, np.float32)
    outcomes = np.zeros((game_of.size, n_max), np.int8)
    policy_outcomes = np.zeros((game_of.size, n_max), np.int8)
    truth = np.zeros(game_of.size, np.int8)  # z for the player to move
    for (size, _), members in group_games(games).items():
        group = [games[i] for i in members]
        local = {g: j for j, g in enumerate(members)}
        picks = np.flatnonzero(np.isin(game_of, members))
        picks = picks[np.argsort(move_of[picks], kind="stable")]  # similar rollout lengths
        board = f"{size}x{size}"
        clock = time.perf_counter()
        states = replay_positions(
            group, [local[g] for g in game_of[picks]], move_of[picks], config.batch
        )
        seconds["positions"] = seconds.get("positions", 0.0) + time.perf_counter() - clock
        movers = np.asarray(states.to_play).astype(np.int8)
        truth[picks] = np.asarray([games[g].outcome for g in game_of[picks]], np.int8) * movers

        clock = time.perf_counter()
        key, key_net, key_rollouts = jax.random.split(key, 3)
        with _progress(show_progress, picks.size, f"value net {board}", "position") as progress:
            values[picks] = value_estimates(
                run, variables, states, key_net, batch=config.batch, progress=progress
            )
        seconds["value_net"] = seconds.get("value_net", 0.0) + time.perf_counter() - clock
        clock = time.perf_counter()
        with _progress(show_progress, picks.size * n_max, f"rollouts {board}", "game") as progress:
            outcomes[picks] = rollout_outcomes(
                states, key_rollouts, n_max, batch=config.batch, progress=progress
            )
        seconds["rollouts"] = seconds.get("rollouts", 0.0) + time.perf_counter() - clock
        if weights is None:
            continue
        clock = time.perf_counter()
        desc = f"fast policy rollouts {board}"
        with _progress(show_progress, picks.size * n_max, desc, "game") as progress:
            policy_outcomes[picks] = rollout_outcomes(
                states,
                jax.random.fold_in(key_rollouts, 1),
                n_max,
                batch=config.batch,
                progress=progress,
                weights=weights,
            )
        elapsed = time.perf_counter() - clock
        seconds["policy_rollouts"] = seconds.get("policy_rollouts", 0.0) + elapsed

    predictions = {"value": values}
    labels = {"value": "value net"}
    for n in sorted(set(config.rollouts)):
        predictions[f"rollouts_{n}"] = outcomes[:, :n].mean(axis=1, dtype=np.float64)
        labels[f"rollouts_{n}"] = f"rollouts x{n}"
    mixed = f"rollouts_{n_max}"
    if weights is not None:
        for n in sorted(set(config.rollouts)):
            mean = policy_outcomes[:, :n].mean(axis=1, dtype=np.float64)
            predictions[f"policy_rollouts_{n}"] = mean
            labels[f"policy_rollouts_{n}"] = f"fast policy x{n}"
        mixed = f"policy_rollouts_{n_max}"
    mix = (1.0 - config.lam) * values + config.lam * predictions[mixed]
    predictions["mix"] = mix
    source = "fast policy " if weights is not None else ""
    labels["mix"] = f"mix λ={config.lam:g} ({source}x{n_max})"
    stats = mse_by_bucket(predictions, truth, bucket_of(move_of, config.bucket_width))
    return ValueMSEResult(
        config=config,
        model_name=model.name,
        evaluators=labels,
        stats=stats,
        games=len(games),
        skipped=dict(skipped),
        board_sizes=sorted({g.size for g in games}),
        seconds=seconds,
    )


@contextlib.contextmanager
def _progress(enabled: bool, total: int, desc: str, unit: str) -> Iterator[Any]:
    """A ``progress(done)`` callback drawing a tqdm bar (``None`` when not ``enabled``).

    The bar appears after the first chunk, so that compile time stays out of its rate.
    """
    bar = None

    def update(done: int) -> None:
        nonlocal bar
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)
        bar.update(done - bar.n)

    try:
        yield update if enabled else None
    finally:
        if bar is not None:
            bar.close()


# ---------------------------------------------------------------------------- output


def format_table(result: ValueMSEResult) -> str:
    """The result as a text table: a row per bucket and an overall row, a column per evaluator."""
    stats = result.stats
    width = result.config.bucket_width
    names = list(result.evaluators)
    headers = ["moves", "positions"] + [result.evaluators[n] for n in names]
    rows = [
        [bucket_label(b, width), str(c)] + [f"{stats['mse'][n][i]:.3f}" for n in names]
        for i, (b, c) in enumerate(zip(stats["buckets"], stats["count"], strict=True))
    ]
    overall = [f"{stats['overall'][n]:.3f}" for n in names]
    rows.append(["all", str(stats["overall_count"])] + overall)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def save_json(result: ValueMSEResult, path: str | os.PathLike) -> None:
    """Write ``result.to_json()`` to ``path`` atomically."""
    text = json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n"
    write_atomic(path, text)


_STATS_FIELDS = ("buckets", "count", "overall_count", "mse", "stderr", "overall", "overall_stderr")


def load_json(path: str | os.PathLike) -> ValueMSEResult:
    """The result that :func:`save_json` wrote to ``path`` (for tables and plots without a rerun).

    Raises ValueError, one line naming the file, if it is not valid JSON or
    not a complete value-mse result.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    try:
        config = dict(data["config"])
        config["rollouts"] = tuple(config["rollouts"])
        stats = {name: data[name] for name in _STATS_FIELDS}
        result = ValueMSEResult(
            config=ValueMSEConfig(**config),
            model_name=str(data["model"]),
            evaluators=dict(data["evaluators"]),
            stats=stats,
            games=int(data["games"]),
            skipped=dict(data["skipped"]),
            board_sizes=[int(s) for s in data["board_sizes"]],
            seconds=dict(data["seconds"]),
        )
    except KeyError as err:
        raise ValueError(f"{path}: not a value-mse result (no {err} field)") from None
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a value-mse result ({err})") from None
    buckets = len(stats["buckets"])
    for name in result.evaluators:
        columns = [stats["mse"].get(name), stats["stderr"].get(name)]
        if any(not isinstance(c, list) or len(c) != buckets for c in columns) or not isinstance(
            stats["overall"].get(name), int | float
        ):
            raise ValueError(f"{path}: evaluator {name!r} lacks a number for every bucket")
    if len(stats["count"]) != buckets:
        raise ValueError(f"{path}: {len(stats['count'])} counts for {buckets} buckets")
    return result


def save_plot(result: ValueMSEResult, path: str | os.PathLike, *, min_positions: int = 1) -> None:
    """Plot MSE against move number, a line per evaluator (as the paper's Fig. 2b), as PNG.

    Buckets with fewer than ``min_positions`` positions are left out of the
    plot (a handful of long games makes their points noise).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = result.stats
    width = result.config.bucket_width
    shown = [i for i, c in enumerate(stats["count"]) if c >= min_positions]
    if not shown:
        raise ValueError(f"no bucket has {min_positions} positions to plot")
    x = np.arange(len(shown))
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {"value": {"color": "tab:red", "marker": "o", "linewidth": 2.5}}
    styles["mix"] = {"color": "tab:purple", "marker": "s", "linewidth": 2.0, "linestyle": "--"}
    # Random rollouts in blues, fast-policy rollouts in greens, darker for more of them.
    for prefix, colours in (("rollouts_", plt.cm.Blues), ("policy_rollouts_", plt.cm.Greens)):
        keys = [k for k in result.evaluators if k.startswith(prefix)]
        for key, shade in zip(keys, colours(np.linspace(0.35, 0.95, len(keys))), strict=True):
            styles[key] = {"color": shade, "marker": ".", "linewidth": 1.5}
    for key, label in result.evaluators.items():
        ax.plot(x, [stats["mse"][key][i] for i in shown], label=label, **styles[key])
    ax.set_xticks(x, [bucket_label(stats["buckets"][i], width) for i in shown], rotation=45)
    ax.set_xlabel("move number (moves played before the position)")
    ax.set_ylabel("mean squared error against the outcome")
    sizes = "/".join(f"{s}x{s}" for s in result.board_sizes)
    ax.set_title(
        f"{result.model_name}\nvalue net vs rollouts: {result.games} {sizes} games, "
        f"{stats['overall_count']} positions",
        fontsize=11,
    )
    # Predicting 0 (a coin flip) everywhere scores exactly 1: the line to get under.
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1, label="always 0")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    with atomic_file(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------- command line


def _counts_arg(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,4,16, not {text!r}")
    return counts


def cmd_value_mse(args: argparse.Namespace) -> int:
    config = ValueMSEConfig(
        model=args.model,
        sgf_dir=args.sgf_dir,
        rollouts=args.rollouts,
        positions_per_game=args.positions_per_game,
        max_games=args.max_games,
        bucket_width=args.bucket_width,
        lam=args.lam,
        symmetry=args.symmetry,
        batch=args.batch,
        seed=args.seed,
        rollout_policy=args.rollout_policy,
    )
    result = run_value_mse(config, show_progress=not args.quiet)
    skipped = ", ".join(f"{n} {why}" for why, n in result.skipped.items()) or "none"
    print(
        f"{result.games} games ({skipped} skipped), {result.stats['overall_count']} positions; "
        f"{result.model_name}, symmetry {config.symmetry}; "
        f"{max(config.rollouts)} rollouts per position"
    )
    print(format_table(result))
    timing = ", ".join(f"{stage} {s:.1f} s" for stage, s in result.seconds.items())
    print(f"time: {timing}")
    if args.out:
        save_plot(result, args.out, min_positions=args.min_positions)
        print(f"Wrote {args.out}")
    if args.json:
        save_json(result, args.json)
        print(f"Wrote {args.json}")
    return 0


def register(commands) -> None:
    """Add ``gojax value-mse`` to the subcommands of the ``gojax`` parser."""
    parser = commands.add_parser(
        "value-mse",
        help="AlphaGo's Fig. 2b: value net vs rollouts (random or a fast rollout policy) as "
        "predictors of the outcome",
    )
    parser.add_argument("--model", required=True, metavar="M", help="a KataGo model file (.bin.gz)")
    parser.add_argument(
        "--sgf-dir", required=True, metavar="DIR", help="a folder of finished games (*.sgf)"
    )
    parser.add_argument(
        "--rollouts",
        type=_counts_arg,
        default=(1, 4, 16, 64),
        metavar="N,N,...",
        help="rollouts per position to compare (default 1,4,16,64; the mix uses the largest)",
    )
    parser.add_argument(
        "--positions-per-game",
        type=positive,
        metavar="K",
        default=1,
        help="positions drawn from each game in each move-number bucket (default 1)",
    )
    parser.add_argument(
        "--max-games", type=positive, metavar="G", help="use the first G usable games"
    )
    parser.add_argument(
        "--bucket-width",
        type=positive,
        default=20,
        metavar="W",
        help="moves per bucket (default 20)",
    )
    parser.add_argument(
        "--lam", type=float, default=0.5, help="the mix's weight on rollouts (default 0.5)"
    )
    parser.add_argument(
        "--symmetry",
        type=symmetry_arg,
        default=0,
        metavar="S",
        help="of the network evaluation: 0..7, random or average (default 0: one pass)",
    )
    parser.add_argument(
        "--batch",
        type=positive,
        default=512,
        metavar="B",
        help="games simulated at once (default 512)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rollout-policy",
        metavar="NPZ",
        help="also play the rollouts with this fast rollout policy (gojax train-rollout's "
        "rollout_policy.npz); the mix then uses them",
    )
    parser.add_argument("--out", metavar="PNG", help="write the plot here")
    parser.add_argument(
        "--min-positions",
        type=positive,
        metavar="COUNT",
        default=10,
        help="leave buckets with fewer positions out of the plot (default 10)",
    )
    parser.add_argument("--json", metavar="OUT.json", help="write the numbers as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=cmd_value_mse)
