"""Submit job specs through submitit and wait for them with a live progress display.

Local: one subprocess per job, at most `launcher.max_parallel` at once (one per free GPU on a GPU
host). Slurm: arrays of at most MaxArraySize (slurm_arrays.py). Debug: in-process, one after
another. A job that ends without a result file gets one written here, with its failure class and
the log's last lines.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import submitit
import torch
from rich.console import Console
from rich.live import Live
from rich.text import Text

from orchestrator.config import Config
from orchestrator.plan import JobSpec
from orchestrator.results import RESULT_FILE, read_result, write_json_atomic
from orchestrator.slurm_arrays import submit_arrays
from orchestrator.worker import RANK_ERROR, Worker, result_skeleton

SUBMITTED_FILE = "submitted.json"

# Without Slurm accounting every poll would warn that sacct failed; the state comes from scontrol then.
logging.getLogger("submitit").addFilter(lambda record: "Bypassing sacct error" not in record.getMessage())
LOG_TAIL_CHARS = 1500


@dataclass
class Attempt:
    """A submitted job and what is known of it."""

    spec: JobSpec
    job: submitit.Job
    started: float
    gpus: list[int] = field(default_factory=list)
    left_queue: float | None = None
    """When a Slurm job was first seen gone from the queue."""


def uses_cuda(cfg: Config) -> bool:
    return cfg.bench.device == "cuda" or (cfg.bench.device == "auto" and torch.cuda.is_available())


def slurm_time_min(cfg: Config) -> int:
    return cfg.launcher.time_min or max(1, math.ceil(cfg.bench.timeout_s / 60))


def _slurm_mem(gb: float | None) -> str | None:
    if not gb:
        return None
    return f"{int(gb)}G" if gb == int(gb) else f"{int(gb * 1024)}M"


def make_executor(base: Config, sweep_dir: Path) -> submitit.Executor:
    """The submitit executor for `launcher.name`, with the sweep's parameters."""
    lc = base.launcher
    folder = sweep_dir / "logs" / "%j"
    if lc.name == "debug":
        return submitit.DebugExecutor(folder=folder)
    if lc.name == "local":
        return submitit.LocalExecutor(folder=folder, max_num_timeout=lc.max_requeues)
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=lc.max_requeues, python=lc.python)
    params = {
        "partition": lc.partition,
        "account": lc.account,
        "qos": lc.qos,
        "cpus_per_task": lc.cpus_per_task,
        "mem": _slurm_mem(lc.mem_gb),
        "constraint": lc.constraint,
        "exclude": lc.exclude,
        "array_parallelism": lc.array_parallelism,
        "job_name": lc.job_name,
        "additional_parameters": dict(lc.additional_parameters or {}),
        "setup": list(lc.setup),
    }
    ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return ex


def job_parameters(spec: JobSpec, base: Config) -> dict:
    """Per-job executor parameters: ranks, nodes, GPUs and the time limit."""
    cfg = spec.cfg
    world_ranks = cfg.parallel.ranks_per_node if cfg.parallel.world_size > 1 else 1
    cuda = uses_cuda(cfg)
    gpus = (
        base.launcher.gpus_per_node
        if base.launcher.gpus_per_node is not None
        else (world_ranks if cuda else 0)
    )
    timeout_s = cfg.bench.timeout_s
    if base.launcher.name == "slurm":
        return {
            "ntasks_per_node": world_ranks,
            "nodes": cfg.parallel.nodes if cfg.parallel.world_size > 1 else 1,
            "gpus_per_node": gpus or None,
            "time": slurm_time_min(cfg),
            "signal_delay_s": int(min(90, max(10, timeout_s / 4))),
        }
    return {
        "tasks_per_node": world_ranks,
        "gpus_per_node": gpus,
        "timeout_min": timeout_s / 60,
        "signal_delay_s": int(min(30, max(1, timeout_s / 4))),
    }


