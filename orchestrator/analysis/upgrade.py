"""The upgrade A/B: one sweep over `env.python` measures each model and setting in two (or more)
environments, say two torch builds; this reads it as the change from the first environment (the
baseline: the axis's first value) to each other one. Jobs pair by config (everything but the
environment); speed changes are judged by the CI of the change over both jobs' repetitions, single
figures (compile seconds, memory) by the compare thresholds. Per model, one word: `breaks` (a
setting that passed now fails or loses parity), `slower`, `faster` or `no measurable change`.
Written to `upgrade.json`, printed after the verdict, and shown on the dashboard.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.analysis.answers import Comparison, FigureChange, Upgrade, UpgradePair, UpgradeWord
from orchestrator.analysis.compare import paired_timings, samples
from orchestrator.analysis.follow_up import main_rows
from orchestrator.config.plan import job_id_of
from orchestrator.config.schema import CompareConfig
from orchestrator.core.files import write_json_atomic
from orchestrator.core.numbers import number, text
from orchestrator.core.result import COL
from orchestrator.core.stats import change_ci
from orchestrator.core.stats import verdict as change_verdict
from orchestrator.results.present import COMPILE_COLUMNS, PLAIN_WIDTH, join_values, model_columns, with_axes

UPGRADE_FILE = "upgrade.json"
# (result column, its words, the compare threshold that bounds "no change", whether higher is better)
FIGURES = (
    (COL.compiled_ms, "compiled step", "step_rise", False),
    (COL.eager_ms, "eager step", "step_rise", False),
    (COL.speedup, "speedup", "speedup_drop", True),
    (COL.compile_cold_s, "cold compile", "compile_rise", False),
    (COL.compiled_peak_gib, "compiled peak memory", "memory_rise", False),
)
STEP_FIGURES = (COL.compiled_ms, COL.eager_ms)  # what the model's one word is judged on
COUNTS = (
    (COL.graph_breaks, "graph breaks"),
    (COL.dyn_recompiles, "recompiles"),
    (COL.cudagraph_skips, "CUDA-graph skips"),
)


def environments(df: pd.DataFrame, plan: Mapping[str, Any]) -> list[str]:
    """The sweep's environment names, the baseline first (the order of the plan's jobs)."""
    if COL.env not in df or df[COL.env].dropna().nunique() < 2:
        return []
    order = {jid: i for i, jid in enumerate(plan)}
    ranked = df.assign(_order=df[COL.job_id].map(order).fillna(len(order))).sort_values(
        "_order", kind="stable"
    )
    return list(dict.fromkeys(ranked[COL.env].dropna()))


def _pair_key(config: Any) -> str | None:
    """A job's config without its environment: the jobs of one setting in every environment share it."""
    if not isinstance(config, dict):
        return None
    return job_id_of({**config, "env": {"python": None}})


def torch_version(rows: pd.DataFrame) -> str:
    """The torch an environment's jobs measured with (their result's env_torch)."""
    known = rows[COL.env_torch].dropna() if COL.env_torch in rows else pd.Series(dtype=object)
    return str(known.iloc[0]) if len(known) else "?"


def passed(row: pd.Series) -> bool:
    return row.get(COL.status) == "ok" and row.get(COL.parity_ok) is not False


def _figure(
    base: pd.Series, cand: pd.Series, column: str, limit: float, higher_better: bool, timings: dict[str, Any]
) -> FigureChange:
    """One figure's change: with a CI where both jobs kept their repetitions, else one figure each."""
    vb, vc = number(base.get(column)), number(cand.get(column))
    out = FigureChange(baseline=vb, candidate=vc)
    if vb is None or vc is None or vb == 0:
        return out
    # Only the step times and the speedup have repetitions behind them; the rest is one figure a job.
    repeated = column in (COL.speedup, *STEP_FIGURES)
    sb, sc = (samples(timings.get(r[COL.job_id]), column) if repeated else None for r in (base, cand))
    if sb and sc:
        change, low, high = change_ci(sb[0], sc[0], sb[1], sc[1])
        judged = change_verdict(low, high, limit, higher_better)
        return dataclasses.replace(out, change=change, ci=[low, high], judged=judged)
    change = vc / vb - 1
    better = change if higher_better else -change
    judged = "improvement" if better > limit else "regression" if better < -limit else "unchanged"
    return dataclasses.replace(out, change=change, judged=judged + " (one figure each)")


def pairs(df: pd.DataFrame, base_env: str, cand_env: str, th: CompareConfig) -> list[UpgradePair]:
    """Each setting measured in both environments: the change of every figure, counts and status."""
    timings = paired_timings(df)
    df = main_rows(df)  # follow-up jobs answer for a lever, not for an environment
    keyed = df.assign(_pair=df[COL.config].map(_pair_key))
    base = keyed[keyed[COL.env] == base_env].set_index("_pair")
    cand = keyed[keyed[COL.env] == cand_env].set_index("_pair")
    out = []
    for key in base.index.intersection(cand.index):
        b, c = base.loc[key], cand.loc[key]
        out.append(
            UpgradePair(
                model=c["_model"],
                setting=c["_setting"],
                status=[b.get(COL.status), c.get(COL.status)],
                parity_ok=[b.get(COL.parity_ok), c.get(COL.parity_ok)],
                breaks=passed(b) and not passed(c),
                error=None if passed(c) else text(c.get(COL.error), "parity failed")[:300],
                figures={
                    col: _figure(b, c, col, getattr(th, lim), hb, timings) for col, _, lim, hb in FIGURES
                },
                counts={col: [number(b.get(col)), number(c.get(col))] for col, _ in COUNTS},
            )
        )
    return out


