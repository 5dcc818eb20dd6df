"""compare's findings on planted tables: what crosses a threshold is flagged, what does not is not."""

from __future__ import annotations

import pandas as pd

from orchestrator.compare import compare_tables
from orchestrator.config import CompareConfig


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
    assert not row.regression and row.note == "improved"


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
