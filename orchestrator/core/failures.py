"""The failure vocabulary: bad input, the classes a job can end in, and every place that decides one.

Bad input (a config value, a flag, a sweep directory) is a `ConfigError`: one line, exit code 2,
before anything runs. A job is `ok` or ends in exactly one class of FAILURE_CLASSES. Inside a job,
the exception it raised decides (`classify`); outside, a scheduler's state (`from_scheduler_state`)
or the error a rank recorded before the job died (`first_rank_error`).
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from orchestrator.core.files import write_json_atomic

FAILURE_CLASSES = ("parity_fail", "compile_error", "oom", "timeout", "crash", "no_graph")
RANK_ERROR = "rank{}.error.json"


class ConfigError(ValueError):
    """A bad config value, flag or path; its message is the one line the user sees."""


class ParityError(RuntimeError):
    """Compiled results differ from eager beyond tolerance (the figures travel in the result)."""


class NoGraphError(RuntimeError):
    """The compiled model captured no graph: it ran eager, so any speedup is noise."""


class CompileError(RuntimeError):
    """The first compiled call (or dynamo's trace of the model) failed."""


def classify(exc: BaseException) -> str:
    """The failure class of an exception raised by a job."""
    import torch
    from submitit.core.utils import UncompletedJobError

    if isinstance(exc, ParityError):
        return "parity_fail"
    if isinstance(exc, NoGraphError):
        return "no_graph"
    if isinstance(exc, torch.OutOfMemoryError) or isinstance(exc.__cause__, torch.OutOfMemoryError):
        return "oom"
    if isinstance(exc, CompileError):
        return "compile_error"
    if isinstance(exc, UncompletedJobError) and "timed-out" in str(exc):
        return "timeout"  # submitit's signal handler: time limit reached, no requeue left
    return "crash"


# Slurm job states that mean the job is over, and the class a job that wrote no result gets.
ENDED_STATES = {
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "OUT_OF_MEMORY": "oom",
    "FAILED": "crash",
    "CANCELLED": "crash",
    "NODE_FAIL": "crash",
    "PREEMPTED": "crash",
    "BOOT_FAIL": "crash",
    "COMPLETED": "crash",  # completed without writing a result: the worker died on its way out
}


def from_scheduler_state(state: str) -> str | None:
    """The failure class of a job that ended in this scheduler state without a result; None if it
    has not ended (`CANCELLED by 0` and other suffixed forms count by their first word)."""
    word = state.upper().split()[0] if state.strip() else ""
    return ENDED_STATES.get(word)


def write_rank_error(job_dir: Path, rank: int, status: str, error: str) -> None:
    """Record why this rank failed, before the job dies: the cause, where peers see a broken group."""
    write_json_atomic(
        job_dir / RANK_ERROR.format(rank),
        {
            "rank": rank,
            "time": time.time(),
            "status": status,
            "error": error,
            "traceback": traceback.format_exc()[-4000:],
        },
    )


def first_rank_error(job_dir: Path) -> dict | None:
    """The earliest error any rank recorded, or None."""
    errors = []
    for path in job_dir.glob(RANK_ERROR.format("*")):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a rank died while writing it: the others still tell
    return min(errors, key=lambda e: e["time"]) if errors else None
