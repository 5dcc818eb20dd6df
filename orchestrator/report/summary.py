"""Aggregates per axis of the sweep (mode, size, dtype...): jobs, passes, speedups, compile seconds."""

from __future__ import annotations

import pandas as pd

from orchestrator.core.numbers import geomean
from orchestrator.core.result import COL
from orchestrator.results.present import axis_text, mode_rank

AGGREGATE_AXES = (COL.mode, COL.size, COL.dtype, COL.task, COL.strategy, COL.dynamic)


def by_axis(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per value of one axis: jobs, ok, geometric-mean / median / min / max speedup, median compile s."""
    rows = []
    for value, part in df.groupby(df[column].map(axis_text), sort=False):
        ok = part[part[COL.status] == "ok"]
        speed = ok[COL.speedup] if COL.speedup in ok else pd.Series(dtype=float)
        rows.append(
            {
                column: value,
                "jobs": len(part),
                "ok": len(ok),
                "geomean speedup": geomean(speed),
                "median": speed.median(),
                "min": speed.min(),
                "max": speed.max(),
                "median compile s": ok[COL.compile_s].median() if COL.compile_s in ok else None,
            }
        )
    out = pd.DataFrame(rows)
    return out.iloc[out[column].map(mode_rank).argsort(kind="stable")] if column == COL.mode else out


def aggregates(df: pd.DataFrame, swept: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """The per-axis tables worth showing: mode, size, dtype, ... where the sweep varies them."""
    return [(c, by_axis(df, c)) for c in AGGREGATE_AXES if c in swept and c in df]
