"""Sweeps on a real single-node Slurm cluster (scripts/slurm-up.sh), through submitit's SlurmExecutor.

The cluster needs root and Debian's slurm/munge packages; without them these tests skip and say why.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, results, run_cli

# This cluster has no GPUs: under Slurm `bench.device=auto` asks for one, so the tests run on the CPU.
SLURM = ["launcher=slurm", "bench.device=cpu"]


@pytest.fixture(scope="module")
def cluster():
    up = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm-up.sh")], capture_output=True, text=True, timeout=180
    )
    if up.returncode == 3:
        pytest.skip(f"no Slurm cluster on this machine: {up.stderr.strip()}")
    assert up.returncode == 0, up.stdout + up.stderr
    yield
    subprocess.run(["bash", str(ROOT / "scripts" / "slurm-down.sh")], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def timeout_sweep(cluster, tmp_path_factory):
    """A job that hangs past a 1-minute limit, submitted first (it takes minutes with its requeue)."""
    cwd = tmp_path_factory.mktemp("slurm-timeout")
    proc = run_cli(
        [
            *SLURM,
            "workload=module",
            f"workload.path={TESTS}",
            "workload.target=user_models:Hangs",
            "workload.inputs=[[4,32]]",
            "compile.mode=eager",  # nothing to compile: the job reaches its hang at once
            "launcher.time_min=1",
            "launcher.max_requeues=1",
            "bench.timeout_s=60",
            "logger=none",
            "sweep.detach=true",
        ],
        cwd=cwd,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return cwd / "sweeps" / "default"


def wait_for_results(sweep_dir, n: int, timeout: float) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = results(sweep_dir)
        if len(found) >= n:
            return found
        time.sleep(2)
    return results(sweep_dir)


def test_timeout_job_is_submitted_detached(timeout_sweep):
    assert (timeout_sweep / "submitted.json").exists()


def test_array_sweep_gathers_every_result(cluster, tmp_path, fast):
    proc = run_cli(
        [
            *SLURM,
            "workload=block",
            "bench.task=infer",
            "compile.mode=eager,default,max-autotune-no-cudagraphs",
            *fast,
            "sweep.report=false",
        ],
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep_dir = tmp_path / "sweeps" / "default"
    found = results(sweep_dir)
    assert len(found) == 3 and all(r["status"] == "ok" for r in found.values())
    ids = [j["job_id"] for j in json.loads((sweep_dir / "submitted.json").read_text())["jobs"].values()]
    arrays = {i.split("_")[0] for i in ids}
    assert len(arrays) == 1 and all("_" in i for i in ids), f"one array: {ids}"
    script = next((sweep_dir / "logs").glob("*/*_submission.sh")).read_text()
    assert "#SBATCH --array=0-2%3" in script and "#SBATCH --job-name=orchestrator" in script


def test_ddp_with_two_slurm_tasks(cluster, tmp_path, fast):
    proc = run_cli(
        [*SLURM, "parallel=ddp", "workload=gpt", *fast, "sweep.report=false"], cwd=tmp_path, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = results(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "ok" and r["env_world_size"] == 2 and r["graphs"] >= 1 and r["parity_ok"]
    assert len(r["compiled_samples_per_s_by_rank"]) == 2


def test_detached_submit_then_status_then_gather(cluster, tmp_path, fast):
    proc = run_cli(
        [
            *SLURM,
            "workload=block",
            "bench.task=infer",
            "compile.mode=eager,default",
            *[a for a in fast if not a.startswith("verdict.follow_up=")],
            "sweep.detach=true",  # follow-ups on (the default): a detached submit says it runs none
        ],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "submitted 2 job(s); later: python -m orchestrator status" in proc.stdout
    assert "follow-ups are not run by a detached submit" in proc.stdout, proc.stdout
    sweep_dir = tmp_path / "sweeps" / "default"
    status = run_cli(["status", str(sweep_dir)], cwd=tmp_path, timeout=60)
    assert status.returncode == 0 and status.stdout.count("compile.mode=") == 2
    submitted = (sweep_dir / "submitted.json").read_text()
    # The same command again, attached: it waits for queued jobs (or skips finished ones), never resubmits.
    again = run_cli(
        [*SLURM, "workload=block", "bench.task=infer", "compile.mode=eager,default", *fast],
        cwd=tmp_path,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "still queued from an earlier run" in again.stdout or "2 already finished" in again.stdout
    assert json.loads((sweep_dir / "submitted.json").read_text())["jobs"] == json.loads(submitted)["jobs"]
    planned = set(json.loads((sweep_dir / "plan.json").read_text())["jobs"])
    finished = wait_for_results(sweep_dir, 2, 300)
    assert finished.keys() == planned == set(json.loads(submitted)["jobs"]), "each planned job, once"
    assert {r["label"] for r in finished.values()} == {"compile.mode=eager", "compile.mode=default"}
    status = run_cli(["status", str(sweep_dir)], cwd=tmp_path, timeout=60)
    assert "ok=2" in status.stdout
    gathered = run_cli(["gather", str(sweep_dir)], cwd=tmp_path, timeout=120)
    assert gathered.returncode == 0, gathered.stdout + gathered.stderr
    assert (sweep_dir / "results.csv").read_text().count("\n") == 3


def test_cancel_a_sweep(cluster, tmp_path, fast):
    proc = run_cli(
        [
            *SLURM,
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:Hangs,user_models:ExitsAbruptly",
            "workload.batch_size=2,3",
            *fast,
            "sweep.detach=true",
        ],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    sweep_dir = tmp_path / "sweeps" / "default"
    cancel = run_cli(["cancel", str(sweep_dir)], cwd=tmp_path, timeout=60)
    assert cancel.returncode == 0 and "cancelled" in cancel.stdout
    ours = {
        j["job_id"].split("_")[0]
        for j in json.loads((sweep_dir / "submitted.json").read_text())["jobs"].values()
    }
    deadline = time.time() + 60  # cancelled jobs pass through COMPLETING while slurmd kills them
    while time.time() < deadline:
        queue = subprocess.run(
            ["squeue", "-h", "-r", "-n", "orchestrator", "-o", "%i %T"], capture_output=True, text=True
        )
        left = [ln for ln in queue.stdout.splitlines() if ln.split("_")[0].split()[0] in ours]
        if not left:
            break
        time.sleep(1)
    assert not left, queue.stdout
    gathered = run_cli(["gather", str(sweep_dir)], cwd=tmp_path, timeout=120)
    assert gathered.returncode == 1, "cancelled jobs are failures"
    found = results(sweep_dir)
    assert len(found) == 4 and all(r["status"] != "ok" for r in found.values())
    assert any("CANCELLED" in (r["error"] or "") for r in found.values())


def test_time_limit_requeues_then_records_timeout(timeout_sweep):
    found = wait_for_results(timeout_sweep, 1, 600)  # two 1-minute attempts and Slurm's requeue hold
    (r,) = found.values()
    assert r["status"] == "timeout", r
    log = next((timeout_sweep / "logs").glob("*/*_0_log.out")).read_text()
    # Attempts are counted by their starts: submitit's own "Requeued job" line is written after
    # `scontrol requeue` returns, and the requeue's SIGTERM to the job's processes can kill that
    # scontrol first (seen on a busy host: requeued, but the line never written).
    attempts = log.count("Starting with JobEnvironment")
    assert attempts == 2, f"requeued once (launcher.max_requeues=1), then given up: {attempts} attempt(s)"
    assert "timed-out too many times" in log


@pytest.fixture
def max_array_size_5(cluster):
    """The cluster with MaxArraySize=5 (scontrol reconfigure), restored to Slurm's default after."""
    up = ["bash", str(ROOT / "scripts" / "slurm-up.sh")]
    env = dict(os.environ, SLURM_MAX_ARRAY_SIZE="5")
    proc = subprocess.run(up, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0 and "MaxArraySize            = 5" in proc.stdout, proc.stdout + proc.stderr
    yield
    subprocess.run(up, capture_output=True, timeout=180, check=True)


def counting_shims(tmp_path) -> tuple[dict, Path]:
    """PATH wrappers that log each call of squeue, sacct and scontrol, then run the real one."""
    shims, log = tmp_path / "shims", tmp_path / "calls.log"
    shims.mkdir()
    for name in ("squeue", "sacct", "scontrol"):
        real = shutil.which(name)
        (shims / name).write_text(f'#!/bin/sh\necho {name} >> {log}\nexec {real} "$@"\n')
        (shims / name).chmod(0o755)
    return {"PATH": f"{shims}:{os.environ['PATH']}"}, log


def test_sweep_past_max_array_size_in_arrays_within_parallelism(max_array_size_5, tmp_path, fast):
    """12 jobs, MaxArraySize=5, array_parallelism=2: three arrays of 4, never more than 2 running."""
    env, log = counting_shims(tmp_path)
    args = [*SLURM, "workload=block", "bench.task=infer", "compile.mode=eager"]
    args += ["workload.batch_size=" + ",".join(map(str, range(1, 13))), "launcher.array_parallelism=2"]
    args += [*fast, "sweep.report=false"]
    cli = [sys.executable, "-m", "orchestrator", *args]
    started = time.time()
    output = (tmp_path / "out.txt").open("w")
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    proc = subprocess.Popen(cli, cwd=tmp_path, env=env, stdout=output, stderr=subprocess.STDOUT)
    peak = 0
    while proc.poll() is None:  # the real squeue, not the counted one
        running = subprocess.run(
            ["/usr/bin/squeue", "-h", "-r", "-t", "R", "-n", "orchestrator", "-o", "%i"],
            capture_output=True,
            text=True,
        )
        peak = max(peak, len(running.stdout.split()))
        time.sleep(0.5)
    wall = time.time() - started
    out = (tmp_path / "out.txt").read_text()
    assert proc.returncode == 0, out
    sweep_dir = tmp_path / "sweeps" / "default"
    found = results(sweep_dir)
    assert len(found) == 12 and all(r["status"] == "ok" for r in found.values()), out
    ids = [j["job_id"] for j in json.loads((sweep_dir / "submitted.json").read_text())["jobs"].values()]
    arrays = sorted({i.split("_")[0] for i in ids}, key=int)
    assert len(arrays) == 3 and all(ids.count(f"{a}_{t}") == 1 for a in arrays for t in range(4)), ids
    scripts = {p.parent.name.split("_")[0]: p.read_text() for p in sweep_dir.glob("logs/*/*_submission.sh")}
    assert all("#SBATCH --array=0-3%1" in scripts[a] for a in arrays), "each array gets its share of 2"
    assert f"#SBATCH --dependency=afterany:{arrays[0]}" in scripts[arrays[2]], "third array waits in lane 1"
    assert 1 <= peak <= 2, f"{peak} tasks ran at once; launcher.array_parallelism=2"
    calls = log.read_text().split()
    # One squeue per poll (cached 2 s) whatever the number of jobs; no scontrol per job (all ended ok).
    assert calls.count("squeue") <= wall / 2 + 5, (calls.count("squeue"), wall)
    assert calls.count("scontrol") <= 1, "only `scontrol show config`, for MaxArraySize"


def test_refused_sbatch_is_one_line_exit_2_and_resumable(cluster, tmp_path, fast):
    args = [*SLURM, "workload=block", "bench.task=infer", "compile.mode=eager,default", *fast]
    args += ["sweep.report=false"]
    for _ in range(2):  # the same command again: the same one line, no leftovers in the way
        proc = run_cli([*args, "launcher.partition=nope"], cwd=tmp_path, timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "error: Slurm refused array 1 of 1 (2 job(s)): sbatch: error: Batch job submission failed: "
            "Invalid partition name specified; check launcher.partition=nope. 0 of 2 job(s) were queued "
            "and keep running; fix the setting and re-run the same command to resume"
        ], proc.stderr
    proc = run_cli(args, cwd=tmp_path, timeout=300)  # the setting fixed: the sweep resumes and runs
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(results(tmp_path / "sweeps" / "default")) == 2


def test_a_gpu_job_on_a_node_without_cuda_fails_saying_so(cluster, tmp_path, fast):
    """`bench.device=auto` under Slurm is a GPU job. This cluster has no GPUs (no GRES), so the GPU
    request is lifted (`launcher.gpus_per_node=0`) to get past sbatch; the job then lands on a node
    where CUDA sees none, and fails with a row saying so instead of timing the CPU."""
    args = ["launcher=slurm", "launcher.gpus_per_node=0", "workload=block", "bench.task=infer"]
    proc = run_cli([*args, "compile.mode=eager", *fast, "sweep.report=false"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (r,) = results(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "crash" and r.get("eager_ms") is None, "failed before timing anything"
    assert r["error"] == (
        "DeviceMissingError: expected a GPU (bench.device=auto under launcher=slurm asks Slurm for one) "
        f"but CUDA sees none on {socket.gethostname()}; set bench.device=cpu to benchmark the CPU"
    )
