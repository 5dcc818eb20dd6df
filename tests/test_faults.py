"""Reliability: every fault is classified, healthy results land, a killed orchestrator resumes."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from conftest import FAST, ROOT, TESTS, by_label, results, run_cli, wait_until

from orchestrator.core.files import private_cache_prefix

FAST_NO_CACHE = [*FAST, "compile.cache=shared"]  # no compile.cache_dir: each sweep shares its own

FAULTS = {  # user model -> expected failure class
    "MLP": "ok",
    "Stacked": "ok",
    "Raises": "crash",
    "FakeOOM": "oom",
    "Hangs": "timeout",
    "ExitsAbruptly": "crash",
    "KillsItself": "crash",
    "Segfaults": "crash",
    "DiffersWhenCompiled": "parity_fail",
    "WrongGradWhenCompiled": "parity_fail",
    "NaNWhenCompiled": "parity_fail",
    "EmptyOutput": "eager_not_finite",  # its loss is the mean of nothing: NaN in eager itself
}


def start_and_wait_for_first_result(args: list[str], cwd, stdout=subprocess.DEVNULL):
    """Start `python -m orchestrator ARGS` in the background; return once its first result landed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    orch = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sweep_dir = cwd / "sweeps" / "default"
    wait_until(lambda: results(sweep_dir), 400, "the sweep's first result")
    return orch, sweep_dir


def started(sweep_dir) -> int:
    """Jobs of the sweep that have started measuring (a `start` line in their runs.log)."""
    logs = sweep_dir.glob("jobs/*/runs.log")
    return sum(any(line.startswith("start") for line in p.read_text().splitlines()) for p in logs)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_fault_injection_sweep(tmp_path, fast):
    common = ["workload=module", f"workload.path={TESTS}", "workload.inputs=[[4,32]]", *fast]
    common += ["launcher.max_requeues=0", "launcher.max_parallel=2"]
    targets = ",".join(f"user_models:{name}" for name in FAULTS if name != "Hangs")
    # A limit no healthy job meets on a loaded host (they end on their own); the hang gets a short one,
    # which it meets whatever the host's load (its forward sleeps for an hour).
    faults = [*common, f"workload.target={targets}", "bench.timeout_s=600"]
    hang = [*common, "workload.target=user_models:Hangs", "bench.timeout_s=30", "sweep.name=hangs"]
    # its own empty cache, which its supervisor must remove when it kills the hung worker
    hang = [a for a in hang if not a.startswith("compile.cache")] + ["compile.cache=private"]
    with ThreadPoolExecutor(2) as pool:  # the hang sleeps through its limit beside the other sweep
        hung = pool.submit(run_cli, hang, cwd=tmp_path, timeout=300)
        proc = run_cli(faults, cwd=tmp_path, timeout=1500)
        assert proc.returncode == 1, "a failed job must make the exit code say so"
        assert hung.result().returncode == 1
    sweep_dir = tmp_path / "sweeps" / "default"
    got = {label.split(":")[-1]: r for label, r in by_label(sweep_dir).items()}
    (got["Hangs"],) = results(tmp_path / "sweeps" / "hangs").values()
    assert set(got) == set(FAULTS), "every job has a result row"
    for name, expected in FAULTS.items():
        assert got[name]["status"] == expected, (name, got[name]["status"], got[name]["error"])
    assert "planted failure in forward" in got["Raises"]["error"]
    assert "simulated: CUDA out of memory" in got["FakeOOM"]["error"]
    assert "time limit" in got["Hangs"]["error"]
    # The exit code and the signal of a worker that died without a word (its supervisor saw them)
    assert "exited with code 3" in got["ExitsAbruptly"]["error"], got["ExitsAbruptly"]["error"]
    assert got["ExitsAbruptly"]["exit_code"] == 3
    assert "killed by SIGKILL" in got["KillsItself"]["error"], got["KillsItself"]["error"]
    segv = got["Segfaults"]["error"]  # faulthandler's dump, in one line: the frame that died
    assert "SIGSEGV" in segv and "Segmentation fault" in segv and "user_models.py" in segv, segv
    assert got["DiffersWhenCompiled"]["parity_err"] > got["DiffersWhenCompiled"]["parity_limit"]
    wrong = got["WrongGradWhenCompiled"]  # the planted wrong gradient, named by its parameter
    assert wrong["parity_worst"][0]["tensor"] == "grad net.0.weight", wrong["parity_worst"]
    assert wrong["parity_worst"][0]["err"] > wrong["parity_worst"][0]["limit"]
    assert "worst tensors: grad net.0.weight" in wrong["parity_error"], wrong["parity_error"]
    assert all(w["err"] <= w["limit"] for w in wrong["parity_worst"][1:]), "only that one is off"
    for name in FAULTS:  # every failure points at its log, inside the sweep directory
        assert got[name]["log_stderr"].startswith(str(sweep_dir.parent)), got[name]
    left = list((tmp_path / "sweeps" / "hangs").glob("jobs/*/inductor-*"))
    assert not left, f"a killed worker's private cache is removed by its supervisor: {left}"
    assert (sweep_dir / "dashboard.html").exists() and (sweep_dir / "results.csv").exists()
    assert (sweep_dir / "results.parquet").exists(), "NaN figures do not stop the parquet table"
    nan = got["NaNWhenCompiled"]
    assert nan["parity_err"] == "nan" and nan["speedup"] > 0, "NaN never passes; the timings stay"
    regather = run_cli(["gather", str(sweep_dir)], cwd=tmp_path, timeout=120)
    assert regather.returncode == 1 and "Traceback" not in regather.stderr, regather.stderr
    where_a_failure_is(got["Raises"], proc.stdout, sweep_dir, regather.stdout)
    died = got["ExitsAbruptly"]  # no traceback of its own: the log it died in
    assert died["error_log"] == died["log_stderr"] and died["error_where"] is None


