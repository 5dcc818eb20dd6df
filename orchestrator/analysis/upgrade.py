"""The upgrade A/B: one sweep over `env.python` measures each model and setting in two (or more)
environments, say two torch builds; this reads it as the change from the first environment (the
baseline: the axis's first value) to each other one. Jobs pair by config (everything but the
environment); speed changes are judged by the CI of the change over both jobs' repetitions, single
figures (compile seconds, memory) by the compare thresholds. Per model, one word: `breaks` (a
setting that passed now fails or loses parity), `slower`, `faster` or `no measurable change`.
Written to `upgrade.json`, printed after the verdict, and shown on the dashboard.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.analysis.compare import paired_timings, samples
from orchestrator.config.plan import job_id_of
from orchestrator.config.schema import CompareConfig
from orchestrator.core.files import read_plan, write_json_atomic
from orchestrator.core.numbers import number
from orchestrator.core.stats import change_ci
from orchestrator.core.stats import verdict as change_verdict
from orchestrator.results.present import COMPILE_COLUMNS, PLAIN_WIDTH, join_values, model_columns, with_axes

UPGRADE_FILE = "upgrade.json"
# (result column, its words, the compare threshold that bounds "no change", whether higher is better)
FIGURES = (
    ("compiled_ms", "compiled step", "step_rise", False),
    ("eager_ms", "eager step", "step_rise", False),
    ("speedup", "speedup", "speedup_drop", True),
    ("compile_cold_s", "cold compile", "compile_rise", False),
    ("compiled_peak_gib", "compiled peak memory", "memory_rise", False),
)
STEP_FIGURES = ("compiled_ms", "eager_ms")  # what the model's one word is judged on
COUNTS = (
    ("graph_breaks", "graph breaks"),
    ("dyn_recompiles", "recompiles"),
    ("cudagraph_skips", "CUDA-graph skips"),
)


def environments(df: pd.DataFrame, sweep_dir: Path) -> list[str]:
    """The sweep's environment names, the baseline first (the order of the plan's jobs)."""
    if "env" not in df or df["env"].dropna().nunique() < 2:
        return []
    order = {jid: i for i, jid in enumerate(read_plan(sweep_dir))}
    ranked = df.assign(_order=df["job_id"].map(order).fillna(len(order))).sort_values("_order", kind="stable")
    return list(dict.fromkeys(ranked["env"].dropna()))


def _pair_key(config: Any) -> str | None:
    """A job's config without its environment: the jobs of one setting in every environment share it."""
    if not isinstance(config, dict):
        return None
    return job_id_of({**config, "env": {"python": None}})


def torch_version(rows: pd.DataFrame) -> str:
    """The torch an environment's jobs measured with (their result's env_torch)."""
    known = rows["env_torch"].dropna() if "env_torch" in rows else pd.Series(dtype=object)
    return str(known.iloc[0]) if len(known) else "?"


def passed(row: pd.Series) -> bool:
    return row.get("status") == "ok" and row.get("parity_ok") is not False


def _figure(
    base: pd.Series, cand: pd.Series, column: str, limit: float, higher_better: bool, timings: dict
) -> dict[str, Any]:
    """One figure's change: with a CI where both jobs kept their repetitions, else one figure each."""
    vb, vc = number(base.get(column)), number(cand.get(column))
    out: dict[str, Any] = {"baseline": vb, "candidate": vc, "change": None, "ci": None, "judged": None}
    if vb is None or vc is None or vb == 0:
        return out
    # Only the step times and the speedup have repetitions behind them; the rest is one figure a job.
    repeated = column in ("speedup", *STEP_FIGURES)
    sb, sc = (samples(timings.get(r["job_id"]), column) if repeated else None for r in (base, cand))
    if sb and sc:
        change, low, high = change_ci(sb[0], sc[0], sb[1], sc[1])
        judged = change_verdict(low, high, limit, higher_better)
        return {**out, "change": change, "ci": [low, high], "judged": judged}
    change = vc / vb - 1
    better = change if higher_better else -change
    judged = "improvement" if better > limit else "regression" if better < -limit else "unchanged"
    return {**out, "change": change, "judged": judged + " (one figure each)"}


def pairs(df: pd.DataFrame, base_env: str, cand_env: str, th: CompareConfig) -> list[dict[str, Any]]:
    """Each setting measured in both environments: the change of every figure, counts and status."""
    timings = paired_timings(df)
    keyed = df.assign(_pair=df["config"].map(_pair_key))
    base = keyed[keyed["env"] == base_env].set_index("_pair")
    cand = keyed[keyed["env"] == cand_env].set_index("_pair")
    out = []
    for key in base.index.intersection(cand.index):
        b, c = base.loc[key], cand.loc[key]
        figures = {col: _figure(b, c, col, getattr(th, field), hb, timings) for col, _, field, hb in FIGURES}
        counts = {col: [number(b.get(col)), number(c.get(col))] for col, _ in COUNTS}
        out.append(
            {
                "model": c["_model"],
                "setting": c["_setting"],
                "status": [b.get("status"), c.get("status")],
                "parity_ok": [b.get("parity_ok"), c.get("parity_ok")],
                "breaks": passed(b) and not passed(c),
                "error": None if passed(c) else str(c.get("error") or "parity failed")[:300],
                "figures": figures,
                "counts": counts,
            }
        )
    return out


