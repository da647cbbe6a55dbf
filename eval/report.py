"""``gojax report``: regenerate the tables and plots of the docs from recorded results.

Recorded results live in one folder (``results/`` by default), one entry per
result, its kind known from its name:

=============================  ============  ===========================================
entry                          kind          plots (in the figures folder)
=============================  ============  ===========================================
``value_mse*.json``            value-mse     ``<name>.png``
``bench_*.json``               bench         none
``<name>/results.json``        sweep         ``<name>_win_rate_vs_simulations.png``,
                                             ``<name>_ratings.png``,
                                             ``<name>_elo_vs_step.png``,
                                             ``<name>_elo_vs_compute.png``
``<name>/metrics.jsonl``       training run  ``<name>_learning_curve.png``
``<name>/*/metrics.jsonl``     runs          ``<name>_curves.png``
``<name>/*/match.json``        strength      ``<name>.png``
``<name>/<run>/``              alphago-sl,   ``<name>.png``
                               -pg, -value,
                               -rollout,
                               -balance
=============================  ============  ===========================================

The last are folders of runs of one of AlphaGo's training stages
(``eval.report_alphago``). Each other kind has its renderer in a module of its own
(``eval._report_value_mse``, ``_report_sweep``, ``_report_training``,
``_report_strength``); the tables' cells, the results folder and the marker
blocks are ``eval._report_markdown``, ``_report_results`` and ``_report_blocks``.
This module ties them together: ``generate_report`` and the command line.

``<name>`` is the file's stem or the folder's name. Each result is rendered as
markdown with the functions that made it in the first place (the value-mse
comparison's numbers and plot, the training loop's learning curve, the
sweep's plots and ratings) and written between the markers
``<!-- report:<name> -->`` and ``<!-- /report:<name> -->`` of every markdown
file that has them; text outside the markers is left alone. A marker is
recognised alone on its line and outside fenced code blocks.

``--check`` writes nothing: it says which blocks would change (and which
plots are missing) and exits 1 if any. Plots are not compared byte for byte
(PNG bytes change with matplotlib's version and fonts); their tables are.

>>> report = generate_report("results", ["BENCHMARKS.md"], "docs/figures")  # doctest: +SKIP
>>> report.ok                                                               # doctest: +SKIP
True
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

# The pieces, re-exported: eval.report stays the one place to import them from.
from eval._report_blocks import _block_text, _blocks, replace_blocks  # noqa: F401
from eval._report_markdown import format_number, markdown_table
from eval._report_results import Rendered, ResultEntry, find_results
from eval._report_strength import _render_strength
from eval._report_sweep import _elo_text, _render_sweep  # noqa: F401
from eval._report_training import (  # noqa: F401
    RUNS_CURVES,
    TRAINING_ROWS,
    _render_runs,
    _render_training,
)
from eval._report_value_mse import (  # noqa: F401
    VALUE_MSE_MIN_POSITIONS,
    _render_bench,
    _render_value_mse,
    bench_markdown,
)
from eval.report_papers import BLOCK as PAPERS_BLOCK
from eval.report_papers import render_papers
from gojax.atomic import write_atomic

__all__ = [
    "Rendered",
    "Report",
    "ResultEntry",
    "bench_markdown",
    "find_results",
    "format_number",
    "generate_report",
    "markdown_table",
    "register",
    "render_result",
    "replace_blocks",
]


def render_result(entry: ResultEntry) -> Rendered:
    """Render one result. Raises ValueError, one line naming the file, if it is unreadable."""
    from eval.report_alphago import STAGES

    render = {
        "value-mse": _render_value_mse,
        "bench": _render_bench,
        "sweep": _render_sweep,
        "training": _render_training,
        "strength": _render_strength,
        "runs": _render_runs,
        **{f"alphago-{stage}": _render_alphago for stage in STAGES},
    }[entry.kind]
    try:
        return render(entry)
    except (KeyError, TypeError, AttributeError, IndexError) as err:
        # A file of the right name and valid JSON, but not holding what its kind holds.
        what = f"no {err} field" if isinstance(err, KeyError) else str(err)
        raise ValueError(f"{entry.path}: not a {entry.kind} result ({what})") from None


def _render_alphago(entry: ResultEntry) -> Rendered:
    from eval.report_alphago import render

    markdown, plots = render(entry.kind.removeprefix("alphago-"), entry.name, entry.path)
    return Rendered(entry, markdown, plots)


# ---------------------------------------------------------------------------- the report


@dataclasses.dataclass
class Report:
    """What ``generate_report`` did (or, with ``check``, would do): one line per item."""

    updated: list[str] = dataclasses.field(default_factory=list)
    unchanged: list[str] = dataclasses.field(default_factory=list)
    stale: list[str] = dataclasses.field(default_factory=list)  # --check: what would change
    warnings: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.stale


def _draw(plots: dict[str, Callable[[Path], None]], figures: Path, report: Report) -> None:
    """Draw each plot beside its target; replace the target only if the bytes differ."""
    figures.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=figures, prefix=".report.") as scratch:
        for name, draw in plots.items():
            target, fresh = figures / name, Path(scratch) / name
            draw(fresh)
            if target.is_file() and target.read_bytes() == fresh.read_bytes():
                report.unchanged.append(str(target))
            else:
                os.replace(fresh, target)  # same folder, so atomic
                report.updated.append(str(target))


def generate_report(
    results: str | os.PathLike,
    markdown_files: Sequence[str | os.PathLike],
    figures: str | os.PathLike,
    *,
    check: bool = False,
    claims: str | os.PathLike | None = None,
) -> Report:
    """Render every result in ``results`` into the marker blocks of ``markdown_files`` and
    draw its plots into ``figures``; with ``check``, write nothing and list what is stale.

    With ``claims`` (``docs/papers/claims.json``), the index of the papers we
    reproduce (``eval.report_papers``) fills the block ``report:papers``, its
    numbers read from ``results``.

    A result that cannot be read is an error (named in ``report.errors``); its
    blocks are left as they are and the others still render. Raises
    ValueError if ``results`` is not a folder or a markdown file is missing.
    """
    report = Report()
    entries, report.warnings = find_results(results)
    figures = Path(figures)
    rendered: dict[str, Rendered] = {}
    for entry in entries:
        try:
            rendered[entry.name] = render_result(entry)
        except (ValueError, OSError) as err:
            text = str(err)
            report.errors.append(text if str(entry.path) in text else f"{entry.path}: {text}")
    contents = {name: r.markdown for name, r in rendered.items()}
    failed = {e.name for e in entries} - set(rendered)
    if claims is not None:
        _render_papers(claims, results, contents, failed, report)

    seen: set[str] = set()
    for file in map(Path, markdown_files):
        if not file.is_file():
            raise ValueError(f"{file}: no such file")
        old = file.read_text(encoding="utf-8")
        try:
            new, names = replace_blocks(old, contents, where=str(file))
        except ValueError as err:
            report.errors.append(str(err))
            continue
        seen.update(names)
        for name in dict.fromkeys(names):
            if name not in contents and name not in failed:
                report.warnings.append(f"{file}: block report:{name} has no result in {results}")
        changed = [n for n in dict.fromkeys(names) if n in contents]
        if new == old:
            if changed:
                report.unchanged.append(f"{file} ({', '.join(changed)})")
        elif check:
            stale = [n for n in changed if _block_text(old, n, file) != _block_text(new, n, file)]
            report.stale.append(f"{file}: block(s) {', '.join(stale)} out of date")
        else:
            write_atomic(file, new.encode("utf-8"))
            report.updated.append(f"{file} ({', '.join(changed)})")

    if claims is not None and PAPERS_BLOCK not in seen:
        where = ", ".join(str(f) for f in markdown_files)
        report.warnings.append(f"{claims}: no <!-- report:{PAPERS_BLOCK} --> marker in {where}")
    for name, result in rendered.items():
        if name not in seen:
            where = ", ".join(str(f) for f in markdown_files)
            report.warnings.append(
                f"{result.entry.path}: no <!-- report:{name} --> marker in {where}"
            )
        if check:
            for plot in result.plots:
                if not (figures / plot).is_file():
                    report.stale.append(f"{figures / plot}: plot missing")
        else:
            try:
                _draw(result.plots, figures, report)
            except (ValueError, OSError) as err:
                report.errors.append(f"{result.entry.path}: plot failed ({err})")
    return report


def _render_papers(claims, results, contents: dict[str, str], failed: set[str], report) -> None:
    """The papers' index into ``contents``; its block is left as it is if it cannot render."""
    if PAPERS_BLOCK in contents:
        report.errors.append(f"{results}: a result named {PAPERS_BLOCK!r} takes the index's block")
        return
    try:
        index = render_papers(claims, results)
    except (ValueError, OSError) as err:
        report.errors.append(str(err))
        failed.add(PAPERS_BLOCK)
        return
    contents[PAPERS_BLOCK] = index.markdown
    report.warnings += index.warnings
    report.errors += index.errors


