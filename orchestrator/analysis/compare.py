"""Compare a candidate sweep with a baseline: jobs matched by config (job id), regressions flagged."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from orchestrator.analysis.follow_up import main_rows
from orchestrator.config.schema import CompareConfig
from orchestrator.core.numbers import is_false, number
from orchestrator.core.result import COL
from orchestrator.core.stats import change_ci
from orchestrator.core.stats import verdict as stats_verdict

# (column, threshold field, direction): +1 flags a rise, -1 a fall, relative to the baseline.
# Compile time is gated on the cold figure (a private, empty cache): the one that job order cannot move.
CHECKS = [
    (COL.speedup, "speedup_drop", -1),
    (COL.compile_cold_s, "compile_rise", +1),
    (COL.compiled_peak_gib, "memory_rise", +1),
    (COL.compiled_ms, "step_rise", +1),
]
# Judged by the CI of the change where both sweeps kept per-repetition timings.
SAMPLED = (COL.speedup, COL.compiled_ms)
VERDICTS = ("regression", "improvement", "inconclusive")
# Graph health: any rise is a regression (counts, not noisy timings); `graphs` flags any change.
COUNT_CHECKS = [COL.graph_breaks, COL.cudagraph_skips, COL.dyn_recompiles]


def _show(v: object) -> str:
    """A cell as people read it: numbers to 4 significant digits."""
    f = number(v) if not isinstance(v, bool | str) else None
    return (
        "-"
        if v is None or (isinstance(v, float) and math.isnan(v))
        else f"{f:.4g}"
        if f is not None
        else str(v)
    )


def samples(timings: dict[str, Any] | None, column: str) -> tuple[list[float], list[int] | None] | None:
    """Per-repetition values behind a column (pair ratios for speedup), with their process ids."""
    if not timings or not timings.get(COL.compiled_ms):
        return None
    if column == COL.speedup:
        values = [e / c for e, c in zip(timings[COL.eager_ms], timings[COL.compiled_ms], strict=True)]
    else:
        values = list(timings[column])
    return values, timings.get("process")


def paired_timings(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each job's per-repetition timings where they are pairs (sides apart: no pairs, threshold rule)."""
    out: dict[str, dict[str, Any]] = {}
    for _, row in df.iterrows():
        timings = row.get(COL.timings)
        if isinstance(timings, dict) and not is_false(row.get(COL.interleaved)):
            out[row[COL.job_id]] = timings
    return out


def compare_tables(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    th: CompareConfig,
    base_timings: dict[str, dict[str, Any]] | None = None,
    cand_timings: dict[str, dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """One row per finding (a regression, an improvement, an inconclusive change, a missing job).
    Where both sweeps kept their timings, speed is judged by the CI of its change (stats.verdict)."""
    rows: list[dict[str, Any]] = []
    b = main_rows(base).set_index(COL.job_id)  # follow-up jobs answer for a lever, not the sweep
    c = main_rows(cand).set_index(COL.job_id)

    def add(
        job_id: str,
        label: str,
        check: str,
        regression: bool,
        note: str,
        vb: object = None,
        vc: object = None,
        change: object = None,
    ) -> None:
        verdict = "regression" if regression else note.split(":")[0] if ":" in note else None
        rows.append(
            {
                "job_id": job_id,
                "label": label,
                "check": check,
                "baseline": vb,
                "candidate": vc,
                "change": change,
                "regression": regression,
                "verdict": verdict if verdict in VERDICTS else ("regression" if regression else None),
                "note": note,
            }
        )

    for job_id in sorted(set(b.index) | set(c.index)):
        if job_id not in c.index or job_id not in b.index:
            side = "candidate" if job_id not in c.index else "baseline"
            label = (b if job_id in b.index else c).loc[job_id].get(COL.label, "")
            add(job_id, label, "missing", False, f"not in {side}")
            continue
        rb, rc = b.loc[job_id], c.loc[job_id]
        label = rc.get(COL.label, "")
        if rb.get(COL.status) == "ok" and rc.get(COL.status) != "ok":
            add(
                job_id,
                label,
                COL.status,
                True,
                str(rc.get(COL.error))[:200],
                rb.get(COL.status),
                rc.get(COL.status),
            )
        if (
            bool(rb.get(COL.parity_ok)) is True
            and rc.get(COL.parity_ok) is not None
            and not bool(rc.get(COL.parity_ok))
        ):
            add(job_id, label, "parity", True, "parity flipped", True, False)
        for column in COUNT_CHECKS:
            vb, vc = number(rb.get(column)), number(rc.get(column))
            if vb is not None and vc is not None and vc > vb:
                add(job_id, label, column, True, f"rose from {vb:.0f} to {vc:.0f}", vb, vc)
        gb, gc = number(rb.get(COL.graphs)), number(rc.get(COL.graphs))
        if gb is not None and gc is not None and gb != gc:
            add(job_id, label, COL.graphs, True, f"graph count changed from {gb:.0f} to {gc:.0f}", gb, gc)
        if number(rb.get(COL.compile_cold_s)) is None or number(rc.get(COL.compile_cold_s)) is None:
            hits_b, hits_c = number(rb.get(COL.compile_cache_hits)), number(rc.get(COL.compile_cache_hits))
            if hits_b is not None and hits_c is not None and (hits_b > 0) != (hits_c > 0):
                add(
                    job_id,
                    label,
                    COL.compile_s,
                    False,
                    "not compared: one compile hit the cache, the other missed",
                )
        for column, field, direction in CHECKS:
            vb, vc = number(rb.get(column)), number(rc.get(column))
            if vb is None or vc is None or vb == 0:
                continue
            limit = getattr(th, field)
            sb = samples((base_timings or {}).get(job_id), column) if column in SAMPLED else None
            sc = samples((cand_timings or {}).get(job_id), column) if column in SAMPLED else None
            if sb and sc:
                if sb == sc:  # the same measurements (a sweep against itself, a copy): no change at all
                    continue
                change, low, high = change_ci(sb[0], sc[0], sb[1], sc[1])
                verdict = stats_verdict(low, high, limit, higher_is_better=direction < 0)
                if verdict != "unchanged":
                    note = f"{verdict}: {change:+.1%} [{low:+.1%}, {high:+.1%}] against ±{limit:.0%}"
                    add(job_id, label, column, verdict == "regression", note, vb, vc, change)
                continue
            change = (vc - vb) / abs(vb)
            if direction * change > limit:
                add(
                    job_id,
                    label,
                    column,
                    True,
                    f"beyond {field}={limit} (one figure each: no CI)",
                    vb,
                    vc,
                    change,
                )
            elif -direction * change > limit:
                add(job_id, label, column, False, "improvement: beyond the threshold", vb, vc, change)
    columns = [
        COL.job_id,
        COL.label,
        "check",
        "baseline",
        "candidate",
        "change",
        "regression",
        "verdict",
        "note",
    ]
    return pd.DataFrame(rows, columns=columns)


def findings_cells(findings: pd.DataFrame) -> list[list[str]]:
    """The findings as text cells: numbers to 4 significant digits, the change as a signed percent."""
    rows = []
    for _, row in findings.iterrows():
        change = f"{row['change']:+.1%}" if number(row["change"]) is not None else "-"
        rows.append([_show(row[k]) if k != "change" else change for k in findings.columns])
    return rows
