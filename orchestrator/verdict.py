"""The verdict: per model, the compile setting (or eager) that saves the most time over the run the
user declares (`verdict.steps`, or `verdict.serve_s` of serving), net of its compile cost (cold or
warm), among the settings that passed; 'no measurable gain' when the speedup's CI includes 1; and
the risks of the setting it names. Written to `verdict.json`, printed, and shown on the dashboard.
One job, the verdict; a little over 250 lines because its lines of text are built here too.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.config import VerdictConfig
from orchestrator.present import (
    axis_text,
    ci_text,
    in_mode_order,
    join_values,
    model_columns,
    present,
    with_axes,
)
from orchestrator.present import sig as _sig
from orchestrator.results import read_plan, read_result, write_json_atomic

VERDICT_FILE = "verdict.json"
MEMORY_RISE = 1.1  # compiled peak over eager peak worth a warning (PyTorch's dashboard flags 1.1)
THIN_MARGIN = 0.5  # a parity error past this fraction of its limit is a thin margin
LINE_WIDTH = 160  # printed verdict lines, as the plain table (verdict.json has every word)


def _num(row: pd.Series, key: str) -> float | None:
    v = row.get(key)
    return float(v) if present(v) and isinstance(v, int | float) and not isinstance(v, bool) else None


def duration(seconds: float | None) -> str:
    """Seconds as a short human duration: 12.3 s, 4.2 min, 3.1 h, 2.5 days."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    for unit, size, cap in (("s", 1, 90), ("min", 60, 3600), ("h", 3600, 48 * 3600)):
        if s < cap:
            return f"{sign}{_sig(s / size)} {unit}"
    return f"{sign}{_sig(s / 86400)} days"


def run_length(row: pd.Series, vc: VerdictConfig) -> tuple[float, str]:
    """Steps of the declared run for this job, and the words for it."""
    eager_ms = _num(row, "eager_ms")
    if vc.serve_s is not None and row.get("task") == "infer" and eager_ms:
        calls = vc.serve_s / (eager_ms / 1000)  # what eager serves in that time at full load
        return calls, f"{duration(vc.serve_s)} of serving ({_sig(calls)} calls)"
    return float(vc.steps), f"{vc.steps:,} steps"


def compile_cost(row: pd.Series, cache: str) -> tuple[float, str]:
    """Seconds of compiling the run pays (recompiles over the shape schedule included), and which."""
    recompile = _num(row, "dyn_compile_s") or 0.0
    first = _num(row, "compile_s") or 0.0
    if cache == "warm":
        warm = _num(row, "compile_warm_s")
        return (warm, "warm") if warm is not None else (first, "compile_s: no warm probe")
    cold = _num(row, "compile_cold_s")
    return (cold + recompile, "cold") if cold is not None else (first + recompile, "compile_s: shared cache")


def assess(row: pd.Series, vc: VerdictConfig) -> dict[str, Any]:
    """A passed compiled job's figures for the run: net seconds saved (point and CI), payback steps."""
    steps, run = run_length(row, vc)
    cost, cost_kind = compile_cost(row, vc.cache)
    eager_s = (_num(row, "eager_ms") or math.nan) / 1000
    speedup, low, high = (_num(row, k) for k in ("speedup", "speedup_ci_low", "speedup_ci_high"))

    def net(s: float | None) -> float | None:  # seconds saved per step at speedup s, over the run
        return steps * eager_s * (1 - 1 / s) - cost if s and math.isfinite(eager_s) else None

    per_step = eager_s * (1 - 1 / speedup) if speedup else math.nan
    return {
        "speedup": speedup,
        "ci": [low, high],
        "measurable": low is not None and low > 1,
        "steps": steps,
        "run": run,
        "compile_s": cost,
        "compile_kind": cost_kind,
        "saved_per_step_ms": per_step * 1000,
        "net_saved_s": net(speedup),
        "net_saved_ci_s": [net(low), net(high)],
        "payback_steps": cost / per_step if per_step > 0 else None,
    }