def model_word(model_pairs: list[UpgradePair]) -> tuple[str, str]:
    """One word for a model's upgrade, and the change that decided it."""
    broken = [p for p in model_pairs if p.breaks]
    if broken:
        return "breaks", "; ".join(f"{p.setting}: {p.error}" for p in broken)
    steps = [(p, col) for p in model_pairs for col in STEP_FIGURES if p.figures[col].judged]
    for word, judged in (("slower", "regression"), ("faster", "improvement")):
        hits = [(p, col) for p, col in steps if str(p.figures[col].judged).startswith(judged)]
        if hits:
            p, col = max(hits, key=lambda h: abs(h[0].figures[h[1]].change or 0))
            return word, f"{p.setting}: {figure_text(col, p.figures[col])}"
    return "no measurable change", "every step time within the thresholds, or its CI too wide to say"


def figure_text(column: str, f: FigureChange) -> str:
    words = next(w for c, w, _, _ in FIGURES if c == column)
    ci = f" [{f.ci[0]:+.1%}, {f.ci[1]:+.1%}]" if f.ci else ""
    return f"{words} {f.change:+.1%}{ci}"


def compute(df: pd.DataFrame, plan: Mapping[str, Any], th: CompareConfig) -> Upgrade | None:
    """The A/B of a sweep over environments (its `plan` orders them), or None when it has one."""
    envs = environments(df, plan)
    if not envs:
        return None
    df, swept = with_axes(df, plan)
    models = [c for c in model_columns(df, swept) if c != COL.env]
    settings = [c for c in COMPILE_COLUMNS if c in df and (c in swept or c == COL.mode)]
    df = df.assign(_model=join_values(df, models), _setting=join_values(df, settings))
    versions = {env: torch_version(df[df[COL.env] == env]) for env in envs}
    comparisons = []
    for cand_env in envs[1:]:
        found = pairs(df, envs[0], cand_env, th)
        words = [
            UpgradeWord(model, *model_word([p for p in found if p.model == model]))
            for model in dict.fromkeys(p.model for p in found)
        ]
        comparisons.append(Comparison(envs[0], cand_env, found, words))
    return Upgrade(envs, versions, comparisons)


def lines(upgrade: Upgrade) -> list[str]:
    """The A/B in plain lines: one per model and candidate environment."""
    out = []
    torch = upgrade.torch
    for comp in upgrade.comparisons:
        b, c = comp.baseline, comp.candidate
        out.append(
            f"upgrade {b} (torch {torch[b]}) -> {c} (torch {torch[c]}): {len(comp.pairs)} setting(s) paired"
        )
        out += [f"  {v.model}: {v.verdict}: {v.why}" for v in comp.models]
        for p in comp.pairs:  # wrapped, not cut: the last figures of a setting matter as much
            out += textwrap.wrap(f"{p.model} {p.setting}: {pair_text(p)}", PLAIN_WIDTH - 4,
                                 initial_indent="    ", subsequent_indent="      ")  # fmt: skip
    return [line[:PLAIN_WIDTH] for line in out]


def pair_text(p: UpgradePair) -> str:
    """One setting's changes: its step times and compile, then counts, status and parity that moved."""
    parts = [figure_text(col, p.figures[col]) for col, *_ in FIGURES if p.figures[col].change is not None]
    for col, words in COUNTS:
        before, after = p.counts[col]
        if before is not None and after is not None and before != after:
            parts.append(f"{words} {before:.0f} -> {after:.0f}")
    if p.status[0] != p.status[1]:
        parts.append(f"status {p.status[0]} -> {p.status[1]}")
    if p.parity_ok[0] != p.parity_ok[1]:
        parts.append(f"parity {p.parity_ok[0]} -> {p.parity_ok[1]}")
    return ", ".join(parts) or "no figures in both"


def print_upgrade(upgrade: Upgrade | None, console: Any) -> None:
    for line in lines(upgrade) if upgrade else []:
        console.print(line, markup=False, highlight=False)


def write_upgrade(
    sweep_dir: Path, df: pd.DataFrame, plan: Mapping[str, Any], th: CompareConfig
) -> Upgrade | None:
    upgrade = compute(df, plan, th)
    if upgrade is not None:
        write_json_atomic(sweep_dir / UPGRADE_FILE, upgrade.to_dict())
    return upgrade


def read_upgrade(sweep_dir: Path) -> Upgrade | None:
    try:
        return Upgrade.from_dict(json.loads((sweep_dir / UPGRADE_FILE).read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
