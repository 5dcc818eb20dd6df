"""Why a job ended without a result file, written as its result (the orchestrator's side of it)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import submitit

from orchestrator.config.spec import JobSpec
from orchestrator.core.failures import RANK_ERROR, first_rank_error, from_scheduler_state
from orchestrator.job.skeleton import result_skeleton

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
    failure: tuple[str, str] | None = None
    """(class, message) when the launcher itself ended the job (a watchdog, a debug job's crash)."""


def failure_result(spec: JobSpec, attempt: Attempt | None, status: str, error: str) -> dict:
    """The result the orchestrator writes for a job that ended without writing its own."""
    result = result_skeleton(spec)
    outcome = result.outcome
    outcome.status, outcome.error = status, error
    if attempt is not None:
        outcome.log_stdout = str(attempt.job.paths.stdout)
        outcome.log_stderr = str(attempt.job.paths.stderr)
        outcome.error_log = outcome.log_stderr  # what the worker printed before it died
        outcome.wall_s = time.time() - attempt.started
    first = first_rank_error(spec.job_dir)
    if first is not None:  # a rank recorded why it failed before the job died
        outcome.status = first["status"] if status == "crash" else status
        outcome.error = f"rank {first['rank']}: {first['error']} ({error})"
        outcome.error_where = first.get("where")
        outcome.error_log = str(spec.job_dir / RANK_ERROR.format(first["rank"]))  # its whole traceback
    return result.to_dict()


def log_tail(attempt: Attempt) -> str:
    try:
        text = attempt.job.paths.stderr.read_text(errors="replace")
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:].strip()


def diagnose(attempt: Attempt, state: str) -> tuple[str, str]:
    """Failure class and message of a job that ended without a result, from its scheduler state
    and its log: its time limit, the scheduler's verdict, or a crash (with the log's last line)."""
    tail = log_tail(attempt)
    try:
        exc: BaseException | None = attempt.job.exception()
    except Exception as e:  # submitit could not read the job's outcome: say what it said
        exc = e
    text = f"{exc}" if exc else ""
    state = state.upper()
    if "TIMEOUT" in state or "timed-out" in text or "timed out" in tail.lower():
        return "timeout", f"hit its time limit of {attempt.spec.cfg.time_limit_s():.0f} s per attempt"
    if "CANCELLED" in state:
        return "crash", f"job cancelled (state {state})"
    scheduler_class = from_scheduler_state(state)
    if scheduler_class == "oom":
        return "oom", f"the scheduler killed the job for memory (state {state})"
    last = tail.splitlines()[-1] if tail else text.splitlines()[0] if text else "no output"
    return "crash", f"worker exited without a result (state {state or 'unknown'}): {last}"[:2000]
