"""The dashboard's charts. Each shows one mark per job, or (past a cap) a named aggregate with its
spread; each says what it shows, and a chart with nothing to show is left out with the reason."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from orchestrator.config.schema import COMPILE_MODES
from orchestrator.core.numbers import geomean
from orchestrator.core.result import COL
from orchestrator.results.present import join_values, mode_rank

MAX_BARS = 120  # per-job bars in one chart; past it, a named aggregate per group
MAX_POINTS = 2000  # markers in one scatter; past it, an even sample (and the note says so)
MODE_COLORS = dict(zip(COMPILE_MODES, ("#8c8c8c", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"), strict=True))
LAYOUT = {
    "height": 420,
    "margin": {"l": 60, "r": 20, "t": 70, "b": 80},
    "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    "template": "plotly_white",
}


@dataclass
class Chart:
    """One section of the page: a figure (None: hidden) and a sentence on what it shows or why not."""

    title: str
    figure: go.Figure | None
    note: str


def _layout(fig: go.Figure, categories: list[str] | None = None, **kw: object) -> go.Figure:
    fig.update_layout(**LAYOUT, **kw)
    if categories is not None:
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=categories)
    return fig


def _values(series: pd.Series) -> list:
    """Plain lists for plotly (readable back from the page as numbers; NaN becomes null)."""
    return [None if pd.isna(v) else v for v in series.tolist()]


def _spread(part: pd.DataFrame, column: str) -> tuple[float, float, float]:
    """Geometric mean and interquartile range of a column of positive ratios."""
    v = part[column].dropna()
    v = v[v > 0]
    if v.empty:
        return float("nan"), float("nan"), float("nan")
    return geomean(v) or float("nan"), float(v.quantile(0.25)), float(v.quantile(0.75))


def speedup_chart(ok: pd.DataFrame, x_axes: list[str], coarse: list[str]) -> Chart:
    """Speedup per job, grouped by mode (canonical order) at each model label; past MAX_BARS, the
    geometric mean per mode and coarse group (size, dtype, ...) with its interquartile range."""
    title = "Speedup compiled vs eager"
    if ok.empty or COL.speedup not in ok or ok[COL.speedup].isna().all():
        return Chart(title, None, "No job finished ok with a speedup.")
    fig = go.Figure()
    per_job = len(ok) <= MAX_BARS
    x = ok["x_label"] if per_job else join_values(ok, coarse, " · ").replace("", "all")
    for mode in sorted(ok[COL.mode].unique(), key=mode_rank):
        part, px = ok[ok[COL.mode] == mode], x[ok[COL.mode] == mode]
        if per_job:
            y, lo, hi = part[COL.speedup], part[COL.speedup_ci_low], part[COL.speedup_ci_high]
            hover = part[COL.label]
        else:
            stats = [(g, *_spread(p, COL.speedup), len(p)) for g, p in part.groupby(px, sort=False)]
            agg = pd.DataFrame(stats, columns=["x", "y", "lo", "hi", "n"])
            px, y, lo, hi = agg["x"], agg["y"], agg["lo"], agg["hi"]
            hover = agg["n"].map(lambda n: f"geomean of {n} job(s)")
        fig.add_bar(
            x=_values(px),
            y=_values(y),
            name=str(mode),
            marker_color=MODE_COLORS.get(mode),
            customdata=_values(hover),
            hovertemplate="%{customdata}<br>speedup %{y:.3f}<extra>%{fullData.name}</extra>",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": _values(hi - y),
                "arrayminus": _values(y - lo),
            },
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    categories = list(dict.fromkeys(x.tolist()))
    axis = " · ".join(x_axes if per_job else coarse) or "model"
    _layout(fig, categories, barmode="group", yaxis_title="speedup (x)", xaxis_title=axis)
    if per_job:
        note = "One bar per job: the median of the per-repetition ratios eager/compiled, and its 95% CI."
    else:
        note = (
            f"{len(ok)} jobs, more than {MAX_BARS}: each bar is the geometric mean of the jobs of one mode "
            f"and {axis}; its whiskers span their interquartile range. Every job is in the table below."
        )
    return Chart(title, fig, note)


def _sample(frame: pd.DataFrame, cap: int) -> tuple[pd.DataFrame, str]:
    if len(frame) <= cap:
        return frame, ""
    step = -(-len(frame) // cap)
    shown = frame.iloc[::step]
    return shown, f" Showing {len(shown)} of {len(frame)} jobs (one in every {step}, in table order)."


def compile_chart(ok: pd.DataFrame) -> Chart:
    title = "Compile cost against speedup"
    compiled = (
        ok[(ok[COL.mode] != "eager") & (ok[COL.compile_s] > 0)] if COL.compile_s in ok else ok.iloc[0:0]
    )
    if compiled.empty:
        return Chart(title, None, "No compiled job finished ok: nothing to plot.")
    shown, sampled = _sample(compiled, MAX_POINTS)
    fig = go.Figure()
    for mode in sorted(shown[COL.mode].unique(), key=mode_rank):
        part = shown[shown[COL.mode] == mode]
        be = (
            part[COL.break_even_steps]
            if COL.break_even_steps in part
            else pd.Series(np.nan, index=part.index)
        )
        fig.add_scatter(
            x=_values(part[COL.compile_s]),
            y=_values(part[COL.speedup]),
            mode="markers",
            name=str(mode),
            marker={"size": 10, "color": MODE_COLORS.get(mode)},
            customdata=list(zip(_values(part[COL.label]), _values(be), strict=True)),
            hovertemplate="%{customdata[0]}<br>compile %{x:.3g} s, speedup %{y:.3f}"
            "<br>break-even %{customdata[1]:.0f} steps<extra></extra>",
        )
    _layout(fig, xaxis_title="compile s", yaxis_title="speedup (x)")
    note = (
        "One point per compiled job: compile s is its first compiled call minus an eager call; hover for "
        "its break-even steps (compile s / time saved per step)."
    )
    return Chart(title, fig, note + sampled)


def _per_job(frame: pd.DataFrame, order: str, what: str) -> tuple[pd.DataFrame, str]:
    """At most MAX_BARS jobs, the largest by `order` when there are more, and a note saying so."""
    if len(frame) <= MAX_BARS:
        return frame, ""
    top = frame.sort_values(order, ascending=False).head(MAX_BARS)
    return frame[frame.index.isin(top.index)], f" Showing the {MAX_BARS} of {len(frame)} jobs {what}."


def memory_chart(ok: pd.DataFrame, axes_title: str) -> Chart:
    title = "Peak memory per rank"
    if COL.eager_peak_gib not in ok or ok[COL.eager_peak_gib].isna().all():
        return Chart(title, None, "Not measured in this sweep (CUDA only).")
    rows, capped = _per_job(ok.assign(_m=ok[COL.compiled_peak_gib]), "_m", "with the largest compiled peak")
    fig = go.Figure()
    for column, name in ((COL.eager_peak_gib, "eager"), (COL.compiled_peak_gib, "compiled")):
        fig.add_bar(
            x=_values(rows["job_label"]),
            y=_values(rows[column]),
            name=name,
            customdata=_values(rows[COL.label]),
        )
    fig.update_traces(hovertemplate="%{customdata}<br>%{y:.3g} GiB<extra>%{fullData.name}</extra>")
    _layout(fig, rows["job_label"].tolist(), barmode="group", yaxis_title="GiB", xaxis_title=axes_title)
    note = "One pair of bars per job: eager and compiled peak allocated, max over ranks."
    if COL.memory_note in ok and ok[COL.memory_note].notna().any():
        note += " CUDA-graph modes: the graph pool (allocated at capture) is not in the compiled peak."
    return Chart(title, fig, note + capped)


def count_chart(df: pd.DataFrame, column: str, title: str, what: str, axes_title: str) -> Chart:
    """Graph breaks or recompiles per job; hidden when every job counted zero."""
    counted = df[df[column].notna()] if column in df else df.iloc[0:0]
    if counted.empty or (counted[column] == 0).all():
        done = f"0 in all {len(counted)} job(s) that counted them" if len(counted) else "not counted"
        return Chart(title, None, f"No {what}: {done}.")
    rows, capped = _per_job(counted, column, f"with the most {what}")
    fig = go.Figure(
        go.Bar(
            x=_values(rows["job_label"]),
            y=_values(rows[column]),
            name=what,
            customdata=_values(rows[COL.label]),
            hovertemplate="%{customdata}<br>%{y} " + what + "<extra></extra>",
        )
    )
    _layout(fig, rows["job_label"].tolist(), yaxis_title=what, xaxis_title=axes_title, showlegend=False)
    return Chart(title, fig, f"One bar per job that counted {what} (0 is a bar too)." + capped)


def parity_chart(df: pd.DataFrame, axes_title: str) -> Chart:
    title = "Parity"
    checked = df[df[COL.parity_err].notna()] if COL.parity_err in df else df.iloc[0:0]
    if checked.empty:
        return Chart(title, None, "Parity was not checked in this sweep.")
    limit = (
        checked[COL.parity_limit] if COL.parity_limit in checked else pd.Series(np.nan, index=checked.index)
    )
    rows, capped = _per_job(
        checked.assign(_r=checked[COL.parity_err] / limit), "_r", "closest to their limit"
    )
    passed = rows[COL.parity_ok] if COL.parity_ok in rows else pd.Series(None, index=rows.index)
    colors = ["#2a7" if pd.notna(v) and bool(v) else "#c33" for v in passed]
    fig = go.Figure(
        go.Bar(
            x=_values(rows["job_label"]),
            y=_values(rows[COL.parity_err]),
            marker_color=colors,
            name="compiled error",
            customdata=_values(rows[COL.label]),
            hovertemplate="%{customdata}<br>error %{y:.2e}<extra></extra>",
        )
    )
    if COL.parity_limit in rows:
        fig.add_scatter(
            x=_values(rows["job_label"]),
            y=_values(rows[COL.parity_limit]),
            mode="markers",
            name="limit",
            marker={"symbol": "line-ew-open", "size": 30, "color": "#000"},
        )
    _layout(
        fig,
        rows["job_label"].tolist(),
        yaxis_type="log",
        yaxis_title="relative error",
        xaxis_title=axes_title,
    )
    note = (
        "One bar per job: relative error of compiled against the reference (green pass, red fail); its limit."
    )
    return Chart(title, fig, note + capped)
