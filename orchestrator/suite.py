"""The suite summary of a sweep over several models, in the style of PyTorch's own performance
dashboard: per compile setting the geometric-mean speedup over the models that passed, with a 95%
CI, and the pass rate; then flags on single jobs (speedup < 0.95, compile > 120 s, memory ratio > 1.1,
graph breaks)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from orchestrator.present import ci_text, present, sig

SLOW_SPEEDUP = 0.95  # PyTorch's dashboard: a compiled model this much slower than eager is flagged
SLOW_COMPILE_S = 120.0
MEMORY_RATIO = 1.1
Z95 = 1.959964


def _f(v: Any) -> float | None:
    return float(v) if present(v) and isinstance(v, int | float) and not isinstance(v, bool) else None


def geomean_ci(speedups: list[float], lows: list[float | None], highs: list[float | None]) -> tuple:
    """Geometric mean of the models' speedups and its 95% CI.

    The suite is a fixed set of models (as in PyTorch's dashboard), so the interval carries each
    model's measurement noise, not the spread between models: in log space, each model's CI gives its
    standard error (width / 2z), and the mean of k independent logs has sqrt(sum se^2) / k. A model
    without a CI leaves the suite's CI unknown."""
    logs = [math.log(s) for s in speedups]
    mean = sum(logs) / len(logs)
    if any(lo is None or hi is None or lo <= 0 for lo, hi in zip(lows, highs, strict=True)):
        return math.exp(mean), None, None
    widths = [math.log(hi) - math.log(lo) for lo, hi in zip(lows, highs, strict=True)]  # type: ignore[arg-type]
    se = math.sqrt(sum((w / (2 * Z95)) ** 2 for w in widths)) / len(logs)
    return math.exp(mean), math.exp(mean - Z95 * se), math.exp(mean + Z95 * se)


def job_flags(row: pd.Series) -> list[str]:
    """The dashboard-style flags of one compiled job that finished ok."""
    out = []
    speedup, compile_s, ratio = _f(row.get("speedup")), _f(row.get("compile_s")), _f(row.get("memory_ratio"))
    if speedup is not None and speedup < SLOW_SPEEDUP:
        out.append(f"speedup {sig(speedup)} < {SLOW_SPEEDUP}")
    if compile_s is not None and compile_s > SLOW_COMPILE_S:
        out.append(f"compile {sig(compile_s)} s > {SLOW_COMPILE_S:.0f} s")
    if ratio is not None and ratio > MEMORY_RATIO:
        out.append(f"memory ratio {sig(ratio)} > {MEMORY_RATIO}")
    breaks = _f(row.get("graph_breaks"))
    if breaks:  # within one sweep every break is new; `compare` flags those new against a baseline
        out.append(f"{breaks:.0f} graph break(s)")
    return out


def suite_summary(df: pd.DataFrame, settings: list[str]) -> dict[str, Any]:
    """Per compiled setting over the models (column `_model`): geomean speedup, CI, pass rate; flags."""
    from orchestrator.verdict import passed_job, setting_text

    compiled = df[df["mode"] != "eager"]
    names = (
        compiled.apply(lambda r: setting_text(r, settings), axis=1) if len(compiled) else pd.Series(dtype=str)
    )
    rows, flags = [], []
    for setting, part in compiled.groupby(names, sort=False):
        ok = part[pd.Series([passed_job(r) for _, r in part.iterrows()], index=part.index, dtype=bool)]
        speed = [float(v) for v in ok["speedup"]] if len(ok) else []
        g, low, high = (
            geomean_ci(speed, [_f(v) for v in ok["speedup_ci_low"]], [_f(v) for v in ok["speedup_ci_high"]])
            if speed
            else (None, None, None)
        )
        rows.append(
            {
                "setting": setting,
                "models": int(part["_model"].nunique()),
                "passed": int(ok["_model"].nunique()),
                "pass_rate": ok["_model"].nunique() / part["_model"].nunique(),
                "geomean_speedup": g,
                "ci": [low, high],
            }
        )
        for _, r in ok.iterrows():
            flags += [{"model": r["_model"], "setting": setting, "flag": f} for f in job_flags(r)]
    return {"models": int(df["_model"].nunique()), "settings": rows, "flags": flags}


def suite_lines(suite: dict[str, Any], width: int) -> list[str]:
    parts = [
        f"{s['setting']} {sig(s['geomean_speedup'])}x [{ci_text(*s['ci'])}] pass {s['passed']}/{s['models']}"
        for s in suite["settings"]
    ]
    out = [f"suite of {suite['models']} models, geomean speedup: " + " · ".join(parts)]
    out += [f"flag {f['model']} {f['setting']}: {f['flag']}" for f in suite["flags"]]
    return [line if len(line) <= width else line[: width - 3] + "..." for line in out]


def suite_table(suite: dict[str, Any]) -> pd.DataFrame:
    """The per-setting rows as a table for the dashboard."""
    return pd.DataFrame(
        [
            {
                "setting": s["setting"],
                "geomean speedup": s["geomean_speedup"],
                "95% CI": ci_text(*s["ci"]),
                "pass rate": f"{s['passed']}/{s['models']}",
                "flags": sum(f["setting"] == s["setting"] for f in suite["flags"]),
            }
            for s in suite["settings"]
        ]
    )
