"""The suite summary of a sweep over several models, in the style of PyTorch's own performance
dashboard: per compile setting the geometric-mean speedup over the models that passed, with a 95%
CI, and the pass rate; then flags on single jobs (speedup < 0.95, compile > 120 s, memory ratio > 1.1,
graph breaks)."""

from __future__ import annotations

import statistics

import pandas as pd

from orchestrator.analysis.answers import Suite, SuiteFlag, SuiteSetting
from orchestrator.core.numbers import geomean, is_false, number
from orchestrator.core.result import COL
from orchestrator.core.stats import geomean_ci
from orchestrator.results.present import axis_text, ci_text, sig

SLOW_SPEEDUP = 0.95  # PyTorch's dashboard: a compiled model this much slower than eager is flagged
SLOW_COMPILE_S = 120.0
MEMORY_RATIO = 1.1  # compiled peak over eager peak worth a flag (and a verdict risk)


def passed_job(row: pd.Series) -> bool:
    """Finished ok, parity not failed, and a speedup to judge."""
    status_ok = row.get(COL.status) == "ok" and not is_false(row.get(COL.parity_ok))
    return status_ok and number(row.get(COL.speedup)) is not None


def setting_text(row: pd.Series, settings: list[str]) -> str:
    """A compile setting in words: its mode, then each other swept setting as key=value."""
    return " ".join(axis_text(row[c]) if c == COL.mode else f"{c}={axis_text(row[c])}" for c in settings)


def job_flags(row: pd.Series) -> list[str]:
    """The dashboard-style flags of one compiled job that finished ok."""
    out = []
    speedup, compile_s, ratio = (
        number(row.get(COL.speedup)),
        number(row.get(COL.compile_s)),
        number(row.get(COL.memory_ratio)),
    )
    if speedup is not None and speedup < SLOW_SPEEDUP:
        out.append(f"speedup {sig(speedup)} < {SLOW_SPEEDUP}")
    if compile_s is not None and compile_s > SLOW_COMPILE_S:
        out.append(f"compile {sig(compile_s)} s > {SLOW_COMPILE_S:.0f} s")
    if ratio is not None and ratio > MEMORY_RATIO:
        out.append(f"memory ratio {sig(ratio)} > {MEMORY_RATIO}")
    breaks = number(row.get(COL.graph_breaks))
    if breaks:  # within one sweep every break is new; `compare` flags those new against a baseline
        out.append(f"{breaks:.0f} graph break(s)")
    return out


def suite_summary(df: pd.DataFrame, settings: list[str]) -> Suite:
    """Per compiled setting over the models (column `_model`): geomean speedup, CI, pass rate; flags."""
    compiled = df[df[COL.mode] != "eager"]
    names = (
        compiled.apply(lambda r: setting_text(r, settings), axis=1) if len(compiled) else pd.Series(dtype=str)
    )
    rows, flags = [], []
    for setting, part in compiled.groupby(names, sort=False):
        ok = part[pd.Series([passed_job(r) for _, r in part.iterrows()], index=part.index, dtype=bool)]
        speed = [float(v) for v in ok[COL.speedup]] if len(ok) else []
        g, low, high = (
            geomean_ci(
                speed,
                [number(v) for v in ok[COL.speedup_ci_low]],
                [number(v) for v in ok[COL.speedup_ci_high]],
            )
            if speed
            else (None, None, None)
        )
        rows.append(
            SuiteSetting(
                setting=setting,
                models=int(part["_model"].nunique()),
                passed=int(ok["_model"].nunique()),
                pass_rate=ok["_model"].nunique() / part["_model"].nunique(),
                geomean_speedup=g,
                ci=[low, high],
                compile_s_median=_median(ok.get(COL.compile_s)),
                memory_ratio_geomean=geomean(ok[COL.memory_ratio]) if COL.memory_ratio in ok else None,
            )
        )
        for _, r in ok.iterrows():
            flags += [SuiteFlag(r["_model"], setting, f) for f in job_flags(r)]
    return Suite(int(df["_model"].nunique()), rows, flags)


def _median(values: pd.Series | None) -> float | None:
    known = [v for v in map(number, values if values is not None else []) if v is not None]
    return statistics.median(known) if known else None


def suite_lines(suite: Suite, width: int) -> list[str]:
    parts = [
        f"{s.setting} {sig(s.geomean_speedup)}x [{ci_text(*s.ci)}] "
        f"pass {s.passed}/{s.models}, compile {sig(s.compile_s_median)} s"
        for s in suite.settings
    ]
    out = [f"suite of {suite.models} models, geomean speedup: " + " · ".join(parts)]
    out += [f"flag {f.model} {f.setting}: {f.flag}" for f in suite.flags]
    return [line if len(line) <= width else line[: width - 3] + "..." for line in out]


def suite_table(suite: Suite) -> pd.DataFrame:
    """The per-setting rows as a table for the dashboard."""
    return pd.DataFrame(
        [
            {
                "setting": s.setting,
                "geomean speedup": s.geomean_speedup,
                "95% CI": ci_text(*s.ci),
                "pass rate": f"{s.passed}/{s.models}",
                "median compile s": s.compile_s_median,
                "memory ratio (geomean)": s.memory_ratio_geomean,
                "flags": sum(f.setting == s.setting for f in suite.flags),
            }
            for s in suite.settings
        ]
    )
