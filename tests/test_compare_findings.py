"""compare's findings on planted tables: what crosses a threshold is flagged, what does not is not."""

from __future__ import annotations

import pandas as pd

from orchestrator.analysis.compare import compare_tables
from orchestrator.config.schema import CompareConfig


def table(**overrides) -> pd.DataFrame:
    a = dict(label="mode=default", status="ok", parity_ok=True, speedup=1.50, compile_cold_s=10.0)
    a.update(compiled_peak_gib=8.0, compiled_ms=30.0)
    b = {**a, "label": "mode=max-autotune", "speedup": 1.60, "compile_cold_s": 100.0, "compiled_ms": 28.0}
    rows = {"a": a, "b": b}
    for key, changes in overrides.items():
        rows[key] = {**rows[key], **changes}
    return pd.DataFrame([{"job_id": k, **v} for k, v in rows.items()])


def regressions(found: pd.DataFrame) -> set[tuple[str, str]]:
    return {(r.job_id, r.check) for r in found.itertuples() if r.regression}


def test_changes_inside_the_thresholds_are_not_regressions():
    cand = table(a=dict(speedup=1.47, compile_cold_s=11.0, compiled_ms=30.5))  # -2%, +10%, +1.7%
    assert regressions(compare_tables(table(), cand, CompareConfig())) == set()


def test_changes_past_the_thresholds_are_flagged_each_by_its_check():
    cand = table(a=dict(speedup=1.2), b=dict(compile_cold_s=150.0, compiled_peak_gib=9.5))
    found = compare_tables(table(), cand, CompareConfig())
    assert regressions(found) == {("a", "speedup"), ("b", "compile_cold_s"), ("b", "compiled_peak_gib")}
    drop = found[(found.job_id == "a") & (found.check == "speedup")].iloc[0]
    assert abs(drop.change - (1.2 - 1.5) / 1.5) < 1e-12


def test_improvements_are_reported_but_are_not_regressions():
    found = compare_tables(table(), table(a=dict(speedup=1.8)), CompareConfig())
    row = found[found.check == "speedup"].iloc[0]
    assert not row.regression and row.verdict == "improvement"


def test_status_and_parity_flips_are_regressions():
    cand = table(a=dict(status="parity_fail", parity_ok=False, error="planted"))
    assert {("a", "status"), ("a", "parity")} <= regressions(compare_tables(table(), cand, CompareConfig()))


def test_thresholds_are_the_users():
    cand = table(a=dict(speedup=1.2))
    assert regressions(compare_tables(table(), cand, CompareConfig(speedup_drop=0.25))) == set()


def test_graph_health_is_gated_on_counts():
    base = table(a=dict(graph_breaks=0, graphs=1, cudagraph_skips=0, dyn_recompiles=1))
    cand = table(a=dict(graph_breaks=2, graphs=3, cudagraph_skips=1, dyn_recompiles=1))
    found = regressions(compare_tables(base, cand, CompareConfig()))
    assert found == {("a", "graph_breaks"), ("a", "graphs"), ("a", "cudagraph_skips")}


def test_a_cache_hit_is_never_compared_with_a_miss():
    shared = dict(compile_cold_s=None)
    base = table(a=dict(**shared, compile_s=30.0, compile_cache_hits=0))
    cand = table(a=dict(**shared, compile_s=2.0, compile_cache_hits=3))
    found = compare_tables(base, cand, CompareConfig())
    row = found[(found.job_id == "a") & (found.check == "compile_s")].iloc[0]
    assert not row.regression and "not compared" in row.note
    assert ("a", "compile_s") not in regressions(found)


def timings(speedup: float, spread: float, processes: int = 3, repeats: int = 10, seed: int = 0) -> dict:
    """Planted per-repetition timings: compiled 10 ms, eager 10 * speedup, each process shifted by
    a random offset (the process-to-process spread) and each repetition by noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    eager, compiled, process = [], [], []
    for p in range(processes):
        shift = 1 + spread * rng.standard_normal()
        for _ in range(repeats):
            compiled.append(10.0)
            eager.append(10.0 * speedup * shift * (1 + spread / 2 * rng.standard_normal()))
            process.append(p)
    return {"eager_ms": eager, "compiled_ms": compiled, "process": process}


def verdict_of(base_speedup: float, cand_speedup: float, spread: float, seeds=(1, 2)) -> str | None:
    base = table(a=dict(speedup=base_speedup))
    cand = table(a=dict(speedup=cand_speedup))
    t_base = {"a": timings(base_speedup, spread, seed=seeds[0])}
    t_cand = {"a": timings(cand_speedup, spread, seed=seeds[1])}
    found = compare_tables(base, cand, CompareConfig(), t_base, t_cand)
    rows = found[(found.job_id == "a") & (found.check == "speedup")]
    return None if rows.empty else rows.iloc[0].verdict


def test_speed_verdicts_follow_the_ci_of_the_change():
    assert verdict_of(1.5, 1.5, 0.005) is None, "no change, little noise: unchanged (not listed)"
    assert verdict_of(1.5, 1.2, 0.005) == "regression", "a 20% drop well outside the noise"
    assert verdict_of(1.5, 1.8, 0.005) == "improvement"
    # A 7% drop (beyond the 5% threshold) inside process-to-process noise of 10%: not a regression.
    assert verdict_of(1.5, 1.395, 0.10, seeds=(3, 4)) == "inconclusive"
    # The same drop with the threshold-only rule (no timings) would have been flagged:
    only_figures = compare_tables(table(a=dict(speedup=1.5)), table(a=dict(speedup=1.395)), CompareConfig())
    assert ("a", "speedup") in regressions(only_figures)
