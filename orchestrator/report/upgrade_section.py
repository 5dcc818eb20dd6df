"""The dashboard's upgrade A/B (analysis/upgrade.py): one word per model, then every setting's changes."""

from __future__ import annotations

import html

import pandas as pd

from orchestrator.analysis.answers import Comparison, FigureChange, Upgrade
from orchestrator.analysis.upgrade import COUNTS, FIGURES
from orchestrator.report.page import html_table


def _change(f: FigureChange) -> str:
    """A figure's change as read on the page: +3.1% [+1.0%, +5.2%] regression."""
    if f.change is None:
        return "-"
    ci = f" [{f.ci[0]:+.1%}, {f.ci[1]:+.1%}]" if f.ci else ""
    return f"{f.change:+.1%}{ci} {f.judged}"


def _moved(pair: list) -> str:
    """Baseline -> candidate of a count or a state."""
    return " -> ".join("-" if v is None else f"{v:.0f}" if isinstance(v, float) else str(v) for v in pair)


def _rows(comparison: Comparison) -> pd.DataFrame:
    rows = []
    for p in comparison.pairs:
        row = {"model": p.model, "setting": p.setting}
        row |= {words: _change(p.figures[col]) for col, words, *_ in FIGURES}
        row |= {words: _moved(p.counts[col]) for col, words in COUNTS}
        row |= {"status": _moved(p.status), "parity": _moved(p.parity_ok)}
        rows.append(row)
    return pd.DataFrame(rows)


def sections(upgrade: Upgrade | None) -> list[tuple[str, str, str]]:
    """(title, body, note) per candidate environment; none for a sweep of one environment."""
    if upgrade is None:
        return []
    out = []
    torch = upgrade.torch
    for comp in upgrade.comparisons:
        b, c = comp.baseline, comp.candidate
        items = "".join(
            f"<li class='upgrade-{html.escape(v.verdict.split()[0])}'><b>{html.escape(v.model)}</b>: "
            f"{html.escape(v.verdict)}. {html.escape(v.why)}</li>"
            for v in comp.models
        )
        table = _rows(comp)
        body = f"<ol class='upgrade'>{items}</ol>" + html_table(table, list(table.columns), f"upgrade-{c}")
        note = (
            f"{c} (torch {torch[c]}) against {b} (torch {torch[b]}), setting by setting: the change of each "
            "figure with its 95% CI where both jobs kept their repetitions, judged against the compare "
            "thresholds (compare.*)."
        )
        out.append((f"Upgrade: {b} -> {c}", body, note))
    return out