def model_word(model_pairs: list[dict[str, Any]]) -> tuple[str, str]:
    """One word for a model's upgrade, and the change that decided it."""
    broken = [p for p in model_pairs if p["breaks"]]
    if broken:
        return "breaks", "; ".join(f"{p['setting']}: {p['error']}" for p in broken)
    steps = [(p, col) for p in model_pairs for col in STEP_FIGURES if p["figures"][col]["judged"]]
    for word, judged in (("slower", "regression"), ("faster", "improvement")):
        hits = [(p, col) for p, col in steps if p["figures"][col]["judged"].startswith(judged)]
        if hits:
            p, col = max(hits, key=lambda h: abs(h[0]["figures"][h[1]]["change"]))
            return word, f"{p['setting']}: {figure_text(col, p['figures'][col])}"
    return "no measurable change", "every step time within the thresholds, or its CI too wide to say"


def figure_text(column: str, f: dict[str, Any]) -> str:
    words = next(w for c, w, _, _ in FIGURES if c == column)
    ci = f" [{f['ci'][0]:+.1%}, {f['ci'][1]:+.1%}]" if f["ci"] else ""
    return f"{words} {f['change']:+.1%}{ci}"


def compute(df: pd.DataFrame, sweep_dir: Path, th: CompareConfig) -> dict[str, Any] | None:
    """The A/B of a sweep over environments, or None when it has one environment."""
    envs = environments(df, sweep_dir)
    if not envs:
        return None
    df, swept = with_axes(df, read_plan(sweep_dir))
    models = [c for c in model_columns(df, swept) if c != "env"]
    settings = [c for c in COMPILE_COLUMNS if c in df and (c in swept or c == "mode")]
    df = df.assign(_model=join_values(df, models), _setting=join_values(df, settings))
    versions = {env: torch_version(df[df["env"] == env]) for env in envs}
    comparisons = []
    for cand_env in envs[1:]:
        found = pairs(df, envs[0], cand_env, th)
        verdicts = []
        for model in dict.fromkeys(p["model"] for p in found):
            word, why = model_word([p for p in found if p["model"] == model])
            verdicts.append({"model": model, "verdict": word, "why": why})
        comparisons.append({"baseline": envs[0], "candidate": cand_env, "pairs": found, "models": verdicts})
    return {"environments": envs, "torch": versions, "comparisons": comparisons}


def lines(upgrade: dict[str, Any]) -> list[str]:
    """The A/B in plain lines: one per model and candidate environment."""
    out = []
    torch = upgrade["torch"]
    for comp in upgrade["comparisons"]:
        b, c = comp["baseline"], comp["candidate"]
        paired = len(comp["pairs"])
        out.append(f"upgrade {b} (torch {torch[b]}) -> {c} (torch {torch[c]}): {paired} setting(s) paired")
        out += [f"  {v['model']}: {v['verdict']}: {v['why']}" for v in comp["models"]]
        for p in comp["pairs"]:  # wrapped, not cut: the last figures of a setting matter as much
            out += textwrap.wrap(f"{p['model']} {p['setting']}: {pair_text(p)}", PLAIN_WIDTH - 4,
                                 initial_indent="    ", subsequent_indent="      ")  # fmt: skip
    return [line[:PLAIN_WIDTH] for line in out]


def pair_text(p: dict[str, Any]) -> str:
    """One setting's changes: its step times and compile, then counts, status and parity that moved."""
    figures = p["figures"]
    parts = [figure_text(col, figures[col]) for col, *_ in FIGURES if figures[col]["change"] is not None]
    for col, words in COUNTS:
        before, after = p["counts"][col]
        if before is not None and after is not None and before != after:
            parts.append(f"{words} {before:.0f} -> {after:.0f}")
    if p["status"][0] != p["status"][1]:
        parts.append(f"status {p['status'][0]} -> {p['status'][1]}")
    if p["parity_ok"][0] != p["parity_ok"][1]:
        parts.append(f"parity {p['parity_ok'][0]} -> {p['parity_ok'][1]}")
    return ", ".join(parts) or "no figures in both"


def print_upgrade(upgrade: dict[str, Any] | None, console: Any) -> None:
    for line in lines(upgrade) if upgrade else []:
        console.print(line, markup=False, highlight=False)


def write_upgrade(sweep_dir: Path, df: pd.DataFrame, th: CompareConfig) -> dict[str, Any] | None:
    upgrade = compute(df, sweep_dir, th)
    if upgrade is not None:
        write_json_atomic(sweep_dir / UPGRADE_FILE, upgrade)
    return upgrade
