"""Where a sweep's time went: its wall from plan to table, the jobs' walls by phase (job/phases/wall.py),
and how much of it was the compile and the timed repetitions the figures come from."""

from __future__ import annotations

import pandas as pd

from orchestrator.core.result import COL, FIELDS
from orchestrator.results.present import duration

# The phase fields of a result (WallTime's, but the whole wall); they sum to `job_wall_s`.
PHASE_COLUMNS = [
    key for key, f in FIELDS.items() if f.section == "wall" and key.startswith("wall_") and key.endswith("_s")
]
MEASURED = (COL.wall_first_calls_s, COL.wall_timed_s)  # the cold compile and the timed repetitions


def phase_name(column: str) -> str:
    return column.removeprefix("wall_").removesuffix("_s").replace("_", " ")


def time_line(df: pd.DataFrame, sweep_s: float, since: float) -> str | None:
    """One line: the sweep's wall, the wall of the jobs it ran (those written after `since`), the
    share spent compiling and timing, and the largest other phases."""
    if COL.job_wall_s not in df or COL.wall_written_at not in df:
        return None
    ran = df[pd.to_numeric(df[COL.wall_written_at], errors="coerce") >= since]
    walls = pd.to_numeric(ran[COL.job_wall_s], errors="coerce").dropna()
    if walls.empty:
        return None
    total = float(walls.sum())
    seconds = {c: pd.to_numeric(ran[c], errors="coerce").fillna(0) for c in PHASE_COLUMNS if c in ran}
    spent = {c: float(v.sum()) for c, v in seconds.items()}
    measured = sum(spent.get(c, 0.0) for c in MEASURED)
    rest = sorted(((s, c) for c, s in spent.items() if c not in MEASURED and s > 0.05 * total), reverse=True)
    others = ", ".join(f"{phase_name(c)} {duration(s)}" for s, c in rest[:5])
    share = measured / total if total else 0.0
    line = (
        f"time: {duration(sweep_s)} from plan to table; {len(walls)} job(s) ran for {duration(total)}: "
        f"compile and timing {duration(measured)} ({share:.0%})"
    )
    return line + (f"; the rest mostly {others}" if others else "")
