"""Compile-cost charts: where the first compile's seconds went (stacked phases, one bar per job),
cold / warm / portable compile side by side (one bar each per job), and each job's whole wall time
by phase."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from orchestrator.core.result import COL
from orchestrator.core.result import COMPILE_PHASES as PHASES
from orchestrator.report.figures import Chart, _layout, _per_job, _values
from orchestrator.results.time_spent import PHASE_COLUMNS, phase_name

PHASE_NAMES = {
    "dynamo": "dynamo trace",
    "aot_autograd": "AOT autograd",
    "inductor": "inductor lowering",
    "codegen": "code generation + kernel compile",
    "backward": "backward graph (AOT part)",
}
KINDS = (
    (COL.compile_cold_s, "cold: own empty cache"),
    (COL.compile_warm_s, "warm: restart, same node"),
    (COL.compile_portable_s, "portable: artifacts, new node"),
)


def _bars(rows: pd.DataFrame, series: list[tuple[str, str]], barmode: str) -> go.Figure:
    """One bar per job and series (column, name), in seconds."""
    fig = go.Figure()
    labels = _values(rows[COL.label])
    for column, name in series:
        fig.add_bar(x=labels, y=_values(rows[column]), name=name)
    return _layout(fig, labels, barmode=barmode, yaxis_title="seconds")


def phase_chart(ok: pd.DataFrame) -> Chart:
    title = "Phases of the first compile: where its seconds went"
    columns = [f"phase_{p}_s" for p in PHASES]
    rows = ok[ok[columns].notna().all(axis=1)] if set(columns) <= set(ok.columns) else ok.iloc[0:0]
    if rows.empty:
        return Chart(title, None, "No compiled job recorded torch's compilation metrics.")
    rows, capped = _per_job(rows.assign(_t=rows[columns].sum(axis=1)), "_t", "with the longest compile")
    fig = _bars(rows, [(c, PHASE_NAMES[p]) for p, c in zip(PHASES, columns, strict=True)], "stack")
    note = (
        "One bar per compiled job: its first compile split by torch's own compilation metrics "
        "(exclusive parts of the nested dynamo, AOT-autograd, inductor and code-generation times); "
        "the bar is at most the first call's wall time."
    )
    return Chart(title, fig, note + capped)


def cache_kinds_chart(ok: pd.DataFrame) -> Chart:
    title = "Warm restart and portable artifacts against the cold compile"
    kinds = [(c, n) for c, n in KINDS if c in ok and ok[c].notna().any()]
    if not kinds:
        return Chart(title, None, "No job measured its cold compile (compile.cache=shared, or eager only).")
    rows = ok[ok[kinds[0][0]].notna()]
    rows, capped = _per_job(rows, kinds[0][0], "with the longest cold compile")
    fig = _bars(rows, kinds, "group")
    note = (
        "Cold: the job's own empty cache. Warm: a fresh process against the cache the job filled (a "
        "restart on the same node). Portable: a fresh process with an empty cache, handed the job's "
        "saved cache artifacts (a second node of a cluster)."
    )
    return Chart(title, fig, note + capped)


def wall_chart(df: pd.DataFrame) -> Chart:
    """Each job's wall time by phase: the compile and the timing against everything around them."""
    title = "Wall time of each job, by phase"
    columns = [c for c in PHASE_COLUMNS if c in df and df[c].fillna(0).gt(0).any()]
    rows = df[df[COL.job_wall_s].notna()] if COL.job_wall_s in df else df.iloc[0:0]
    if rows.empty or not columns:
        return Chart(title, None, "No job recorded its wall time by phase (results from before it was kept).")
    rows, capped = _per_job(rows, COL.job_wall_s, "with the longest wall")
    fig = _bars(rows, [(c, phase_name(c)) for c in columns], "stack")
    note = (
        "One bar per job, from the worker's start to its exit (job_wall_s): first calls hold the cold "
        "compile, timed the measured repetitions; the rest is what the figures cost around them "
        "(start-up, the primer, the fresh processes of probes and repetitions)."
    )
    return Chart(title, fig, note + capped)
