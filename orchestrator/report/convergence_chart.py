"""Convergence charts: each checked job's loss curves (eager, compiled, and the batch-reversed eager
reference), and how far compiled and the reference drift from eager, step by step."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from orchestrator.core.result import COL
from orchestrator.report.figures import Chart, _layout

MAX_JOBS = 12  # jobs drawn (three lines each); every job's curves are in its result.json


def _curves(df: pd.DataFrame) -> list[tuple[str, pd.Series]]:
    checked = df[df[COL.conv_steps].notna()] if COL.conv_steps in df else df.iloc[0:0]
    return [(str(row["job_label"]), row) for _, row in checked.iterrows() if row.get(COL.conv_eager_loss)]


def _divergence(curve: list[float], ref: list[float]) -> list[float | None]:
    return [abs(x - y) / abs(y) if y else None for x, y in zip(curve, ref, strict=True)]


def charts(df: pd.DataFrame) -> list[Chart]:
    titles = ("Loss curves of the convergence check", "Divergence of the loss from eager")
    jobs = _curves(df)
    if not jobs:
        why = "No job ran the convergence check (bench.convergence_steps=0, or not bench.task=train)."
        return [Chart(titles[0], None, why)]
    capped = f" Showing {MAX_JOBS} of {len(jobs)} jobs." if len(jobs) > MAX_JOBS else ""
    loss, drift = go.Figure(), go.Figure()
    for label, r in jobs[:MAX_JOBS]:
        steps = list(range(1, len(r[COL.conv_eager_loss]) + 1))
        for key, name, dash in (
            (COL.conv_eager_loss, "eager", "solid"),
            (COL.conv_compiled_loss, "compiled", "dash"),
            (COL.conv_reference_loss, "eager, batch reversed", "dot"),
        ):
            loss.add_scatter(x=steps, y=r[key], mode="lines", name=f"{label}: {name}", line={"dash": dash})
        for key, name in (
            (COL.conv_compiled_loss, "compiled"),
            (COL.conv_reference_loss, "eager, batch reversed"),
        ):
            y = _divergence(r[key], r[COL.conv_eager_loss])
            drift.add_scatter(x=steps, y=y, mode="lines", name=f"{label}: {name} vs eager")
    _layout(loss, xaxis_title="step", yaxis_title="training loss")
    _layout(drift, xaxis_title="step", yaxis_title="|loss - eager loss| / eager loss", yaxis_type="log")
    return [
        Chart(
            titles[0],
            loss,
            "Eager, compiled and a second eager copy that sees each batch in reverse order (the same "
            "math, another reduction order) train from identical weights on one data stream." + capped,
        ),
        Chart(
            titles[1],
            drift,
            "Relative difference from eager's loss at each step: compiled against the noise floor that "
            "a changed reduction order alone makes (a zero difference is not drawn on the log axis)."
            + capped,
        ),
    ]
