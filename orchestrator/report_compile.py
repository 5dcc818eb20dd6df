"""Dashboard figures of compile cost: where the seconds went (stacked phases per job), and cold /
warm / portable compile side by side, one mark per job."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from orchestrator.job.compile_cost import PHASES

PHASE_NAMES = {
    "dynamo": "dynamo trace",
    "aot_autograd": "AOT autograd",
    "inductor": "inductor lowering",
    "codegen": "code generation + kernel compile",
    "backward": "backward graph (AOT part)",
}
KINDS = (
    ("compile_cold_s", "cold (own empty cache)"),
    ("compile_warm_s", "warm (restart, same node)"),
    ("compile_portable_s", "portable (artifacts, new node)"),
)


def compile_phase_figure(df: pd.DataFrame) -> go.Figure | None:
    """None when no job recorded compile phases (eager-only sweeps, or every job failed first)."""
    columns = [f"phase_{p}_s" for p in PHASES]
    if not set(columns) <= set(df.columns):
        return None
    rows = df[df[columns].notna().all(axis=1)]
    if rows.empty:
        return None
    labels = rows["label"].astype(str)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("where the first compile's seconds went", "cold / warm / portable compile"),
    )
    # Phases stack (they add up to no more than the first call): one offset group, each bar based
    # on the ones below. The kinds are alternatives: an offset group each, side by side.
    base = pd.Series(0.0, index=rows.index)
    for phase, column in zip(PHASES, columns, strict=True):
        fig.add_bar(
            x=labels,
            y=rows[column],
            base=base.copy(),
            name=PHASE_NAMES[phase],
            offsetgroup="phases",
            row=1,
            col=1,
        )
        base += rows[column]
    for column, name in KINDS:
        if column in rows and rows[column].notna().any():
            fig.add_bar(x=labels, y=rows[column], name=name, offsetgroup=column, row=1, col=2)
    fig.update_layout(barmode="group", height=460, yaxis_title="seconds", yaxis2_title="seconds")
    return fig
