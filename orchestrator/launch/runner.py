"""Submit job specs and wait for them with a live progress line; every spec ends with a result file.

Local: one subprocess per job, at most `launcher.max_parallel` at once (one per GPU of this host).
Slurm: arrays of at most MaxArraySize (slurm_arrays.py). Debug: in-process, one after another.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import submitit
import torch
from rich.console import Console
from rich.live import Live
from rich.text import Text

from orchestrator.config import Config
from orchestrator.job.supervisor import Worker
from orchestrator.job.worker import run_job
from orchestrator.launch.diagnosis import Attempt, diagnose, failure_result
from orchestrator.launch.executors import job_parameters, make_executor
from orchestrator.launch.ledger import read_ledger, record_submitted
from orchestrator.launch.slurm import QueueView, slurm_state
from orchestrator.results import RESULT_FILE, read_result, write_json_atomic
from orchestrator.slurm_arrays import submit_arrays
from orchestrator.spec import JobSpec

# Without Slurm accounting every poll would warn that sacct failed; the state comes from scontrol then.
logging.getLogger("submitit").addFilter(lambda record: "Bypassing sacct error" not in record.getMessage())


class Runner:
    """Launches specs and waits for them; every spec ends with a result file."""

    def __init__(self, base: Config, sweep_dir: Path, console: Console | None = None) -> None:
        self.base = base
        self.launcher = base.launcher.name
        self.sweep_dir = sweep_dir
        self.console = console or Console()
        self.executor = make_executor(base, sweep_dir)
        self.attempts_made: dict[str, int] = {}
        self.counts = {"done": 0, "failed": 0}
        self.started = time.time()
        self.queue = QueueView()

    # --- submission ---------------------------------------------------------------------------
    def _capacity(self) -> tuple[int, list[int]]:
        """Jobs at once, and the GPU ids of this host (all of them: the sweep owns the host)."""
        gpus = list(range(torch.cuda.device_count()))
        limit = self.base.launcher.max_parallel or (len(gpus) if gpus else 1)
        return limit, gpus

    def _count_attempt(self, spec: JobSpec) -> None:
        self.attempts_made[spec.job_id] = self.attempts_made.get(spec.job_id, 0) + 1

    def _submit(self, spec: JobSpec, gpus: list[int]) -> Attempt:
        params = job_parameters(spec, self.base)
        if self.launcher == "local" and gpus:
            params["visible_gpus"] = gpus
        self.executor.update_parameters(**params)
        # debug runs in this process, for a debugger; the others watch a child process (supervisor)
        job = self.executor.submit(run_job if self.launcher == "debug" else Worker(), spec)
        self._count_attempt(spec)
        record_submitted(self.sweep_dir, self.launcher, [job], [spec])
        return Attempt(spec, job, time.time(), gpus)

    def submit_array(self, specs: list[JobSpec]) -> list[Attempt]:
        """Slurm: arrays of at most MaxArraySize, array_parallelism held across them (slurm_arrays)."""
        attempts: list[Attempt] = []
        arrays = submit_arrays(
            self.executor, self.base.launcher, specs, lambda s: job_parameters(s, self.base), Worker()
        )
        for group, jobs in arrays:  # each array is recorded before the next is submitted
            for spec in group:
                self._count_attempt(spec)
            record_submitted(self.sweep_dir, self.launcher, jobs, group)
            attempts += [Attempt(s, j, time.time()) for s, j in zip(group, jobs, strict=True)]
        return attempts

    # --- waiting ------------------------------------------------------------------------------
    def adopt_queued(self, specs: list[JobSpec]) -> list[Attempt]:
        """Slurm jobs an earlier orchestrator submitted that are still queued: wait, never resubmit."""
        known = read_ledger(self.sweep_dir)["jobs"]
        queue = self.queue.ids() if self.launcher == "slurm" and known else None
        if not queue:
            return []
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
        if self.launcher == "slurm":
            running += self.submit_array(pending)
            pending = []
        with Live(self._status_line(pending, running), console=self.console, refresh_per_second=2) as live:
            try:
                while pending or running:
                    if pending and self.launcher == "slurm":  # retries go in as arrays too
                        running += self.submit_array(pending)
                        pending = []
                    while pending and self.launcher != "slurm":
                        need = self._gpus_needed(pending[0])
                        if len(running) >= limit or len(free_gpus) < need:
                            break
                        spec = pending.pop(0)
                        gpus, free_gpus = free_gpus[:need], free_gpus[need:]
                        running.append(self._submit(spec, gpus))
                    for attempt in [a for a in running if self._ended(a)]:
                        running.remove(attempt)
                        free_gpus = sorted(free_gpus + attempt.gpus)
                        if self._finish(attempt):
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
        if self.launcher != "local" or not torch.cuda.device_count():
            return 0
        return job_parameters(spec, self.base)["gpus_per_node"]

    def _ended(self, attempt: Attempt) -> bool:
        if self.launcher == "debug":
            return True  # DebugJob runs when its result is asked for, in _finish
        if attempt.job.done():
            return True
        if self.launcher == "slurm":
            return self._left_slurm(attempt)
        # Watchdog over submitit's own timeout: its requeues included, plus a grace period.
        limit = attempt.spec.cfg.bench.timeout_s * (self.base.launcher.max_requeues + 1) + 60
        if time.time() - attempt.started > limit:
            attempt.job.cancel(check=False)
            self._write_failure(attempt, "timeout", f"killed by the orchestrator after {limit:.0f} s")
            return True
        return False

    def _left_slurm(self, attempt: Attempt) -> bool:
        """Without accounting, submitit cannot see a job end that wrote no result: ask squeue."""
        queue = self.queue.ids()
        if queue is None or str(attempt.job.job_id) in queue:
            attempt.left_queue = None
            return False
        # Out of the queue: give the job a moment to land its result pickle before judging it.
        now = time.time()
        attempt.left_queue = attempt.left_queue or now
        return now - attempt.left_queue > 5

    def _finish(self, attempt: Attempt) -> bool:
        """Make sure the job has a result; returns whether to retry it."""
        spec = attempt.spec
        if self.launcher == "debug":
            try:
                attempt.job.result()
            except Exception as e:  # the worker records its own failures; this is a crash around it
                self._write_failure(attempt, "crash", f"{type(e).__name__}: {e}")
        result = read_result(spec.job_dir)
        if result is None:
            result = self._write_failure(attempt, *diagnose(attempt, self._state(attempt)))
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

    def _state(self, attempt: Attempt) -> str:
        if self.launcher == "slurm":
            return slurm_state(str(attempt.job.job_id), self.sweep_dir / "logs" / "%j")
        return str(getattr(attempt.job, "state", ""))

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
