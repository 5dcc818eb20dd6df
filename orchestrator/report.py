"""The dashboard: one self-contained HTML page per sweep (plotly inlined; no server, no network)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

DASHBOARD_FILE = "dashboard.html"

TABLE_KEYS = [
    "job_id",
    "label",
    "status",
    "workload",
    "size",
    "task",
    "dtype",
    "mode",
    "dynamic",
    "strategy",
    "world_size",
    "compile_s",
    "eager_ms",
    "compiled_ms",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "compiled_tokens_per_s",
    "compiled_mfu",
    "break_even_steps",
    "eager_peak_gib",
    "compiled_peak_gib",
    "graphs",
    "graph_breaks",
    "dyn_recompiles",
    "dyn_compile_s",
    "parity_ok",
    "parity_err",
    "scaling_efficiency",
]

# Runs in the page: records JS errors where a test (or a person) can see them, and sorts tables.
PAGE_SCRIPT = """
window.addEventListener('error', function (e) {
  var box = document.getElementById('js-errors');
  box.textContent += (e.message || 'error') + '\\n';
  box.style.display = 'block';
});
function sortTable(th) {
  var table = th.closest('table'), body = table.tBodies[0], idx = th.cellIndex;
  var asc = th.dataset.asc !== 'true'; th.dataset.asc = asc;
  var rows = Array.from(body.rows);
  rows.sort(function (a, b) {
    var x = a.cells[idx].dataset.v, y = b.cells[idx].dataset.v;
    var nx = parseFloat(x), ny = parseFloat(y);
    var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
    return asc ? c : -c;
  });
  rows.forEach(function (r) { body.appendChild(r); });
}
window.addEventListener('load', function () {
  document.body.dataset.plots = document.querySelectorAll('.js-plotly-plot .main-svg').length;
  document.body.dataset.ready = 'true';
});
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
th { background: #f4f4f4; cursor: pointer; position: sticky; top: 0; }
td.s { text-align: left; } tr.bad td { background: #fde8e8; }
#js-errors { display: none; color: #b00; white-space: pre; border: 1px solid #b00; padding: 8px; }
.note { color: #666; font-size: 13px; }
"""


def _cell(value: object) -> tuple[str, str]:
    """(shown text, sort key) of a table cell."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-", ""
    if isinstance(value, float):
        return (f"{value:.4g}", repr(value))
    return str(value), str(value)


def html_table(df: pd.DataFrame, keys: list[str], table_id: str) -> str:
    keys = [k for k in keys if k in df]
    head = "".join(f"<th onclick='sortTable(this)'>{html.escape(k)}</th>" for k in keys)
    rows = []
    for _, row in df.iterrows():
        cells = []
        for k in keys:
            text, sort = _cell(row.get(k))
            cls = " class='s'" if not isinstance(row.get(k), int | float) else ""
            cells.append(f"<td{cls} data-v='{html.escape(sort, quote=True)}'>{html.escape(text)}</td>")
        bad = " class='bad'" if row.get("status", "ok") != "ok" else ""
        rows.append(f"<tr{bad}>{''.join(cells)}</tr>")
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _group_label(df: pd.DataFrame) -> pd.Series:
    parts = [
        c
        for c in ("workload", "size", "task", "dtype", "strategy", "dynamic")
        if c in df and df[c].nunique() > 1
    ]
    if not parts:
        return df["size"].map(str) if "size" in df else pd.Series(["all"] * len(df), index=df.index)
    return df[parts].map(lambda v: "-" if v is None or v != v else str(v)).agg(" ".join, axis=1)


def speedup_figure(df: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    ok = df[df["status"] == "ok"].copy()
    ok["group"] = _group_label(ok)
    for group, part in ok.groupby("group", sort=False):
        fig.add_bar(
            x=part["mode"],
            y=part["speedup"],
            name=str(group),
            error_y={
                "type": "data",
                "symmetric": False,
                "array": part["speedup_ci_high"] - part["speedup"],
                "arrayminus": part["speedup"] - part["speedup_ci_low"],
            },
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    fig.update_layout(
        title="Speedup compiled vs eager (median of pair ratios, 95% bootstrap CI)",
        yaxis_title="speedup (x)",
        barmode="group",
        height=420,
    )
    return fig


def compile_figure(df: pd.DataFrame) -> go.Figure:
    ok = df[df["status"] == "ok"].copy()
    ok["group"] = _group_label(ok)
    be = ok["break_even_steps"] if "break_even_steps" in ok else pd.Series([None] * len(ok), index=ok.index)
    fig = go.Figure(
        go.Scatter(
            x=ok["compile_s"],
            y=ok["speedup"],
            mode="markers+text",
            text=ok["mode"],
            textposition="top center",
            customdata=list(zip(ok["group"], be, strict=True)),
            hovertemplate="%{text} %{customdata[0]}<br>compile %{x:.2f} s<br>speedup %{y:.3f}"
            "<br>break-even %{customdata[1]:.0f} steps<extra></extra>",
            marker={"size": 11},
        )
    )
    fig.update_layout(
        title="Compile time vs speedup (hover: break-even steps = compile s / time saved per step)",
        xaxis_title="compile s",
        yaxis_title="speedup (x)",
        height=420,
    )
    return fig


def memory_figure(df: pd.DataFrame) -> go.Figure | None:
    if "eager_peak_gib" not in df or df["eager_peak_gib"].isna().all():
        return None
    ok = df[df["status"] == "ok"]
    labels = ok["label"]
    fig = go.Figure(
        [
            go.Bar(x=labels, y=ok["eager_peak_gib"], name="eager"),
            go.Bar(x=labels, y=ok["compiled_peak_gib"], name="compiled"),
        ]
    )
    title = "Peak memory per rank (GiB)"
    if "memory_note" in ok and ok["memory_note"].notna().any():
        title += "<br><sub>CUDA-graph modes: the graph pool (made at capture) is not in the peak</sub>"
    fig.update_layout(title=title, barmode="group", height=440)
    return fig


def graph_figure(df: pd.DataFrame) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("graph breaks", "recompiles over the shape schedule"))
    x = df["label"]
    fig.add_bar(x=x, y=df.get("graph_breaks", pd.Series([0] * len(df))), name="graph breaks", row=1, col=1)
    if "dyn_recompiles" in df:
        fig.add_bar(x=x, y=df["dyn_recompiles"], name="recompiles", row=1, col=2)
    fig.update_layout(height=420, showlegend=False)
    return fig


def parity_figure(df: pd.DataFrame) -> go.Figure | None:
    if "parity_err" not in df:
        return None
    colors = ["#2a7" if v is True else "#c33" for v in df.get("parity_ok", [])]
    fig = go.Figure(go.Bar(x=df["label"], y=df["parity_err"], marker_color=colors, name="compiled error"))
    if "parity_limit" in df:
        fig.add_scatter(
            x=df["label"],
            y=df["parity_limit"],
            mode="markers",
            name="limit",
            marker={"symbol": "line-ew-open", "size": 30, "color": "#000"},
        )
    fig.update_layout(
        title="Parity: relative error of compiled vs reference (green pass, red fail)",
        yaxis_type="log",
        height=420,
    )
    return fig


def _reasons(sweep_dir: Path) -> list[tuple[str, str, str]]:
    out = []
    for path in sorted((sweep_dir / "jobs").glob("*/result.json")):
        result = json.loads(path.read_text())
        for br in result.get("break_reasons") or []:
            out.append((result.get("label", result["job_id"]), br.get("reason", ""), br.get("where") or ""))
    return out


def write_dashboard(sweep_dir: Path, df: pd.DataFrame, compare: pd.DataFrame | None = None) -> Path:
    """Write <sweep_dir>/dashboard.html from the results table (and a compare table, if given)."""
    df = df.copy()
    if "label" not in df:
        df["label"] = df["job_id"]
    sections: list[str] = []
    figures = [
        ("Speedup", speedup_figure(df)),
        ("Compile cost", compile_figure(df)),
        ("Memory", memory_figure(df)),
        ("Graph health", graph_figure(df)),
        ("Parity", parity_figure(df)),
    ]
    first = True
    for title, fig in figures:
        if fig is None:
            sections.append(f"<h2>{title}</h2><p class='note'>Not measured in this sweep (CUDA only).</p>")
            continue
        sections.append(
            f"<h2>{title}</h2>"
            + fig.to_html(full_html=False, include_plotlyjs=first, config={"displaylogo": False})
        )
        first = False
    reasons = _reasons(sweep_dir)
    if reasons:
        rdf = pd.DataFrame(reasons, columns=["job", "reason", "where"])
        sections.append(
            "<h2>Graph-break reasons</h2>" + html_table(rdf, ["job", "reason", "where"], "reasons")
        )
    failed = df[df["status"] != "ok"]
    sections.append(
        "<h2>Failures</h2>"
        + (
            html_table(failed, ["job_id", "label", "status", "error", "log_stderr"], "failures")
            if len(failed)
            else "<p class='note'>None: every job finished ok.</p>"
        )
    )
    if compare is not None:
        sections.append(
            "<h2>Compare against baseline</h2>" + html_table(compare, list(compare.columns), "compare")
        )
    env_keys = [c for c in df.columns if c.startswith("env_")]
    env = df[env_keys].drop_duplicates() if env_keys else df.iloc[0:0]
    sections.append("<h2>Environment</h2>" + html_table(env, env_keys, "environment"))
    name = html.escape(str(df["sweep"].iloc[0]) if "sweep" in df and len(df) else sweep_dir.name)
    n_ok = int((df["status"] == "ok").sum())
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>sweep {name}</title><style>{STYLE}</style>
<script>{PAGE_SCRIPT}</script></head>
<body><h1>sweep {name}</h1>
<p class="note">{len(df)} job(s), {n_ok} ok, {len(df) - n_ok} failed. {html.escape(str(sweep_dir))}</p>
<div id="js-errors"></div>
<h2>Results</h2><p class="note">Click a header to sort.</p>{html_table(df, TABLE_KEYS, "results")}
{"".join(sections)}
</body></html>"""
    path = sweep_dir / DASHBOARD_FILE
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page)
    tmp.replace(path)
    return path
