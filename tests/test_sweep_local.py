"""The local executor path end to end: the CLI, submitit subprocesses, real compiles, the table."""

from __future__ import annotations

import csv
import time
from dataclasses import fields

from conftest import FAST, TESTS, by_label, results, run_cli

from orchestrator.core.result import WallTime


def test_smoke_sweep_table_and_skip_on_rerun(tmp_path, fast):
    args = ["+sweep=smoke", *fast, "sweep.report=false"]
    first = run_cli(args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    sweep_dir = tmp_path / "sweeps" / "smoke"
    found = results(sweep_dir)
    assert len(found) == 4 and all(r["status"] == "ok" for r in found.values())
    rows = list(csv.DictReader((sweep_dir / "results.csv").open()))
    assert {(r["mode"], r["task"]) for r in rows} == {
        (m, t) for m in ("eager", "default") for t in ("infer", "train")
    }
    for r in found.values():
        assert r["eager_ms"] > 0 and r["compiled_ms"] > 0 and r["speedup"] > 0
        assert r["log_stdout"].startswith(str(sweep_dir / "logs"))
    # the printed table carries the figures
    for header in ("compile s", "eager ms", "compiled ms", "speedup", "parity", "status"):
        assert header in first.stdout
    assert f"results: {sweep_dir / 'results.csv'}" in first.stdout

    stamps = {p: p.stat().st_mtime_ns for p in sweep_dir.glob("jobs/*/result.json")}
    again = run_cli(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "4 job(s), 4 already finished (skipped)" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in sweep_dir.glob("jobs/*/result.json")} == stamps

    wider = run_cli([*args, "compile.mode=eager,default,max-autotune"], cwd=tmp_path)
    assert wider.returncode == 0, wider.stderr
    assert "6 job(s), 4 already finished (skipped)" in wider.stdout
    assert len(results(sweep_dir)) == 6


def test_cold_compile_does_not_depend_on_job_order_and_warm_and_portable_run_apart(tmp_path):
    """Two jobs with the same graph (they differ in the repeat count only), in both orders: each
    compiles from its own empty cache, so the second neither hits the first's cache nor collapses."""
    common = ["workload=block", "bench.task=infer", *FAST, "sweep.report=false"]
    started = time.monotonic()
    forward = run_cli(
        [*common, "bench.repeats=3,4", "compile.probes=true", "bench.processes=2", "sweep.dir=fwd"],
        cwd=tmp_path,
    )
    forward_s = time.monotonic() - started
    assert "time: " in forward.stdout and "compile and timing" in forward.stdout, forward.stdout
    assert forward.returncode == 0, forward.stdout + forward.stderr
    # the second sweep overlaps its two jobs (launcher.overlap): each job's cold compile still alone;
    # its processes are interpreters started ahead, not forks (launcher.start_ahead)
    ahead = ["launcher.fork_server=false", "launcher.start_ahead=true"]
    backward = run_cli(
        [
            *common,
            "bench.repeats=4,3",
            "compile.probes=false",
            "sweep.dir=bwd",
            "launcher.overlap=true",
            *ahead,
        ],
        cwd=tmp_path,
    )
    assert backward.returncode == 0, backward.stdout + backward.stderr
    for sweep in ("fwd", "bwd"):
        pair = list(results(tmp_path / sweep).values())
        assert len(pair) == 2
        for r in pair:
            assert r["compile_cache_hits"] == 0 and r["fx_cache_misses"] >= 1, "a cold compile: misses only"
            phases = sum(
                r[f"phase_{p}_s"] for p in ("dynamo", "aot_autograd", "inductor", "codegen", "backward")
            )
            assert 0 < phases <= r["first_call_s"], (phases, r["first_call_s"])
        colds = sorted(r["compile_cold_s"] for r in pair)
        assert colds[0] > 0.5 * colds[1], f"{sweep}: a cache hit would collapse one of {colds}"
    ahead_of_time = [r["started_ahead"] for r in results(tmp_path / "bwd").values()]
    assert True in ahead_of_time, "a job ran in an interpreter started ahead"  # the other may have asked
    assert not any(r["forked"] for r in results(tmp_path / "bwd").values()), "no forks"  # at once: its own
    for r in results(tmp_path / "fwd").values():  # probes: the warm one in the first paired process
        assert r["compile_warm_s"] < r["compile_cold_s"], (r["compile_warm_s"], r["compile_cold_s"])
        assert r["compile_warm_cache_hits"] >= 1, "the warm probe reads the cache the job filled"
        assert r["compile_portable_cache_hits"] >= 1 and r["compile_portable_load_s"] > 0
        assert len({r["pid"], r["compile_warm_pid"], r["compile_portable_pid"]}) == 3
        assert r["forked"] is True, "the local launcher's worker forks from the sweep's fork server"
        assert r["break_even_warm_steps"] is None or r["break_even_warm_steps"] < r["break_even_steps"]
    assert not list((tmp_path / "fwd" / "jobs").glob("*/inductor-*")), "private caches are removed"
    starts = {}
    ran = [(sweep, r) for sweep in ("fwd", "bwd") for r in results(tmp_path / sweep).values()]
    for sweep, r in ran:  # the job's wall by phase
        parts = sum(
            r[f.name] for f in fields(WallTime) if f.name.startswith("wall_") and f.name.endswith("_s")
        )
        assert abs(parts - r["job_wall_s"]) <= 0.03 * r["job_wall_s"], (parts, r["job_wall_s"])
        assert r["wall_primer_s"] > 0 and r["wall_startup_s"] > 0 and r["wall_teardown_s"] >= 0
        assert r["wall_first_calls_s"] >= r["first_call_s"], "the first calls hold the cold compile"
        log = (tmp_path / sweep / "jobs" / r["job_id"] / "runs.log").read_text().split()
        start, end = (float(w.split("=")[1]) for w in log if w.startswith("time="))
        starts[r["job_id"]] = start
        if sweep == "fwd":
            assert r["wall_probes_s"] > r["compile_warm_s"] + r["compile_portable_s"], "two processes"
            assert end - start < r["job_wall_s"] < forward_s, "inside the worker's own span and the sweep's"
            assert r["wall_locked_at"] is None and r["wall_wait_s"] == 0, "no device lock by default"
    # overlapped: the second job started while the first measured, then waited; they never measured at once
    first, second = sorted(results(tmp_path / "bwd").values(), key=lambda r: r["wall_locked_at"])
    assert starts[second["job_id"]] < first["wall_written_at"], "the second job started beside the first"
    assert second["wall_wait_s"] > 0 and second["wall_locked_at"] >= first["wall_written_at"], "one at a time"


def test_user_defined_module_by_config_alone(tmp_path, fast):
    (tmp_path / "my_models.py").write_text(
        "import torch\n"
        "class TwoLayer(torch.nn.Module):\n"
        "    def __init__(self, dim=16):\n"
        "        super().__init__()\n"
        "        self.a, self.b = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)\n"
        "    def forward(self, x):\n"
        "        return self.b(torch.relu(self.a(x)))\n"
    )
    proc = run_cli(
        [
            "workload=module",
            "workload.path=.",
            "workload.target=my_models:TwoLayer",
            "workload.init_args={dim: 24}",
            "workload.inputs=[[6,24]]",
            "bench.task=infer,train",
            *fast,
            "sweep.report=false",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = list(results(tmp_path / "sweeps" / "default").values())
    assert len(found) == 2 and all(r["status"] == "ok" and r["graphs"] == 1 for r in found)
    assert {r["size"] for r in found} == {"my_models:TwoLayer"}
    assert found[0]["params"] == 2 * (24 * 24 + 24)


def test_debug_executor_runs_in_process(tmp_path, fast):
    proc = run_cli(
        ["launcher=debug", "workload=block", "bench.task=infer", *fast, "sweep.report=false"], cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = results(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "ok" and r["graphs"] == 1
    assert r.get("log_stdout") is None, "no submitit subprocess, so no job log"


def test_failed_job_sets_exit_code_and_keeps_the_rest(tmp_path, fast):
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:MLP,user_models:Raises",
            *fast,
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    r = by_label(tmp_path / "sweeps" / "default")
    assert r["workload.target=user_models:MLP"]["status"] == "ok"
    bad = r["workload.target=user_models:Raises"]
    assert bad["status"] == "crash" and "planted failure in forward" in bad["error"]
    assert (tmp_path / "sweeps" / "default" / "dashboard.html").exists(), "the report is still written"
    assert "1 of 2 job(s) failed" in proc.stdout
