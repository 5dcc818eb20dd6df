"""Assemble dashboard.html: one self-contained page per sweep (plotly inlined; no server, no network)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.analysis.answers import Upgrade, Verdict
from orchestrator.analysis.follow_up import main_rows
from orchestrator.core.result import COL
from orchestrator.report import (
    answer_chart,
    compile_charts,
    convergence_chart,
    figures,
    upgrade_section,
    verdict_section,
    why_charts,
)
from orchestrator.report.page import asset, grid, html_table, links, results_columns
from orchestrator.report.summary import aggregates
from orchestrator.results.present import (
    ci_text,
    in_mode_order,
    join_values,
    with_axes,
)
from orchestrator.results.recipe import reproduce_command
from orchestrator.results.text import isolation_flag

DASHBOARD_FILE = "dashboard.html"
MAX_REASONS = 200  # graph-break reasons listed (the first ones, in table order)
COARSE_AXES = (COL.size, COL.dtype, COL.task, COL.strategy, COL.workload)


def _unique(df: pd.DataFrame, column: str, by: list[str]) -> None:
    """One mark per job, whatever the labels: a label shared by two jobs gets their job ids."""
    dup = df.duplicated([column, *by], keep=False)
    df.loc[dup, column] = df.loc[dup, column] + " #" + df.loc[dup, COL.job_id].str[:6]


def prepare(
    df: pd.DataFrame, sweep_dir: Path, plan: Mapping[str, Mapping[str, Any]]
) -> tuple[pd.DataFrame, list[str]]:
    """The table with the labels the page uses, in page order: models as planned, modes canonical."""
    df, swept = with_axes(df.assign(label=df[COL.label] if COL.label in df else df[COL.job_id]), plan)
    x_axes = [c for c in swept if c != COL.mode]
    model = [c for c in (COL.workload, COL.size) if c in df]
    df["x_label"] = join_values(df, x_axes or model, " · ")
    df["job_label"] = join_values(df, swept, " · ") if swept else df[COL.mode]
    low, high = (
        df.get(c, pd.Series(None, index=df.index)) for c in (COL.speedup_ci_low, COL.speedup_ci_high)
    )
    df["ci"] = [ci_text(lo, hi) for lo, hi in zip(low, high, strict=True)]
    flags = [isolation_flag(v) for v in df.get(COL.iso_ok, pd.Series(None, index=df.index))]
    if any(flags):  # the column appears where some job was not alone on its device
        df["isolation"] = flags
    if COL.config in df:
        df["reproduce"] = [
            reproduce_command(c) if isinstance(c, dict) and c else None for c in df[COL.config]
        ]
    _unique(df, "x_label", [COL.mode])
    _unique(df, "job_label", [])
    return links(in_mode_order(df, df["x_label"]), sweep_dir), swept


def _coarse(df: pd.DataFrame, swept: list[str]) -> list[str]:
    """The swept axes that an aggregated speedup chart can group by and still fit MAX_BARS bars."""
    out: list[str] = []
    modes = max(1, df[COL.mode].nunique())
    for c in COARSE_AXES:
        if c in swept and len(df[[*out, c]].astype(str).drop_duplicates()) * modes <= figures.MAX_BARS:
            out.append(c)
    return out


def charts(df: pd.DataFrame, swept: list[str]) -> list[figures.Chart]:
    ok = df[df[COL.status] == "ok"]
    axes_title = " · ".join(swept) or "job"
    main = main_rows(ok)  # follow-ups are the verdict's, beside it: not a setting of the sweep
    return [
        figures.speedup_chart(main, [c for c in swept if c != COL.mode], _coarse(main, swept)),
        figures.compile_chart(ok),
        compile_charts.phase_chart(ok),
        compile_charts.cache_kinds_chart(ok),
        compile_charts.wall_chart(df),
        figures.memory_chart(ok, axes_title),
        figures.count_chart(df, COL.graph_breaks, "Graph breaks", "graph breaks", axes_title),
        figures.count_chart(
            df, COL.dyn_recompiles, "Recompiles over the shape schedule", "recompiles", axes_title
        ),
        figures.parity_chart(df, axes_title),
        why_charts.scope_chart(ok),
        why_charts.energy_chart(ok),
        why_charts.roofline_chart(ok),
    ]


def _reasons(df: pd.DataFrame) -> pd.DataFrame:
    """Graph-break reasons with their places, of the jobs that broke (in table order)."""
    broke = df[df[COL.graph_breaks].fillna(0) > 0] if COL.graph_breaks in df else df.iloc[0:0]
    out = []
    for _, row in broke.iterrows():
        listed = row.get(COL.break_reasons)
        for br in listed if isinstance(listed, list) else []:
            out.append((row["job_label"], br.get("reason", ""), br.get("where") or ""))
    return pd.DataFrame(out[:MAX_REASONS], columns=["job", "reason", "where"])


def _section(title: str, body: str, note: str = "") -> str:
    return (
        f"<h2>{html.escape(title)}</h2>" + (f"<p class='note'>{html.escape(note)}</p>" if note else "") + body
    )


def write_dashboard(
    sweep_dir: Path,
    df: pd.DataFrame,
    verdict: Verdict,
    plan: Mapping[str, Mapping[str, Any]],
    upgrade: Upgrade | None = None,
    compare: pd.DataFrame | None = None,
) -> Path:
    """Write <sweep_dir>/dashboard.html from the results table, the sweep's verdict and plan as its
    caller has them (nothing is read back or computed again here), the upgrade A/B of a sweep over
    env.python, and a compare table, where given."""
    df, swept = prepare(df, sweep_dir, plan)
    # One answer per model, first: the verdict's (the page names no other "best" setting).
    sections = [verdict_section.answers(verdict)]
    sections += [_section(*s) for s in verdict_section.sections(verdict)]
    sections += [_section(*s) for s in upgrade_section.sections(upgrade)]
    aggs = aggregates(in_mode_order(main_rows(df)), swept)
    if aggs:
        tables = "".join(f"<div>{html_table(t, list(t.columns), f'by-{c}')}</div>" for c, t in aggs)
        sections.append(
            _section("By " + ", ".join(c for c, _ in aggs), f"<div class='aggregates'>{tables}</div>")
        )
    hidden = []
    plotly_js: bool | str = True  # plotly.js inlined once, with the first chart
    answers = [answer_chart.chart(verdict), answer_chart.path_chart(verdict)]
    for chart in [*answers, *charts(df, swept), *convergence_chart.charts(df)]:
        if chart.figure is None:
            hidden.append(f"{chart.title}: {chart.note}")
            continue
        config = {"displaylogo": False, "responsive": True}
        key = chart.title.split()[0].lower().strip(":")  # chart ids: each title's first word differs
        body = chart.figure.to_html(
            full_html=False, include_plotlyjs=plotly_js, config=config, div_id=f"chart-{key}"
        )
        sections.append(_section(chart.title, f"<div class='chart'>{body}</div>", chart.note))
        plotly_js = False
    if hidden:
        sections.append(
            "<p class='note' id='hidden-charts'>Not drawn: " + html.escape(" · ".join(hidden)) + "</p>"
        )
    sections.append(
        _section(
            "All jobs",
            grid("results", df, results_columns([c for c in swept if c != COL.mode]), hash_key="filter"),
            "Click a header to sort; 'all columns' shows every figure. Filter by words or column=value "
            "(e.g. mode=default); a link to this page can carry one: dashboard.html#filter=mode=default.",
        )
    )
    kernels = why_charts.profile_table(df)
    if len(kernels):
        note = (
            "From the untimed profile pass (verdict.profile in compiled jobs; with bench.profile=true "
            "also traces: jobs/<id>/profile_<side>.json)."
        )
        sections.append(
            _section("Why it is faster: kernels", html_table(kernels, list(kernels.columns), "kernels"), note)
        )
    reasons = _reasons(df)
    if len(reasons):
        sections.append(
            _section("Graph-break reasons", html_table(reasons, list(reasons.columns), "reasons"))
        )
    failed = df[df[COL.status] != "ok"]
    fail_cols = [
        (COL.label, "label", True),
        (COL.status, "status", True),
        (COL.error, "error", True),
        (COL.error_where, "where", True),
        ("log", "traceback", True),
    ]
    sections.append(
        _section(
            "Failures",
            grid("failures", failed, fail_cols) if len(failed) else "",
            "" if len(failed) else "None.",
        )
    )
    if compare is not None:
        cmp_cols = [(c, c, True) for c in compare.columns]
        sections.append(_section("Compare against baseline", grid("compare", compare, cmp_cols)))
    env_keys = [c for c in df.columns if c.startswith("env_")]
    env = df[env_keys].astype(str).drop_duplicates() if env_keys else df.iloc[0:0]
    sections.append(_section("Environment", html_table(env, env_keys, "environment")))
    return _write(sweep_dir, df, sections)


def _write(sweep_dir: Path, df: pd.DataFrame, sections: list[str]) -> Path:
    name = html.escape(str(df[COL.sweep].iloc[0]) if COL.sweep in df and len(df) else sweep_dir.name)
    counts = df[COL.status].value_counts()
    status = ", ".join(f"{n} {s}" for s, n in counts.items())
    where = html.escape(str(sweep_dir))
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>sweep {name}</title><style>{asset("page.css")}</style><script>{asset("page.js")}</script></head>
<body><h1>sweep {name}</h1>
<p class="note">{len(df)} job(s): {html.escape(status)}. <span class="path">{where}</span></p>
<div id="js-errors"></div>
{"".join(sections)}
</body></html>"""
    path = sweep_dir / DASHBOARD_FILE
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page)
    tmp.replace(path)
    return path
