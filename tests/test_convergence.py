"""The convergence check (bench.convergence_steps), on CPU with real torch.compile, in this process:
the tiny GPT learns and compiled follows eager; a compiled side that drifts is flagged although its
one-step parity passes."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FAST, TESTS

from orchestrator.analysis.verdict import risks
from orchestrator.config.plan import build_plan
from orchestrator.core.failures import ConfigError
from orchestrator.job.worker import run_job

USER = ["workload=module", f"workload.path={TESTS}", "workload.inputs=[[8,32]]"]


def measure(tmp_path, compile_cache, *overrides: str) -> dict:
    shared = ["compile.cache=shared", f"compile.cache_dir={compile_cache}"]
    plan = build_plan([*FAST, *shared, "bench.lr=1e-3", *overrides], cwd=tmp_path)
    return run_job(plan.jobs[0])


def test_tiny_gpt_learns_and_compiled_follows_eager(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload=gpt", "bench.convergence_steps=30")
    assert r["status"] == "ok", r["error"]
    e, c, ref = r["conv_eager_loss"], r["conv_compiled_loss"], r["conv_reference_loss"]
    assert len(e) == len(c) == len(ref) == r["conv_steps"] == 30
    assert e[-1] < 0.9 * e[0] and r["conv_loss_drop"] > 0.1, "the phrase corpus has something to learn"
    assert abs(e[0] - 5.545) < 0.1, "it starts from chance: ln(256)"
    assert r["conv_baseline_divergence"] > 0, "a reversed batch changes the rounding: the floor is measured"
    assert r["conv_ok"] and r["conv_divergence"] <= r["conv_limit"]
    assert abs(r["conv_final_diff"]) < 1e-3 * e[-1]


def test_drift_after_step_one_is_flagged_though_parity_passes(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, *USER, "workload.target=user_models:DriftsWhenCompiled",
                "bench.convergence_steps=20")  # fmt: skip
    assert r["status"] == "ok" and r["parity_ok"], "exactly eager at the start: one-step parity passes"
    e0, c0 = r["conv_eager_loss"][0], r["conv_compiled_loss"][0]
    # Same math, other kernels: the first losses agree to rounding (not bitwise: on an AMD EPYC
    # inductor's fp32 reductions differ from eager's in the 8th digit).
    assert abs(e0 - c0) <= 1e-5 * abs(e0), (e0, c0)
    assert r["conv_ok"] is False
    assert r["conv_divergence"] > 100 * r["conv_limit"] > 100 * r["conv_baseline_divergence"]
    assert any(x.startswith("convergence drift") for x in risks(pd.Series(r)))


def test_inference_is_refused_up_front_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"bench.convergence_steps=5 trains the model.*task=infer"):
        build_plan([*FAST, "workload=block", "bench.task=infer", "bench.convergence_steps=5"], cwd=tmp_path)
