"""Reliability, round 3 (issue 59): what a careful user still broke, each with its own small model
(tests/user_models.py) and a real compile (aot_eager where the test is not about kernels)."""

from __future__ import annotations

import math

from conftest import FAST, TESTS, by_label, run_cli

from orchestrator.config.plan import build_plan
from orchestrator.launch.checks import check_plan
from orchestrator.job.worker import run_job

USER = ["workload=module", f"workload.path={TESTS}", "workload.inputs=[[8,32]]"]
GRAPH_ONLY = ["compile.backend=aot_eager"]  # dynamo and AOT autograd for real, no C++ to build


def measure(tmp_path, compile_cache, *overrides: str) -> dict:
    shared = ["compile.cache=shared", f"compile.cache_dir={compile_cache}"]
    plan = build_plan([*FAST, *shared, *GRAPH_ONLY, *USER, *overrides], cwd=tmp_path)
    check_plan(plan)
    return run_job(plan.jobs[0])


def test_nan_in_eager_itself_is_named_as_eager_s_not_compile_s(tmp_path, compile_cache):
    """A model that is NaN in eager: not a compile failure (`parity_fail: nan > limit nan`), the eager
    control included; the verdict gives no answer and says where eager went non-finite."""
    proc = run_cli(
        [*FAST, *GRAPH_ONLY, *USER, "workload.target=user_models:NaNInEager", "compile.mode=eager,default"],
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    jobs = by_label(tmp_path / "sweeps" / "default")
    assert len(jobs) == 2
    for r in jobs.values():  # the eager control as well: eager against eager is no compile failure
        assert r["status"] == "eager_not_finite", r["error"]
        assert r["error"].startswith("EagerNotFiniteError: eager itself is not finite: loss: NaN, grad net.0")
        assert "nan > limit nan" not in r["error"] and "not compile" in r["error"]
        assert r["parity_eager_not_finite"][0] == "loss: NaN"
        assert r["eager_ms"] > 0, "its timings are kept"
    verdict = next(line for line in proc.stdout.splitlines() if line.startswith("verdict module"))
    assert ": no answer: eager itself is not finite: loss: NaN" in verdict, verdict
    assert "eager:" not in verdict, "eager is not recommended"


def test_a_failing_integer_buffer_is_named_among_the_worst_tensors(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload.target=user_models:CounterMiscompiled", "bench.task=infer")
    assert r["status"] == "parity_fail" and math.isinf(r["parity_err"]), r["error"]
    worst = r["parity_worst"][0]
    assert worst["tensor"] == "buffer steps" and math.isinf(worst["err"]), r["parity_worst"]
    assert "worst tensors: buffer steps inf" in r["error"], r["error"]
