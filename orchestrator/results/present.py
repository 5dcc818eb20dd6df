"""Presentation shared by the console table and the dashboard: mode order, numbers, swept axes."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import pandas as pd

from orchestrator.config.schema import COMPILE_MODES
from orchestrator.core.numbers import present
from orchestrator.core.result import COL, FIELDS, group_columns, keys_of, source_columns

# Plain output (tables, verdict lines) is never wider than this: a CI log or a Slurm log stays readable.
PLAIN_WIDTH = 160
# What identifies a model, and the compile settings a sweep compares on it (core/result.py declares both).
MODEL_KEYS = keys_of("model")
COMPILE_COLUMNS = keys_of("compile")


def sig(value: Any, digits: int = 3) -> str:
    """A number to `digits` significant digits, without exponents for ordinary sizes; '-' if absent."""
    if not present(value):
        return "-"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral) or abs(value) >= 10 ** (digits - 1):
        return f"{value:.0f}"  # whole numbers from 100 on: 1234.5 -> 1234
    x = float(f"{value:.{digits}g}")  # rounded first, so that 99.95 becomes 100, not 100.0
    if x == 0 or abs(x) >= 10 ** (digits - 1):
        return f"{x:.0f}"
    if abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    return f"{x:.{decimals}f}"


def percent(x: float | None) -> str:
    """A share (0.43) as a percentage to 2 significant digits (`43%`, `4.8%`, `0.5%`); '-' if absent."""
    return f"{100 * x:.2g}%" if x is not None and x >= 0.01 else f"{100 * x:.1g}%" if x else "-"


def ci_text(low: Any, high: Any) -> str:
    """A confidence interval as `low-high`, each to 3 significant digits; '-' if either is absent."""
    return f"{sig(low)}-{sig(high)}" if present(low) and present(high) else "-"


def duration(seconds: float | None) -> str:
    """Seconds as a short human duration: 12.3 s, 4.2 min, 3.1 h, 2.5 days."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    for unit, size, cap in (("s", 1, 90), ("min", 60, 3600), ("h", 3600, 48 * 3600)):
        if s < cap:
            return f"{sign}{sig(s / size)} {unit}"
    return f"{sign}{sig(s / 86400)} days"


def mode_rank(mode: Any) -> int:
    return COMPILE_MODES.index(mode) if mode in COMPILE_MODES else len(COMPILE_MODES)


def in_mode_order(df: pd.DataFrame, groups: pd.Series | None = None) -> pd.DataFrame:
    """Rows in canonical mode order (eager, default, ...) within each group (groups in the order they
    first come), stable otherwise."""
    if COL.mode not in df:
        return df
    first = {} if groups is None else {g: i for i, g in enumerate(dict.fromkeys(groups))}
    rank = (groups.map(first) if groups is not None else 0) * len(COMPILE_MODES) + df[COL.mode].map(mode_rank)
    return df.iloc[rank.argsort(kind="stable")]


def axis_text(value: Any) -> str:
    """An axis value as one short token: {dim: 32} -> dim=32, None -> null."""
    if isinstance(value, dict):
        return ",".join(f"{k}={axis_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "[" + ",".join(axis_text(v) for v in value) + "]"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    return str(value)


def with_axes(df: pd.DataFrame, plan: Mapping[str, Mapping[str, Any]]) -> tuple[pd.DataFrame, list[str]]:
    """The table with one column per swept axis (from the sweep's plan.json) and their names.

    An axis that is already a result column (compile.mode -> mode) uses it; any other
    (workload.init_args -> init_args) gets a column of its own, so that rows that differ only
    there are told apart.
    """
    df = df.copy()
    swept: list[str] = []
    groups, sources = group_columns(), source_columns()
    for key in dict.fromkeys(k for job in plan.values() for k in job.get("axes", {})):
        name = sources.get(key) or groups.get(key) or key.split(".")[-1]
        if key.startswith("compile.options"):  # an inductor key says nothing without its prefix
            name = key
        if name in swept:  # two axes with one leaf name (a.size, b.size): the second by its full key
            name = key
        if name not in df:
            df[name] = df[COL.job_id].map(
                {jid: axis_text(j.get("axes", {}).get(key)) for jid, j in plan.items()}
            )
        swept.append(name)
    # Without a plan (or beyond it), a model column that varies is an axis too; an axis of one value
    # (a preset's `workload.size: tiny`) labels nothing.
    swept += [c for c in (*MODEL_KEYS, *COMPILE_COLUMNS) if c in df and c not in swept]
    return df, [c for c in swept if df[c].map(axis_text).nunique() > 1]


def model_columns(df: pd.DataFrame, swept: list[str]) -> list[str]:
    """What names a model: workload, model, size, task, dtype, strategy (those the jobs have) and
    every swept non-compile axis."""
    cols = [c for c in MODEL_KEYS if c in df and df[c].notna().any()]
    return cols + [c for c in swept if c not in cols and c not in COMPILE_COLUMNS and "compile." not in c]


def join_values(df: pd.DataFrame, columns: list[str], sep: str = " ") -> pd.Series:
    """Each row's values of `columns` as one label (all rows the same string if there are none); a
    column of numbers says its name (`batch_size=8`): a number alone names nothing."""
    if not columns:
        return pd.Series([""] * len(df), index=df.index, dtype=object)
    cells = df[columns].map(axis_text)
    for c in columns:
        values = df[c].dropna()
        if len(values) and all(_is_number(v) for v in values):
            cells[c] = f"{FIELDS[c].header or c if c in FIELDS else c}=" + cells[c]
    return cells.agg(sep.join, axis=1)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)