def risks(row: pd.Series, result: dict) -> list[str]:
    """What could go wrong with this setting, in a few words each."""
    out = []
    if (_num(row, "graph_breaks") or 0) > 0:
        reasons = Counter(b.get("reason", "").splitlines()[0][:60] for b in result.get("break_reasons") or [])
        top = f" (top: {reasons.most_common(1)[0][0]})" if reasons else ""
        out.append(f"{row['graph_breaks']:.0f} graph break(s){top}")
    if (_num(row, "dyn_recompiles") or 0) > 0:
        out.append(
            f"{row['dyn_recompiles']:.0f} recompile(s) over the {_num(row, 'dyn_shapes') or 0:.0f}-shape "
            f"schedule (+{duration(_num(row, 'dyn_compile_s'))})"
        )
    if (_num(row, "cudagraph_skips") or 0) > 0:
        why = (result.get("cudagraph_skip_reasons") or ["no reason recorded"])[0][:60]
        out.append(f"CUDA graphs skipped {row['cudagraph_skips']:.0f}x ({why})")
    ratio = _num(row, "memory_ratio")
    if ratio is not None and ratio > MEMORY_RISE:
        out.append(f"memory up {ratio:.2f}x ({_sig(_num(row, 'compiled_peak_gib'))} GiB)")
    err, limit = _num(row, "parity_err"), _num(row, "parity_limit")
    if err is not None and limit and err / limit > THIN_MARGIN:
        out.append(f"parity margin thin: error {err / limit:.0%} of its limit")
    if _false(row.get("conv_ok")):
        out.append(
            f"convergence drift: loss off by up to {_sig(_num(row, 'conv_divergence'))} "
            f"(eager vs eager {_sig(_num(row, 'conv_baseline_divergence'))})"
        )
    return out


def _false(value: Any) -> bool:
    """A boolean field that says False (a bool, or numpy's, after a table round trip)."""
    return present(value) and not bool(value)


def passed_job(row: pd.Series) -> bool:
    """Finished ok, parity not failed, and a speedup to judge."""
    return row.get("status") == "ok" and not _false(row.get("parity_ok")) and _num(row, "speedup") is not None


def setting_text(row: pd.Series, settings: list[str]) -> str:
    return " ".join(axis_text(row[c]) if c == "mode" else f"{c}={axis_text(row[c])}" for c in settings)


def decide(part: pd.DataFrame, settings: list[str], vc: VerdictConfig, sweep_dir: Path) -> dict[str, Any]:
    """One model's verdict from its jobs."""
    compiled = part[part["mode"] != "eager"]
    passed = compiled[
        pd.Series([passed_job(r) for _, r in compiled.iterrows()], index=compiled.index, dtype=bool)
    ]
    failed = compiled.drop(passed.index)
    out: dict[str, Any] = {
        "jobs": len(part),
        "failed": [f"{setting_text(r, settings)} ({r['status']})" for _, r in failed.iterrows()],
    }
    if passed.empty:
        why = "no compiled setting passed" if len(compiled) else "no compiled setting in this sweep"
        return {**out, "choice": "eager", "outcome": "none_passed", "why": why}
    figures = {i: assess(r, vc) for i, r in passed.iterrows()}
    gains = [i for i in figures if figures[i]["measurable"]]
    pick = max(gains or figures, key=lambda i: figures[i]["net_saved_s"] if gains else figures[i]["speedup"])
    f, row = figures[pick], passed.loc[pick]
    setting, ci = setting_text(row, settings), ci_text(*f["ci"])
    gain = f"{f['speedup']:.3g}x [{ci}]"
    if gains and (f["net_saved_s"] or 0) > 0:
        choice, outcome = setting, "compile"
        why = (
            f"saves {duration(f['net_saved_s'])} over {f['run']} net of {duration(f['compile_s'])} "
            f"{f['compile_kind']} compile ({gain}; pays back after {_sig(f['payback_steps'])} steps)"
        )
    elif gains:
        choice, outcome = "eager", "eager_cost"
        payback = f"pays back only after {_sig(f['payback_steps'])} steps" if f["payback_steps"] else ""
        why = (
            f"compile cost never paid back over {f['run']}: {setting} is {gain} but its "
            f"{duration(f['compile_s'])} {f['compile_kind']} compile {payback}"
        )
    elif f["ci"][1] is not None and f["ci"][1] < 1:
        choice, outcome, why = "eager", "slower", f"compiled is slower: best {setting} {gain}"
    else:
        choice, outcome = "eager", "no_gain"
        why = f"no measurable gain: best {setting} {gain}, its CI includes 1"
    result = read_result(sweep_dir / "jobs" / str(row["job_id"])) or {}
    control = part[(part["mode"] == "eager") & (part["status"] == "ok")]
    notes = risks(row, result)
    for _, c in control.iterrows():  # eager against eager should read 1: anything else is bias
        low, high = _num(c, "speedup_ci_low"), _num(c, "speedup_ci_high")
        if low is not None and high is not None and (low > 1 or high < 1):
            notes.append(f"eager control reads {_num(c, 'speedup'):.3g}x [{ci_text(low, high)}]: timing bias")
    return {**out, "choice": choice, "outcome": outcome, "why": why, "setting": setting,
            "job_id": row["job_id"], **f, "risks": notes}  # fmt: skip