def where_a_failure_is(crash: dict, stdout: str, sweep_dir, gathered: str) -> None:
    """A crash names its line in the user's code and the file with its whole traceback, untrimmed:
    in its row, under its printed line and the table, by `status`, and on the dashboard (a link)."""
    from pathlib import Path

    raise_at = next(
        i
        for i, ln in enumerate((TESTS / "user_models.py").read_text().splitlines(), 1)
        if "planted failure" in ln
    )
    assert crash["error_where"] == f"{TESTS / 'user_models.py'}:{raise_at} (forward)"
    log = Path(crash["error_log"])
    assert log == Path(crash["log_stderr"]) and "planted failure in forward" in log.read_text()
    assert "Traceback (most recent call last)" in log.read_text() and "in run_job" in log.read_text()
    for printed in (stdout, gathered):
        assert f"  at: {crash['error_where']}" in printed and f"  traceback: {log}" in printed
    status = run_cli(["status", str(sweep_dir)], cwd=sweep_dir.parent, timeout=120)
    assert "  error: RuntimeError: planted failure in forward" in status.stdout, status.stdout
    assert f"  at: {crash['error_where']}" in status.stdout and f"  traceback: {log}" in status.stdout
    page = (sweep_dir / "dashboard.html").read_text()
    assert crash["error_where"] in page and f'"{log.relative_to(sweep_dir).as_posix()}"' in page


def test_retry_policy_reruns_chosen_classes(tmp_path, fast):
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:Raises",
            *fast,
            "retry.max_retries=2",
            "retry.on=[crash]",
            "sweep.report=false",
        ],
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1
    assert proc.stdout.count("retrying") == 2
    (r,) = results(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "crash"
    logs = list((tmp_path / "sweeps" / "default" / "logs").glob("*/*_log.err"))
    assert len(logs) == 3, "one first attempt and two retries"


def test_sigkill_orchestrator_then_resume(tmp_path, fast):
    args = [
        "workload=block",
        "compile.mode=eager,default,max-autotune-no-cudagraphs",
        *fast,
        "sweep.report=false",
    ]
    orch, sweep_dir = start_and_wait_for_first_result(args, tmp_path)
    first = results(sweep_dir)
    assert len(first) == 1, "killed after the first result landed"
    wait_until(lambda: started(sweep_dir) >= 2, 120, "the second job's start: the kill leaves it running")
    orch.send_signal(signal.SIGKILL)
    orch.wait()
    # what an attempt killed with its supervisor leaves: a private cache of a process that is gone
    gone = subprocess.Popen(["true"])
    gone.wait()
    for job in [j for j in sweep_dir.glob("jobs/*") if not (j / "result.json").exists()]:
        (job / (private_cache_prefix(gone.pid) + "x") / "triton").mkdir(parents=True)
    (done_id,) = first
    done_file = sweep_dir / "jobs" / done_id / "result.json"
    stamp, content = done_file.stat().st_mtime_ns, done_file.read_text()

    again = run_cli(args, cwd=tmp_path, timeout=400)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 job(s), 1 already finished (skipped)" in again.stdout
    assert done_file.stat().st_mtime_ns == stamp and done_file.read_text() == content, "never recomputed"
    final = results(sweep_dir)
    assert len(final) == 3 and all(r["status"] == "ok" for r in final.values())
    for r in final.values():
        json.dumps(r)  # every file is whole, valid JSON
    assert not list(sweep_dir.glob("jobs/*/.result.json.*.tmp")), "no half-written files left"
    assert not list(sweep_dir.glob("jobs/*/inductor-*")), "the runner removed what the killed attempt left"
    submitted = json.loads((sweep_dir / "submitted.json").read_text())
    assert set(submitted["jobs"]) == set(final)
    for job_id in final:  # each job measured once: the one left running was stopped, not duplicated
        runs = (sweep_dir / "jobs" / job_id / "runs.log").read_text().splitlines()
        assert sum(line.startswith("result") for line in runs) == 1, (job_id, runs)


def test_private_caches_are_removed_by_process_or_when_their_process_is_gone(tmp_path):
    import os
    import subprocess

    from orchestrator.core.files import private_cache_prefix, remove_private_caches

    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid names no process
    mine, theirs = private_cache_prefix(os.getpid()) + "a", private_cache_prefix(gone.pid) + "b"
    elsewhere = f"inductor-anotherhost-{gone.pid}-c"  # may run on its node still
    for name in (mine, theirs, elsewhere, "trace"):
        (tmp_path / name / "triton").mkdir(parents=True)
    remove_private_caches(tmp_path, os.getpid())  # a supervisor, after its child ended
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([theirs, elsewhere, "trace"])
    (tmp_path / mine).mkdir()
    remove_private_caches(tmp_path)  # before the job is submitted again: the dead process's only
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine, elsewhere, "trace"])


