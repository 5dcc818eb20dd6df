"""Submit job specs and wait for them with a live progress line; every spec ends with a result file.

The launcher (launchers.py) says how: local, one subprocess per job, at most its capacity at once
(one per GPU of this host, two under `launcher.overlap`); Slurm, arrays of at most MaxArraySize
(slurm_arrays.py); debug, in-process, one after another.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.live import Live
from rich.text import Text

from orchestrator.config.schema import Config
from orchestrator.config.spec import JobSpec
from orchestrator.core.failures import clear_rank_errors, failure_lines, failure_message
from orchestrator.core.files import RESULT_FILE, read_result, remove_private_caches, write_json_atomic
from orchestrator.core.result import JobResult
from orchestrator.launch.diagnosis import Attempt, diagnose, failure_result
from orchestrator.launch.launchers import make_launcher
from orchestrator.launch.ledger import read_ledger, record_submitted
from orchestrator.launch.slurm_arrays import submit_arrays

# Without Slurm accounting every poll would warn that sacct failed; the state comes from scontrol then.
logging.getLogger("submitit").addFilter(lambda record: "Bypassing sacct error" not in record.getMessage())


def _clear_earlier_attempt(spec: JobSpec) -> None:
    """Before a job is submitted: what an earlier attempt left in its folder goes (its private caches,
    left by one killed with its supervisor; its rank errors, which would name its failure as this one's)."""
    remove_private_caches(spec.job_dir)
    clear_rank_errors(spec.job_dir)


def spread(free_slots: list[int]) -> list[int]:
    """Free GPU slots, the idlest GPU first (most free slots, then the lowest index): jobs spread
    over the GPUs before two share one."""
    return sorted(free_slots, key=lambda gpu: (-free_slots.count(gpu), gpu))


class Runner:
    """Launches specs and waits for them; every spec ends with a result file."""

    def __init__(self, base: Config, sweep_dir: Path, console: Console | None = None) -> None:
        self.base = base
        self.sweep_dir = sweep_dir
        self.console = console or Console()
        self.launcher = make_launcher(base, sweep_dir)
        self.executor = self.launcher.executor()
        self.attempts_made: dict[str, int] = {}
        self.counts = {"done": 0, "failed": 0}
        self.results: dict[str, JobResult] = {}
        """Each finished job's result as read when it ended, by job id: handed on, not read again."""
        self.started = time.time()

    # --- submission ---------------------------------------------------------------------------
    def _record(self, specs: list[JobSpec], jobs: list) -> None:
        for spec in specs:
            self.attempts_made[spec.job_id] = self.attempts_made.get(spec.job_id, 0) + 1
        record_submitted(self.sweep_dir, self.launcher.name, jobs, specs, self.launcher.pid_jobs)

    def _submit(self, spec: JobSpec, gpus: list[int]) -> Attempt:
        _clear_earlier_attempt(spec)
        params = self.launcher.parameters(spec)
        if gpus:
            params["visible_gpus"] = gpus
        self.executor.update_parameters(**params)
        with self.launcher.submitting(spec):
            job = self.executor.submit(self.launcher.task(), spec)
        self._record([spec], [job])
        return Attempt(spec, job, time.time(), gpus)

    def submit_array(self, specs: list[JobSpec]) -> list[Attempt]:
        """Slurm: arrays of at most MaxArraySize, array_parallelism held across them (slurm_arrays)."""
        attempts: list[Attempt] = []
        for spec in specs:
            _clear_earlier_attempt(spec)
        arrays = submit_arrays(
            self.executor, self.base.launcher, specs, self.launcher.parameters, self.launcher.task()
        )
        for group, jobs in arrays:  # each array is recorded before the next is submitted
            self._record(group, jobs)
            attempts += [Attempt(s, j, time.time()) for s, j in zip(group, jobs, strict=True)]
        return attempts

    def _start(self, pending: list[JobSpec], running: list[Attempt], free_gpus: list[int]) -> list[int]:
        """Start what may start now; returns the GPUs still free."""
        if self.launcher.arrays:
            running += self.submit_array(pending)
            pending.clear()
            return free_gpus
        while pending and len(running) < self.launcher.capacity():
            need = self.launcher.gpus(pending[0]) if self.launcher.places_gpus and free_gpus else 0
            if len(free_gpus) < need:
                break
            gpus, free_gpus = free_gpus[:need], spread(free_gpus[need:])
            running.append(self._submit(pending.pop(0), gpus))
        return free_gpus

    # --- waiting ------------------------------------------------------------------------------
    def run(self, specs: list[JobSpec]) -> None:
        """Run specs to the end (results written), retrying per policy; Ctrl-C cancels what runs."""
        running = self.launcher.queued(read_ledger(self.sweep_dir)["jobs"], specs)
        for attempt in running:
            self.attempts_made[attempt.spec.job_id] = 1
        if running:
            self.console.print(f"waiting for {len(running)} job(s) still queued from an earlier run")
        adopted = {a.spec.job_id for a in running}
        pending = [s for s in specs if s.job_id not in adopted]
        # all of them, a slot per job each may hold (launcher.overlap: two): the sweep owns the host
        free_gpus = spread(list(range(torch.cuda.device_count())) * self.launcher.jobs_per_device())
        interrupted = False
        with Live(self._status_line(pending, running), console=self.console, refresh_per_second=2) as live:
            try:
                while pending or running:
                    free_gpus = self._start(pending, running, free_gpus)
                    for attempt in [a for a in running if self.launcher.ended(a)]:
                        running.remove(attempt)
                        free_gpus = spread(free_gpus + attempt.gpus)
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

    def _finish(self, attempt: Attempt) -> bool:
        """Make sure the job has a result; returns whether to retry it."""
        spec = attempt.spec
        if attempt.failure is not None:  # the launcher ended it (watchdog, a crash around the worker)
            self._write_failure(attempt, *attempt.failure)
        # result.json is the record (the supervisor completes it; a requeued job's return value, which
        # submitit also pickles, may be an earlier attempt's): read once, here, typed.
        row = read_result(spec.job_dir)
        if row is None:
            row = self._write_failure(attempt, *diagnose(attempt, self.launcher.state(attempt)))
        result = JobResult.from_dict(row)
        status = result.outcome.status
        ok = status == "ok"
        self.counts["done" if ok else "failed"] += 1
        self.results[spec.job_id] = result
        mark = "[green]ok[/green]" if ok else f"[red]{status}[/red]"
        speedup = result.speed.speedup if result.speed else None
        figure = f" speedup {speedup:.3f}" if ok and speedup else ""
        if ok:
            self.console.print(f"{mark} {spec.job_id} {spec.label}{figure}")
        else:  # the message, then where it failed and the file with the whole traceback
            self.console.print(f"{mark} {spec.job_id} {spec.label}: {failure_message(row)}")
            for line in failure_lines(row):
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        retry = self.base.retry
        if not ok and status in retry.on and self.attempts_made[spec.job_id] <= retry.max_retries:
            self.counts["failed"] -= 1
            del self.results[spec.job_id]
            (spec.job_dir / RESULT_FILE).unlink(missing_ok=True)
            self.console.print(
                f"[yellow]retrying {spec.job_id} ({self.attempts_made[spec.job_id]}/"
                f"{retry.max_retries})[/yellow]"
            )
            return True
        return False

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