def slurm_state(job_id: str, folder: Path) -> str:
    """A Slurm job's state: sacct where accounting exists (submitit), else scontrol while slurmctld
    still remembers the job (MinJobAge), else UNKNOWN."""
    state = submitit.SlurmJob(folder, job_id).state
    if state not in ("UNKNOWN", "", None):
        return state
    try:
        out = subprocess.run(
            ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "UNKNOWN"
    match = re.search(r"JobState=(\S+)", out.stdout)
    return match.group(1) if match else "UNKNOWN"


def slurm_queue() -> set[str] | None:
    """Ids of the jobs Slurm still holds, array tasks as `ID_TASK`; None if squeue fails."""
    try:
        # -r: one line per array task (pending tasks are otherwise folded into `ID_[3-11%2]`).
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(out.stdout.split()) if out.returncode == 0 else None


def sbatch_script(spec: JobSpec, base: Config, sweep_dir: Path) -> str:
    """The sbatch script submitit would write for this job (what `--dry-run` shows for Slurm)."""
    executor = make_executor(base, sweep_dir)
    executor.update_parameters(**job_parameters(spec, base))
    return executor._make_submission_file_text(executor._submitit_command_str, "%j")


def failure_result(spec: JobSpec, attempt: Attempt | None, status: str, error: str) -> dict:
    """The result the orchestrator writes for a job that ended without writing its own."""
    result = result_skeleton(spec)
    result.update(status=status, error=error)
    if attempt is not None:
        result["log_stdout"] = str(attempt.job.paths.stdout)
        result["log_stderr"] = str(attempt.job.paths.stderr)
        result["wall_s"] = time.time() - attempt.started
    rank_errors = sorted(spec.job_dir.glob(RANK_ERROR.format("*")))
    if rank_errors:  # a rank recorded why it failed before the job died
        first = min((json.loads(p.read_text()) for p in rank_errors), key=lambda e: e["time"])
        result["status"] = first["status"] if status == "crash" else status
        result["error"] = f"rank {first['rank']}: {first['error']} ({error})"
    return result


def _log_tail(attempt: Attempt) -> str:
    try:
        text = attempt.job.paths.stderr.read_text(errors="replace")
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:].strip()


