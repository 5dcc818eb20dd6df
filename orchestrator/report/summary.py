"""What the sweep found, before any chart: the best compile setting per model, and aggregates per axis."""

from __future__ import annotations

import pandas as pd

from orchestrator.core.numbers import geomean, present
from orchestrator.results.present import axis_text, ci_text, mode_rank

AGGREGATE_AXES = ("mode", "size", "dtype", "task", "strategy", "dynamic")


def _verdict(low: float, high: float) -> str:
    if not (present(low) and present(high)):
        return "no CI"
    return "faster" if low > 1 else "slower than eager" if high < 1 else "within noise (CI spans 1)"


def best_per_model(df: pd.DataFrame, model_cols: list[str], setting_cols: list[str]) -> pd.DataFrame:
    """One row per model: its fastest compiled setting (mode and any other swept compile axis) among
    the jobs that finished ok, with that job's speedup, CI, compile cost and break-even steps."""
    rows = []
    groups = df.groupby(model_cols, dropna=False, sort=False) if model_cols else [((), df)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        ok = part[(part["status"] == "ok") & (part["mode"] != "eager")]
        ok = ok[ok["speedup"].notna()] if "speedup" in ok else ok.iloc[0:0]
        row = {"model": " ".join(axis_text(v) for v in key) or "all", "jobs": len(part)}
        row["failed"] = int((part["status"] != "ok").sum())
        if ok.empty:
            rows.append({**row, "best": "-", "verdict": "no compiled job finished ok"})
            continue
        best = ok.loc[ok["speedup"].idxmax()]
        low, high = best.get("speedup_ci_low"), best.get("speedup_ci_high")
        rows.append(
            {
                **row,
                "best": " ".join(
                    axis_text(best[c]) if c == "mode" else f"{c}={axis_text(best[c])}" for c in setting_cols
                ),
                "speedup": best["speedup"],
                "95% CI": ci_text(low, high),
                "compile s": best.get("compile_s"),
                "break-even steps": best.get("break_even_steps"),
                "verdict": _verdict(low, high),
                "job": best["job_id"],
            }
        )
    columns = [
        "model",
        "best",
        "speedup",
        "95% CI",
        "compile s",
        "break-even steps",
        "verdict",
        "jobs",
        "failed",
    ]
    return pd.DataFrame(rows).reindex(columns=[*columns, "job"])


def by_axis(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per value of one axis: jobs, ok, geometric-mean / median / min / max speedup, median compile s."""
    rows = []
    for value, part in df.groupby(df[column].map(axis_text), sort=False):
        ok = part[part["status"] == "ok"]
        speed = ok["speedup"] if "speedup" in ok else pd.Series(dtype=float)
        rows.append(
            {
                column: value,
                "jobs": len(part),
                "ok": len(ok),
                "geomean speedup": geomean(speed),
                "median": speed.median(),
                "min": speed.min(),
                "max": speed.max(),
                "median compile s": ok["compile_s"].median() if "compile_s" in ok else None,
            }
        )
    out = pd.DataFrame(rows)
    return out.iloc[out[column].map(mode_rank).argsort(kind="stable")] if column == "mode" else out


def aggregates(df: pd.DataFrame, swept: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """The per-axis tables worth showing: mode, size, dtype, ... where the sweep varies them."""
    return [(c, by_axis(df, c)) for c in AGGREGATE_AXES if c in swept and c in df]