# ---------------------------------------------------------------------------- command line


def cmd_report(args: argparse.Namespace) -> int:
    import sys

    markdown = [Path(args.benchmarks)]
    # docs/ with its subfolders (docs/papers/); models/ alone.
    for folder, pattern in ((Path(args.docs), "**/*.md"), (Path(args.models), "*.md")):
        if folder.is_dir():
            markdown += sorted(
                p for p in folder.glob(pattern) if p.resolve() != markdown[0].resolve()
            )
    claims = Path(args.claims) if args.claims else Path(args.docs) / "papers" / "claims.json"
    if args.claims is None and not claims.is_file():
        claims = None  # a docs folder without the papers' index
    report = generate_report(args.results, markdown, args.figures, check=args.check, claims=claims)
    for line in report.updated:
        print(f"updated {line}")
    for line in report.unchanged:
        print(f"unchanged {line}")
    for line in report.stale:
        print(f"stale: {line}")
    for line in report.warnings:
        print(f"warning: {line}")
    for line in report.errors:
        print(f"gojax report: error: {line}", file=sys.stderr)
    if report.stale:
        print(f"{len(report.stale)} out of date: run `gojax report` and commit the result")
    return 0 if report.ok else 1


def register(commands) -> None:
    """Add ``gojax report`` to the subcommands of the ``gojax`` parser."""
    parser = commands.add_parser(
        "report",
        help="regenerate the tables and plots of BENCHMARKS.md and docs/ from results/",
        description="Renders every recorded result into the <!-- report:NAME --> blocks of "
        "the markdown files and draws its plots.",
    )
    parser.add_argument("--results", default="results", help="the recorded results (results/)")
    parser.add_argument(
        "--benchmarks", default="BENCHMARKS.md", help="a markdown file with blocks (BENCHMARKS.md)"
    )
    parser.add_argument(
        "--docs", default="docs", help="a folder whose *.md files may hold blocks too (docs/)"
    )
    parser.add_argument(
        "--models", default="models", help="the shipped nets' folder, whose *.md too (models/)"
    )
    parser.add_argument("--figures", default="docs/figures", help="where plots go (docs/figures/)")
    parser.add_argument(
        "--claims",
        help="the papers' claims, rendered into <!-- report:papers --> "
        "(default: papers/claims.json in --docs, if there)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a block would change or a plot is missing",
    )
    parser.set_defaults(run=cmd_report)
