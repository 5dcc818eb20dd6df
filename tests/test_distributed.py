"""DDP and FSDP2 with 2 gloo ranks through the real submitit LocalExecutor, compiled."""

from __future__ import annotations

import inspect

from conftest import TESTS, by_label, run_cli


def test_ddp_and_fsdp_compile_match_single_process_and_sum_throughput(tmp_path, fast):
    proc = run_cli(
        ["+sweep=parallel", "compile.mode=default", *fast, "launcher.max_parallel=1"],
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = by_label(tmp_path / "sweeps" / "parallel")
    none, ddp, fsdp = (r[f"parallel={p}"] for p in ("none", "ddp", "fsdp"))
    for job in (ddp, fsdp):
        assert job["status"] == "ok", job["error"]
        assert job["world_size"] == job["env_world_size"] == 2
        assert job["graphs"] >= 1, "compiled under the wrapper: graphs were captured"
        # parity on all ranks (max-reduced) against the single-process fp64 run of the same model and data
        assert job["parity_ok"] and job["parity_reference"] == "fp64"
        assert job["parity_grad_err"] < 1e-4
        by_rank = job["compiled_samples_per_s_by_rank"]
        assert len(by_rank) == 2 and all(v > 0 for v in by_rank)
        assert abs(job["compiled_samples_per_s"] - sum(by_rank)) < 1e-9 * sum(by_rank), (
            "cluster = sum of ranks"
        )
    assert none["world_size"] == 1 and none["status"] == "ok"
    import csv

    rows = {
        row["strategy"]: row
        for row in csv.DictReader((tmp_path / "sweeps" / "parallel" / "results.csv").open())
    }
    assert float(rows["ddp"]["scaling_efficiency"]) > 0, "efficiency against the `none` run in the same sweep"


def test_one_rank_failing_fails_the_job_not_the_sweep(tmp_path, fast):
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:Stacked,user_models:RankOneRaises",
            "parallel=ddp",
            *fast,
            "bench.timeout_s=120",
            "launcher.max_requeues=0",
            "sweep.report=false",
        ],
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 1
    r = by_label(tmp_path / "sweeps" / "default")
    assert r["workload.target=user_models:Stacked"]["status"] == "ok"
    bad = r["workload.target=user_models:RankOneRaises"]
    assert bad["status"] != "ok"
    assert "rank 1" in bad["error"] and "planted failure on rank 1" in bad["error"], bad["error"]


def test_one_code_path_for_any_number_of_ranks():
    """The distributed code names no device count and branches on the device only for the backend."""
    from orchestrator import parallelize

    source = inspect.getsource(parallelize)
    assert source.count('"nccl" if device.type == "cuda" else "gloo"') == 1
    assert "world_size ==" not in source and "== 2" not in source