def compute(df: pd.DataFrame, sweep_dir: Path, vc: VerdictConfig) -> dict[str, Any]:
    """The verdict of every model of a results table, and the suite summary where there are several."""
    from orchestrator.suite import suite_summary

    df, swept = with_axes(df, read_plan(sweep_dir))
    df = in_mode_order(df)
    models = model_columns(df, swept)
    settings = ["mode"] + [c for c in swept if c != "mode" and c not in models]
    # A model is named by what tells it apart; what all models share is said once (`shared`).
    varying = [c for c in models if df[c].map(axis_text).nunique() > 1]
    names = join_values(df, varying or models)
    shared = " ".join(axis_text(df[c].iloc[0]) for c in models if c not in varying) if varying else ""
    verdicts = []
    for name, part in df.groupby(names, sort=False):
        verdicts.append({"model": name or "all", **decide(part, settings, vc, sweep_dir)})
    suite = suite_summary(df.assign(_model=names), settings) if len(verdicts) > 1 else None
    return {
        "steps": vc.steps,
        "serve_s": vc.serve_s,
        "cache": str(vc.cache),
        "shared": shared,
        "models": verdicts,
        "suite": suite,
    }


def lines(verdict: dict[str, Any]) -> list[str]:
    """One line per model (a second with its risks and failures, if any), then the suite's; each cut to
    LINE_WIDTH."""
    serving = f"{duration(verdict['serve_s'])} of serving (infer) or " if verdict.get("serve_s") else ""
    head = f"verdict for {serving}{verdict['steps']:,} steps, {verdict['cache']} compile"
    out = [head + (f"; every model: {verdict['shared']}" if verdict.get("shared") else "")]
    for v in verdict["models"]:
        head = f"use {v['choice']}" if v["outcome"] == "compile" else "eager"
        out.append(f"verdict {v['model']}: {head}: {v['why']}")
        label = "risks" if v["outcome"] == "compile" else f"risks of {v.get('setting')}"
        more = ([f"{label}: {'; '.join(v['risks'])}"] if v.get("risks") else []) + (
            [f"failed: {', '.join(v['failed'])}"] if v["failed"] else []
        )
        out += [f"  {'; '.join(more)}"] if more else []  # the model's second line, only when there is news
    if verdict.get("suite"):
        from orchestrator.suite import suite_lines

        out += suite_lines(verdict["suite"], LINE_WIDTH)
    return [line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 3] + "..." for line in out]


def write_verdict(sweep_dir: Path, df: pd.DataFrame, vc: VerdictConfig) -> dict[str, Any]:
    verdict = compute(df, sweep_dir, vc)
    write_json_atomic(sweep_dir / VERDICT_FILE, verdict)
    return verdict


def read_verdict(sweep_dir: Path) -> dict[str, Any] | None:
    path = sweep_dir / VERDICT_FILE
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def print_verdict(verdict: dict[str, Any], console: Any) -> None:
    for line in lines(verdict):
        console.print(line, markup=False, highlight=False)


def run_verdict(sweep_dir: Path, vc: VerdictConfig) -> int:
    """The `verdict` command: recompute from the results, print, rewrite verdict.json and the dashboard."""
    from orchestrator.config import ConfigError
    from orchestrator.console import make_console
    from orchestrator.report import write_dashboard
    from orchestrator.results import gather

    df = gather(sweep_dir)
    if df.empty:
        raise ConfigError(f"{sweep_dir} has no results yet")
    console = make_console()
    print_verdict(write_verdict(sweep_dir, df, vc), console)
    console.print(f"verdict: {sweep_dir / VERDICT_FILE}")
    console.print(f"dashboard: {write_dashboard(sweep_dir, df)}")
    return 0
