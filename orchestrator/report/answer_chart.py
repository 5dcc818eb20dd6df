"""The answer as a picture: for each model's named setting, the time it saves net of its compile
against the length of the run, with its 95% CI band and its break-even marked, so a user reads off
their own run instead of the one the verdict was written for."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from orchestrator.analysis.answers import Verdict
from orchestrator.report.figures import Chart, _layout

MAX_LINES = 12  # models drawn; the verdict table has every one
STEPS = [float(f"{n:.3g}") for n in np.logspace(1, 8, 120)]  # 10 to 100 million steps (or calls)
EDGE = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip"}
MARK = {"size": 9, "symbol": "x"}


def _net(saved_ms: float | None, cost: float) -> list[float | None]:
    """Seconds saved over each run length, net of the compile (plain numbers: readable on the page)."""
    return [None if saved_ms is None else float(f"{n * saved_ms / 1000 - cost:.4g}") for n in STEPS]


def chart(verdict: Verdict) -> Chart:
    title = "Time saved against run length"
    drawn = [v for v in verdict.models if None not in (v.saved_per_step_ms, v.compile_s)]
    if not drawn:
        return Chart(title, None, "No compiled setting passed with a speedup to draw.")
    fig = go.Figure()
    for v in drawn[:MAX_LINES]:
        name = f"{v.model}: {v.setting}" + (" (untrusted)" if v.outcome == "untrusted" else "")
        cost = v.compile_s
        assert cost is not None  # as `drawn` has it
        low, high = v.saved_per_step_ci_ms
        fig.add_scatter(x=STEPS, y=_net(high, cost), showlegend=False, **EDGE)
        fig.add_scatter(x=STEPS, y=_net(low, cost), fill="tonexty", opacity=0.2,
                        name=f"{name}, 95% CI", **EDGE)  # fmt: skip
        fig.add_scatter(x=STEPS, y=_net(v.saved_per_step_ms, cost), mode="lines", name=name)
        if v.payback_steps:
            fig.add_scatter(x=[v.payback_steps], y=[0], mode="markers", marker=MARK,
                            name=f"{name}: break-even")  # fmt: skip
    fig.add_hline(y=0, line={"color": "#888", "width": 1})
    _layout(
        fig,
        xaxis_title="steps in the run (the verdict's unit: steps, calls or requests)",
        yaxis_title="seconds saved net of compile",
    )
    fig.update_xaxes(type="log")
    capped = f" Showing {MAX_LINES} of {len(drawn)} models." if len(drawn) > MAX_LINES else ""
    note = (
        "Per model, the setting its verdict names (or the best measured, where the answer is not trusted): "
        "seconds saved per step x steps, minus the compile seconds the run pays; the band is the speedup's "
        "95% CI, the x the break-even." + capped
    )
    return Chart(title, fig, note)


OUTCOME_WORDS = {
    "gain": "kept",
    "within_ci": "within its CI: stopped",
    "loses": "dropped",
    "failed": "failed",
}


def path_chart(verdict: Verdict) -> Chart:
    """The stacked follow-ups, per model: the speedup (and its CI) at the named setting, then after
    each step that ran, with what became of the step."""
    title = "Stacked levers: the path to the best found"
    drawn = [v for v in verdict.models if v.path and v.speedup is not None]
    if not drawn:
        return Chart(
            title, None, "No stacked follow-up ran (verdict.follow_up=false, or no cause named a lever)."
        )
    fig = go.Figure()
    for v in drawn[:MAX_LINES]:
        x = [v.setting or "your setting", *[f"step {i}: + {s.lever}" for i, s in enumerate(v.path, 1)]]
        y = [v.speedup, *[s.speedup for s in v.path]]
        lows, highs = [v.ci[0], *[s.ci[0] for s in v.path]], [v.ci[1], *[s.ci[1] for s in v.path]]
        bars = [[None if e is None or s is None else abs(e - s) for s, e in zip(y, ends, strict=True)]
                for ends in (highs, lows)]  # fmt: skip
        words = ["named setting", *[OUTCOME_WORDS.get(s.outcome, s.outcome) for s in v.path]]
        fig.add_scatter(
            x=x, y=y, mode="lines+markers", name=str(v.model), text=words,
            hovertemplate="%{x}: %{y:.3g}x (%{text})<extra>%{fullData.name}</extra>",
            error_y={
                "type": "data", "symmetric": False,
                "array": bars[0], "arrayminus": bars[1],
            },
        )  # fmt: skip
    fig.add_hline(y=1, line={"color": "#888", "width": 1})
    _layout(
        fig, xaxis_title="step (each adds one lever to the best so far)", yaxis_title="speedup over eager"
    )
    note = (
        "Per model, the named setting's speedup, then each stacked follow-up's, with its 95% CI: a step is "
        "kept when its CI lies above the best before it, dropped when below; the walk stops inside the CI."
    )
    return Chart(title, fig, note)
