"""Beyond the modes: compile scope against speed, energy per step, and why it is faster (the
roofline point of each side and the profile pass's kernels)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from orchestrator.core.result import COL
from orchestrator.report.figures import Chart, _layout, _per_job, _values

SIDES = (("eager", "#8c8c8c"), ("compiled", "#1f77b4"))


def scope_chart(ok: pd.DataFrame) -> Chart:
    title = "Scope of compilation: compile seconds against speedup"
    if COL.scope not in ok or ok[COL.scope].nunique() < 2 or COL.compile_s not in ok:
        return Chart(title, None, "compile.scope is not an axis of this sweep.")
    fig = go.Figure()
    for scope, part in ok.groupby(COL.scope, sort=False):
        fig.add_scatter(
            x=_values(part[COL.compile_s]),
            y=_values(part[COL.speedup]),
            mode="markers",
            name=f"scope={scope}",
            marker={"size": 11},
            customdata=_values(part[COL.label]),
            hovertemplate="%{customdata}<br>compile %{x:.3g} s, speedup %{y:.3f}<extra></extra>",
        )
    _layout(fig, xaxis_title="compile s", yaxis_title="speedup (x)")
    note = (
        "One point per job, by compile.scope: `blocks` compiles one block graph that every block reuses "
        "(fewer seconds), `model` one graph of everything (more fusion across the edges)."
    )
    return Chart(title, fig, note)


def energy_chart(ok: pd.DataFrame) -> Chart:
    title = "Energy per step (GPU, NVML)"
    if COL.eager_j_per_step not in ok or ok[COL.eager_j_per_step].isna().all():
        return Chart(title, None, "Not measured in this sweep (NVML on a GPU only).")
    rows, capped = _per_job(ok[ok[COL.eager_j_per_step].notna()], COL.eager_j_per_step, "using the most")
    fig = go.Figure()
    for side, color in SIDES:
        fig.add_bar(
            x=_values(rows["job_label"]), y=_values(rows[f"{side}_j_per_step"]), name=side, marker_color=color
        )
    _layout(fig, rows["job_label"].tolist(), barmode="group", yaxis_title="J per step")
    note = (
        "Board energy over each side's timed blocks, per step. energy_break_even_steps (table): "
        "the GPU energy of the compile over the energy saved per step."
    )
    return Chart(title, fig, note + capped)


def roofline_chart(ok: pd.DataFrame) -> Chart:
    title = "Roofline: each side's FLOP/s against its arithmetic intensity"
    need = [COL.eager_intensity, COL.compiled_intensity, COL.eager_flops_per_s, COL.compiled_flops_per_s]
    rows = ok.dropna(subset=need) if set(need) <= set(ok.columns) else ok.iloc[0:0]
    if rows.empty:
        return Chart(
            title, None, "No job ran the profile pass (bench.profile=true) with counted FLOPs and bytes."
        )
    fig = go.Figure()
    for side, color in SIDES:
        fig.add_scatter(
            x=_values(rows[f"{side}_intensity"]),
            y=_values(rows[f"{side}_flops_per_s"] / 1e12),
            mode="markers",
            name=side,
            marker={"size": 11, "color": color},
            customdata=_values(rows[COL.label]),
            hovertemplate="%{customdata}<br>%{x:.3g} FLOP/byte, %{y:.3g} TFLOP/s<extra>" + side + "</extra>",
        )
    for _, row in rows.iterrows():  # each job's move from eager to compiled
        fig.add_scatter(
            x=[row[COL.eager_intensity], row[COL.compiled_intensity]],
            y=[row[COL.eager_flops_per_s] / 1e12, row[COL.compiled_flops_per_s] / 1e12],
            mode="lines",
            line={"color": "#bbb", "width": 1},
            showlegend=False,
            hoverinfo="skip",
        )
    peaks = (
        rows[[COL.peak_flops_per_s, COL.peak_bytes_per_s]].dropna()
        if COL.peak_bytes_per_s in rows
        else rows.iloc[0:0]
    )
    if len(peaks):
        flops, bw = (float(v) for v in peaks.iloc[0])  # the first row's two peaks
        x = np.logspace(-1, 4, 60)
        fig.add_scatter(
            x=x.tolist(), y=(np.minimum(flops, x * bw) / 1e12).tolist(), mode="lines", name="device roof"
        )
    _layout(fig, xaxis_type="log", yaxis_type="log", xaxis_title="FLOP per byte", yaxis_title="TFLOP/s")
    note = (
        "Per job and side: flops_per_step over the timed step, against FLOPs per byte moved at kernel "
        "boundaries (eager: every aten op's inputs and outputs; compiled: inductor's count of its kernels). "
        "Fusion moves a side right (fewer bytes); the roof is the device's peaks where known."
    )
    return Chart(title, fig, note)


def profile_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per profiled job: kernels per step, busy fraction, the top kernels of each side."""
    rows = []
    profiled = (
        df[df[COL.eager_kernels_per_step].notna()] if COL.eager_kernels_per_step in df else df.iloc[0:0]
    )
    for _, r in profiled.iterrows():
        label = r["job_label"]
        for side, _ in SIDES:
            top = r.get(f"{side}_top_kernels") or []
            rows.append(
                {
                    "job": label,
                    "side": side,
                    "unit": r.get(COL.profile_unit),
                    "per step": r.get(f"{side}_kernels_per_step"),
                    "busy": r.get(f"{side}_busy_fraction"),
                    "top by time (ms/step)": "; ".join(
                        f"{k['name'][:60]} {k['ms_per_step']:.3g}" for k in top[:3]
                    ),
                }
            )
    return pd.DataFrame(rows)