class Runner:
    """Launches specs and waits for them; every spec ends with a result file."""

    def __init__(self, base: Config, sweep_dir: Path, console: Console | None = None) -> None:
        self.base = base
        self.sweep_dir = sweep_dir
        self.console = console or Console()
        self.executor = make_executor(base, sweep_dir)
        self.attempts_made: dict[str, int] = {}
        self.counts = {"done": 0, "failed": 0}
        self.started = time.time()
        # Slurm's queue as last read by squeue (at most every 2 s), and when.
        self._queue: set[str] | None = None
        self._queue_time = 0.0

    # --- submission ---------------------------------------------------------------------------
    def _capacity(self) -> tuple[int, list[int]]:
        """Jobs at once, and the free GPU ids of this host (local launcher)."""
        gpus = list(range(torch.cuda.device_count()))
        limit = self.base.launcher.max_parallel or (len(gpus) if gpus else 1)
        return limit, gpus

    def _submit(self, spec: JobSpec, gpus: list[int]) -> Attempt:
        params = job_parameters(spec, self.base)
        if self.base.launcher.name == "local" and gpus:
            params["visible_gpus"] = gpus
        self.executor.update_parameters(**params)
        job = self.executor.submit(Worker(), spec)
        self.attempts_made[spec.job_id] = self.attempts_made.get(spec.job_id, 0) + 1
        self._record_submitted([job], [spec])
        return Attempt(spec, job, time.time(), gpus)

    def _record_submitted(self, jobs: list[submitit.Job], specs: list[JobSpec]) -> None:
        path = self.sweep_dir / SUBMITTED_FILE
        data = (
            json.loads(path.read_text())
            if path.exists()
            else {"launcher": self.base.launcher.name, "jobs": {}}
        )
        for job, spec in zip(jobs, specs, strict=True):
            data["jobs"][spec.job_id] = {
                "job_id": str(job.job_id),
                "label": spec.label,
                "submitted": time.time(),
            }
        data["orchestrator_pid"] = os.getpid()
        write_json_atomic(path, data)

    def submit_array(self, specs: list[JobSpec]) -> list[Attempt]:
        """Slurm: arrays of at most MaxArraySize, array_parallelism held across them (slurm_arrays)."""
        attempts: list[Attempt] = []
        arrays = submit_arrays(
            self.executor, self.base.launcher, specs, lambda s: job_parameters(s, self.base), Worker()
        )
        for group, jobs in arrays:
            for spec in group:
                self.attempts_made[spec.job_id] = self.attempts_made.get(spec.job_id, 0) + 1
            self._record_submitted(jobs, group)
            attempts += [Attempt(s, j, time.time()) for s, j in zip(group, jobs, strict=True)]
        return attempts

    # --- waiting ------------------------------------------------------------------------------
    def adopt_queued(self, specs: list[JobSpec]) -> list[Attempt]:
        """Slurm jobs an earlier orchestrator submitted that are still queued: wait, never resubmit."""
        path = self.sweep_dir / SUBMITTED_FILE
        queue = slurm_queue() if self.base.launcher.name == "slurm" and path.exists() else None
        if not queue:
            return []
        known = json.loads(path.read_text())["jobs"]
        folder = self.sweep_dir / "logs" / "%j"
        return [
            Attempt(spec, submitit.SlurmJob(folder, known[spec.job_id]["job_id"]), time.time())
            for spec in specs
            if spec.job_id in known and known[spec.job_id]["job_id"] in queue
        ]

    def run(self, specs: list[JobSpec]) -> None:
        """Run specs to the end (results written), retrying per policy; Ctrl-C cancels what runs."""
        running: list[Attempt] = self.adopt_queued(specs)
        adopted = {a.spec.job_id for a in running}
        for attempt in running:
            self.attempts_made[attempt.spec.job_id] = 1
        if running:
            self.console.print(f"waiting for {len(running)} job(s) still queued from an earlier run")
        pending = [s for s in specs if s.job_id not in adopted]
        limit, free_gpus = self._capacity()
        interrupted = False
        if self.base.launcher.name == "slurm":
            running += self.submit_array(pending)
            pending = []
        with Live(self._status_line(pending, running), console=self.console, refresh_per_second=2) as live:
            try:
                while pending or running:
                    while pending and self.base.launcher.name != "slurm":
                        need = self._gpus_needed(pending[0])
                        if len(running) >= limit or len(free_gpus) < need:
                            break
                        spec = pending.pop(0)
                        gpus, free_gpus = free_gpus[:need], free_gpus[need:]
                        running.append(self._submit(spec, gpus))
                    for attempt in [a for a in running if self._ended(a)]:
                        running.remove(attempt)
                        free_gpus = sorted(free_gpus + attempt.gpus)
                        retry = self._finish(attempt)
                        if retry:
                            pending.append(attempt.spec)
                    live.update(self._status_line(pending, running))
                    if running:
                        time.sleep(self.base.launcher.poll_s)
            except KeyboardInterrupt:
                interrupted = True
                for attempt in running:
                    attempt.job.cancel(check=False)
                self.console.print(
                    f"[yellow]interrupted: cancelled {len(running)} running job(s); "
                    "finished results are kept, re-run the same command to resume[/yellow]"
                )
        if interrupted:
            raise KeyboardInterrupt

    def _gpus_needed(self, spec: JobSpec) -> int:
        if self.base.launcher.name != "local" or not torch.cuda.device_count():
            return 0
        return job_parameters(spec, self.base)["gpus_per_node"]

    def _ended(self, attempt: Attempt) -> bool:
        if self.base.launcher.name == "debug":
            return True  # DebugJob runs when its result is asked for, in _finish
        if attempt.job.done():
            return True
        if self.base.launcher.name == "slurm":
            return self._left_slurm(attempt)
        # Watchdog over submitit's own timeout: its requeues included, plus a grace period.
        limit = attempt.spec.cfg.bench.timeout_s * (self.base.launcher.max_requeues + 1) + 60
        if self.base.launcher.name == "local" and time.time() - attempt.started > limit:
            attempt.job.cancel(check=False)
            self._write_failure(attempt, "timeout", f"killed by the orchestrator after {limit:.0f} s")
            return True
        return False

    def _left_slurm(self, attempt: Attempt) -> bool:
        """Without accounting, submitit cannot see a job end that wrote no result: ask squeue."""
        now = time.time()
        if now - self._queue_time > 2:
            self._queue, self._queue_time = slurm_queue(), now
        if self._queue is None or str(attempt.job.job_id) in self._queue:
            attempt.left_queue = None
            return False
        # Out of the queue: give the job a moment to land its result pickle before judging it.
        attempt.left_queue = attempt.left_queue or now
        return now - attempt.left_queue > 5

    def _finish(self, attempt: Attempt) -> bool:
        """Make sure the job has a result; returns whether to retry it."""
        spec = attempt.spec
        if self.base.launcher.name == "debug":
            try:
                attempt.job.result()
            except Exception as e:  # the worker records its own failures; this is a crash around it
                self._write_failure(attempt, "crash", f"{type(e).__name__}: {e}")
        result = read_result(spec.job_dir)
        if result is None:
            status, error = self._diagnose(attempt)
            result = self._write_failure(attempt, status, error)
        ok = result["status"] == "ok"
        self.counts["done" if ok else "failed"] += 1
        mark = "[green]ok[/green]" if ok else f"[red]{result['status']}[/red]"
        figure = f" speedup {result['speedup']:.3f}" if ok and result.get("speedup") else ""
        self.console.print(
            f"{mark} {spec.job_id} {spec.label}{figure}" + ("" if ok else f": {result['error']}")
        )
        retry = self.base.retry
        if not ok and result["status"] in retry.on and self.attempts_made[spec.job_id] <= retry.max_retries:
            self.counts["failed"] -= 1
            (spec.job_dir / RESULT_FILE).unlink(missing_ok=True)
            self.console.print(
                f"[yellow]retrying {spec.job_id} ({self.attempts_made[spec.job_id]}/"
                f"{retry.max_retries})[/yellow]"
            )
            return True
        return False

    def _diagnose(self, attempt: Attempt) -> tuple[str, str]:
        """Why a job ended without a result: its time limit, or a crash (with the log's tail)."""
        if self.base.launcher.name == "slurm":
            state = slurm_state(str(attempt.job.job_id), self.sweep_dir / "logs" / "%j").upper()
        else:
            state = str(getattr(attempt.job, "state", "")).upper()
        tail = _log_tail(attempt)
        try:
            exc = attempt.job.exception()
        except Exception as e:  # submitit could not read the job's outcome: say what it said
            exc = e
        text = f"{exc}" if exc else ""
        if "TIMEOUT" in state or "timed-out" in text or "timed out" in tail.lower():
            return "timeout", f"hit its time limit of {attempt.spec.cfg.bench.timeout_s:.0f} s per attempt"
        if "CANCELLED" in state:
            return "crash", f"job cancelled (state {state})"
        last = tail.splitlines()[-1] if tail else text.splitlines()[0] if text else "no output"
        return "crash", f"worker exited without a result (state {state or 'unknown'}): {last}"[:2000]

    def _write_failure(self, attempt: Attempt, status: str, error: str) -> dict:
        result = failure_result(attempt.spec, attempt, status, error)
        write_json_atomic(attempt.spec.job_dir / RESULT_FILE, result)
        return result

    def _status_line(self, pending: list, running: list) -> Text:
        elapsed = time.time() - self.started
        return Text(
            f"done {self.counts['done']}  failed {self.counts['failed']}  running {len(running)}  "
            f"pending {len(pending)}  elapsed {elapsed:.0f}s",
            style="bold",
        )


def kill_orphans(sweep_dir: Path) -> int:
    """Stop local jobs left running by an orchestrator that was killed, so a re-run never duplicates them."""
    path = sweep_dir / SUBMITTED_FILE
    if not path.exists():
        return 0
    data = json.loads(path.read_text())
    if data.get("launcher") != "local":
        return 0
    killed = 0
    for job_id, info in data["jobs"].items():
        if read_result(sweep_dir / "jobs" / job_id) is not None:
            continue
        pid = int(info["job_id"])
        try:
            os.kill(pid, signal.SIGTERM)  # the controller forwards it to the job's tasks
            killed += 1
        except (ProcessLookupError, PermissionError):
            continue
    return killed