def test_half_written_result_is_never_read(tmp_path):
    from orchestrator.core.files import read_result, write_json_atomic

    job = tmp_path / "jobs" / "abc"
    job.mkdir(parents=True)
    (job / "result.json").write_text('{"status": "ok", "speedup": 1.')  # a torn write
    assert read_result(job) is None
    write_json_atomic(job / "result.json", {"status": "ok", "speedup": float("nan")})
    assert read_result(job) == {"status": "ok", "speedup": "nan"}


def test_ctrl_c_cancels_running_jobs_and_keeps_finished(tmp_path, fast):
    args = [
        "workload=block",
        "compile.mode=eager,default,max-autotune-no-cudagraphs",
        *fast,
        "sweep.report=false",
    ]
    orch, sweep_dir = start_and_wait_for_first_result(args, tmp_path, stdout=subprocess.PIPE)
    wait_until(lambda: started(sweep_dir) >= 2, 120, "the next job's start")
    orch.send_signal(signal.SIGINT)
    out, _ = orch.communicate(timeout=120)
    assert orch.returncode == 130, out
    assert "interrupted: cancelled 1 running job(s)" in out
    assert "Traceback" not in out, "the cancelled controller's KeyboardInterrupt stays in its log"
    kept = results(sweep_dir)
    assert len(kept) == 1 and all(r["status"] == "ok" for r in kept.values())
    submitted = json.loads((sweep_dir / "submitted.json").read_text())["jobs"]
    cancelled = [int(info["job_id"]) for job_id, info in submitted.items() if job_id not in kept]
    wait_until(lambda: not any(alive(pid) for pid in cancelled), 60, "the cancelled job's process gone")
    with (sweep_dir / "orchestrator.lock").open() as lock:  # the file stays; its lock is released
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def held(lock_file) -> bool:
    """Whether another process holds this sweep lock now (a file that exists may be free)."""
    if not lock_file.exists():
        return False
    with lock_file.open() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def test_concurrent_sweeps_in_different_dirs_and_one_lock_per_dir(tmp_path, fast):
    args = [
        "workload=block",
        "bench.task=infer",
        "compile.mode=default",
        *FAST_NO_CACHE,
        "sweep.report=false",
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args, f"sweep.dir={d}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for d in ("a", "b")
    ]
    wait_until(lambda: held(tmp_path / "a" / "orchestrator.lock"), 120, "sweep a holding its lock")
    refused = run_cli([*args, "sweep.dir=a"], cwd=tmp_path, timeout=120)
    assert refused.returncode == 2 and "is in use by another orchestrator" in refused.stderr
    for proc in runs:
        out, _ = proc.communicate(timeout=400)
        assert proc.returncode == 0, out
    for d in ("a", "b"):
        (r,) = results(tmp_path / d).values()
        assert r["status"] == "ok"
        caches = list((tmp_path / d / "cache" / "inductor").iterdir())
        assert caches, "each sweep compiled into its own inductor cache"


def test_a_sweep_with_no_timings_still_ends_with_table_and_dashboard(tmp_path, fast):
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:Raises",
            *fast,
        ],
        cwd=tmp_path,
        timeout=300,
    )
    sweep_dir = tmp_path / "sweeps" / "default"
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert (sweep_dir / "results.csv").exists() and (sweep_dir / "dashboard.html").exists()
    assert "planted failure in forward" in (sweep_dir / "dashboard.html").read_text()


def test_compare_of_sweeps_with_no_job_in_common_is_an_error(tmp_path):
    from orchestrator.core.files import write_json_atomic

    for name, job_id in (("base", "aaaaaaaaaaaa"), ("cand", "bbbbbbbbbbbb")):
        write_json_atomic(
            tmp_path / name / "jobs" / job_id / "result.json",
            {"job_id": job_id, "label": name, "status": "ok", "speedup": 1.2345678901234},
        )
    proc = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "cand")], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.strip().startswith("error: compare:") and "no job in common" in proc.stderr
