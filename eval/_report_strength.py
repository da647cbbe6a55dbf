"""``gojax report`` for strength results: a folder of ``gojax match`` folders
(``<name>/*/match.json``) as a table of win rates with their intervals, recounted
where ``gojax recount`` was run, and a plot of them.
"""

from __future__ import annotations

from pathlib import Path

from eval._report_markdown import _natural, _percent, markdown_table
from eval._report_results import _MATCH_MANIFEST, Rendered, ResultEntry


def _recounted_rate(m, recounts) -> str:
    """A's win rate with the engine's recount in place of the match's count (``gojax
    recount``), or "–" for a match never recounted."""
    from eval.recount import win_rate_a

    if recounts is None or not m.games:
        return "–"
    return _percent(win_rate_a(m, recounts)[0])


def _strength_rows(matches, recounts=None) -> list[list[str]]:
    rows = []
    for folder, m in matches:
        c = m.config
        n = len(m.games)
        lo, hi = m.interval_a
        extra = [] if recounts is None else [_recounted_rate(m, recounts.get(folder))]
        rows.append(
            [
                f"`{folder}`",
                f"{c.size}×{c.size}",
                f"{c.komi:g}",
                m.names["A"],
                m.names["B"],
                str(n),
                f"{m.wins('A')} ({m.wins('A', 'B')} / {m.wins('A', 'W')})",
                str(m.draws),
                f"{_percent(m.win_rate_a)} ({_percent(lo)}–{_percent(hi)})" if n else "–",
                f"{m.mean_length:.0f}" if n else "–",
                *extra,
            ]
        )
    return rows


def _strength_markdown(matches, recounts=None) -> str:
    """The match table; with ``recounts`` (folder -> ``gojax recount``'s games, None where a
    match was never recounted) a column of A's win rate by the recounting engine's count."""
    headers = ["match", "board", "komi", "engine A", "engine B", "games"]
    headers += ["A wins (as B / as W)", "draws", "A win rate (95% Wilson)", "mean moves"]
    right = [False, False, True, False, False, True, True, True, True, True]
    note = "Draws count half."
    if recounts is not None:
        headers.append("A win rate, recounted")
        right.append(True)
        note += (
            " Recounted: the games that ended by the score counted again by an engine's own"
            " `final_score` (`gojax recount`, dead stones removed as it judges them)."
        )
    table = markdown_table(headers, _strength_rows(matches, recounts), right=right)
    commands = "\n".join(
        f"- `{folder}`: A = `{m.config.engine_a}`; B = `{m.config.engine_b}`; "
        f"{m.config.rules} rules"
        for folder, m in matches
    )
    return f"{table}\n\n{note} Engines:\n\n{commands}"


def _plot_strength(matches, path: Path, recounts=None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    played = [(folder, m) for folder, m in matches if m.games]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(played) + 1.6))
    from eval.recount import win_rate_a

    recounted_any = False
    for y, (folder, m) in enumerate(played):
        lo, hi = m.interval_a
        rate = m.win_rate_a
        ax.errorbar(rate, y, xerr=[[rate - lo], [hi - rate]], fmt="o", color="C0", capsize=3)
        if recounts is not None and recounts.get(folder) is not None:
            again = win_rate_a(m, recounts[folder])[0]
            label = "recounted by an engine's final_score" if not recounted_any else None
            ax.plot(again, y, "x", color="C3", label=label)
            recounted_any = True
    ax.set_yticks(range(len(played)))
    # The rules join the label when the matches were not all played under the same ones.
    mixed = len({m.config.rules for _, m in played}) > 1
    ax.set_yticklabels(
        [f"{m.names['A']} vs {m.names['B']}, {m.config.size}×{m.config.size}"
         f"{' ' + m.config.rules if mixed else ''} ({len(m.games)})"
         for _, m in played]
    )  # fmt: skip
    ax.axvline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlim(0, 1)
    ax.set_xlabel("engine A's win rate (95% Wilson interval)")
    if recounted_any:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), fontsize=8, frameon=False)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _render_strength(entry: ResultEntry) -> Rendered:
    from eval.match import read_match

    folders = sorted(p.parent for p in entry.path.glob(f"*/{_MATCH_MANIFEST}"))
    from eval.recount import read_recounts

    matches = [(folder.name, read_match(folder)) for folder in folders]
    # 9x9 before 19x19; names in natural order (v1, v64, v256).
    matches.sort(key=lambda fm: (fm[1].config.size, _natural(fm[0])))
    recounts = {folder.name: read_recounts(folder) for folder in folders}
    if all(r is None for r in recounts.values()):
        recounts = None
    plots = {}
    if any(m.games for _, m in matches):
        plots[f"{entry.name}.png"] = lambda p: _plot_strength(matches, p, recounts)
    return Rendered(entry, _strength_markdown(matches, recounts), plots)
