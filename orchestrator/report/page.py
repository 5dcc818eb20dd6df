"""The dashboard page's parts: paged, filterable tables (a job's row links to its logs), the results
table's columns, and the page's assets. dashboard.py puts the sections in order."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.core.result import COL, FIELDS
from orchestrator.results.present import axis_text, sig
from orchestrator.results.table import TABLE_COLUMNS

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50  # rows per page of a table; the whole table is in the page, as JSON

# The results table: these columns first and always shown; the rest behind "all columns": the
# result fields core/result.py marks for the dashboard, then the table's own (scaling efficiency).
KEY_COLUMNS = [
    (COL.label, "label"),
    (COL.mode, "mode"),
    (COL.speedup, "speedup"),
    ("ci", "95% CI"),
    (COL.compile_s, "compile s"),
    (COL.status, "status"),
    ("isolation", "isolation"),
    ("log", "log"),
    ("trace", "trace"),
]
SETTINGS = [rf.key for rf in FIELDS.values() if rf.role and rf.dashboard]
MORE_COLUMNS = [rf.key for rf in FIELDS.values() if rf.dashboard and not rf.role] + list(TABLE_COLUMNS)
MORE_COLUMNS.append("reproduce")  # the command that measures the row again (results/recipe.py)


def _json_value(value: object) -> object:
    """A cell for the page's JSON: numbers to 4 significant digits (the file stays small), None for NaN,
    the text `inf` / `-inf` for an infinite number (JSON has no infinity: a bare `Infinity` token makes
    the browser's JSON.parse throw and every table stay empty; page.js sorts the text as the number)."""
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value if isinstance(value, str | bool) else axis_text(value)
    return value if isinstance(value, int) else float(f"{value:.4g}")


def grid(
    table_id: str,
    df: pd.DataFrame,
    columns: list[tuple[str, str, bool]],
    hash_key: str = "",
    page_size: int = PAGE_SIZE,
) -> str:
    """A paged, filterable, sortable table (page.js) over every row of df: (key, header, shown) columns."""
    columns = [c for c in columns if c[0] in df]
    numeric = {k for k, _, _ in columns if pd.api.types.is_numeric_dtype(df[k]) and df[k].dtype != bool}
    spec = {
        "columns": [
            {"key": k, "label": h, "main": main, "num": k in numeric, "link": k in ("log", "trace")}
            for k, h, main in columns
        ],
        "rows": [
            [_json_value(v) for v in row] for row in df[[k for k, _, _ in columns]].itertuples(index=False)
        ],
        "page_size": page_size,
        "more": any(not main for _, _, main in columns),
    }
    data = json.dumps(spec, separators=(",", ":"), default=str, allow_nan=False).replace("</", "<\\/")
    hashed = f" data-hash='{hash_key}'" if hash_key else ""
    return (
        f"<script type='application/json' id='{table_id}-data'>{data}</script>"
        f"<div class='grid' id='{table_id}' data-src='{table_id}-data'{hashed}></div>"
    )


def html_table(df: pd.DataFrame, keys: list[str], table_id: str) -> str:
    """A small static table (aggregates, environment, reasons)."""
    keys = [k for k in keys if k in df]
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in keys)
    body = []
    for row in df[keys].itertuples(index=False):
        cells = []
        for v in row:
            number = isinstance(v, int | float) and not isinstance(v, bool)
            text = sig(v) if number else "-" if v is None else str(v)
            cells.append(f"<td{' class=n' if number else ''}>{html.escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    table = f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f"<div class='scroll'>{table}</div>"


def _href(path: object, sweep_dir: Path) -> str | None:
    """A link to a job's file: relative to the page where it lies inside the sweep directory."""
    if not isinstance(path, str) or not path:
        return None
    if not Path(path).exists():
        return None
    try:
        return Path(os.path.relpath(path, sweep_dir)).as_posix()
    except ValueError:
        return Path(path).as_uri()


def links(df: pd.DataFrame, sweep_dir: Path) -> pd.DataFrame:
    """`log` (the file with a failure's whole traceback, else the job's stderr) and `trace` (a
    TORCH_TRACE folder, where the job has one) per row."""
    logs = df[COL.log_stderr] if COL.log_stderr in df else pd.Series(None, index=df.index)
    if COL.error_log in df:
        logs = df[COL.error_log].where(df[COL.error_log].notna(), logs)
    own = COL.trace_dir if COL.trace_dir in df else "trace" if "trace" in df else None
    traces = df[own] if own else df[COL.job_id].map(lambda j: str(sweep_dir / "jobs" / j / "trace"))
    # cells of text or None (pandas-stubs takes no None in a list given to assign)
    log: list[Any] = [_href(p, sweep_dir) for p in logs]
    trace: list[Any] = [_href(p, sweep_dir) for p in traces]
    return df.assign(log=log, trace=trace)


def results_columns(extra_axes: list[str]) -> list[tuple[str, str, bool]]:
    """The results table's columns: the key ones, then the settings and the swept axes, then figures."""
    key = {k for k, _ in KEY_COLUMNS}
    more = [c for c in dict.fromkeys([*SETTINGS, *extra_axes, *MORE_COLUMNS]) if c not in key]
    return [(k, h, True) for k, h in KEY_COLUMNS] + [(k, k, False) for k in more]


def asset(name: str) -> str:
    return (HERE / name).read_text()
