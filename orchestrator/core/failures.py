"""The failure vocabulary: bad input, the classes a job can end in, and every place that decides one.

Bad input (a config value, a flag, a sweep directory) is a `ConfigError`: one line, exit code 2,
before anything runs. A job is `ok` or ends in exactly one class of FAILURE_CLASSES. Inside a job,
the exception it raised decides (`classify`, called by the worker); its supervisor decides for a
child that died without a result (`crash`) or hit submitit's time limit (`timeout`,
job/processes/supervisor.py); the orchestrator for a job that left no result at all, from its scheduler state
(`from_scheduler_state`), its log and the error a rank recorded before the job died
(`first_rank_error`; launch/diagnosis.py).
"""

from __future__ import annotations

import json
import re
import sys
import sysconfig
import time
import traceback
from pathlib import Path
from typing import Any

from orchestrator.core.files import write_json_atomic

FAILURE_CLASSES = ("parity_fail", "eager_not_finite", "compile_error", "oom", "timeout", "crash", "no_graph")
RANK_ERROR = "rank{}.error.json"


class ConfigError(ValueError):
    """A bad config value, flag or path; its message is the one line the user sees."""


class ParityError(RuntimeError):
    """Compiled results differ from eager beyond tolerance (the figures travel in the result)."""


class EagerNotFiniteError(ParityError):
    """Eager itself gave NaN or Inf: the model or its inputs are at fault, not compile (no parity)."""


class NoGraphError(RuntimeError):
    """The compiled model captured no graph: it ran eager, so any speedup is noise."""


class CompileError(RuntimeError):
    """The first compiled call (or dynamo's trace of the model) failed."""


class DeviceWaitTimeout(TimeoutError):
    """`launcher.overlap`: the job waited its whole `bench.timeout_s` for its device's lock."""


def classify(exc: BaseException) -> str:
    """The failure class of an exception raised by a job."""
    import torch
    from submitit.core.utils import UncompletedJobError

    if isinstance(exc, EagerNotFiniteError):
        return "eager_not_finite"
    if isinstance(exc, ParityError):
        return "parity_fail"
    if isinstance(exc, NoGraphError):
        return "no_graph"
    if isinstance(exc, torch.OutOfMemoryError) or isinstance(exc.__cause__, torch.OutOfMemoryError):
        return "oom"
    if isinstance(exc, CompileError):
        return "compile_error"
    if isinstance(exc, DeviceWaitTimeout):
        return "timeout"
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


def write_rank_error(job_dir: Path, rank: int, status: str, error: str, where: str | None = None) -> None:
    """Record why this rank failed, before the job dies: the cause, where peers see a broken group.
    The whole traceback, untrimmed (the job's stderr log holds it too)."""
    write_json_atomic(
        job_dir / RANK_ERROR.format(rank),
        {
            "rank": rank,
            "time": time.time(),
            "status": status,
            "error": error,
            "where": where,
            "traceback": traceback.format_exc(),
        },
    )


# Not the user's code: torch, transformers, timm, numpy, this package, the launch stack, Python's own.
_NOT_USERS = ("torch", "transformers", "timm", "numpy", "orchestrator", "workloads", "submitit", "hydra")
_STDLIB = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
# dynamo's compile errors end with the user's frame it was tracing: `File "x.py", line 12, in forward`.
_DYNAMO_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _package_dirs(names: tuple[str, ...]) -> list[str]:
    dirs = []
    for name in names:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if file:
            dirs.append(str(Path(file).resolve().parent) + "/")
    return dirs


def _is_users(filename: str, library: list[str]) -> bool:
    if filename.startswith("<"):  # <frozen ...>, <string>, generated code
        return False
    path = str(Path(filename).resolve())
    return not path.startswith(_STDLIB) and not any(path.startswith(d) for d in library)


def user_frame(exc: BaseException) -> str | None:
    """Where a job's failure happened in the user's code, as `file:line (function)`: dynamo's "from
    user code" frame for a compile error, else the innermost traceback frame outside torch,
    transformers, timm, this package and Python's library, over the exception's causes (the root
    cause first); else the innermost frame outside torch and this package (a transformers model's
    own line); None when every frame is torch's or ours."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    not_users = _package_dirs(_NOT_USERS)
    for e in reversed(chain):
        text = str(e)
        if "from user code" in text:
            tail = text.split("from user code", 1)[1]
            frames = [m for m in _DYNAMO_FRAME.findall(tail) if _is_users(m[0], not_users)]
            if frames:
                file, line, fn = frames[-1]
                return f"{file}:{line} ({fn})"
    for library in (not_users, _package_dirs(("torch", "orchestrator", "workloads", "submitit", "hydra"))):
        for e in reversed(chain):
            frames = [f for f in traceback.extract_tb(e.__traceback__) if _is_users(f.filename, library)]
            if frames:
                f = frames[-1]
                return f"{f.filename}:{f.lineno} ({f.name})"
    return None


def clear_rank_errors(job_dir: Path) -> None:
    """Before a job is submitted again: its earlier attempt's rank errors are not this attempt's."""
    for path in job_dir.glob(RANK_ERROR.format("*")):
        path.unlink(missing_ok=True)


def first_rank_error(job_dir: Path) -> dict[str, Any] | None:
    """The earliest error any rank recorded, or None."""
    errors: list[dict[str, Any]] = []
    for path in job_dir.glob(RANK_ERROR.format("*")):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # a rank died while writing it: the others still tell
    return min(errors, key=lambda e: e["time"]) if errors else None


def failure_message(row: Any) -> str:
    """A failed result's (a dict or a table row) message, its first line."""
    text = str(row.get("error") or "").strip()
    return text.splitlines()[0] if text else "no message"


def failure_lines(row: Any) -> list[str]:
    """Where a failed result failed in the user's code and the file with its whole traceback, as the
    lines printed under its message, each on its own so that no path is cut off."""
    return [
        f"  {what}: {row[key]}"
        for key, what in (("error_where", "at"), ("error_log", "traceback"))
        if isinstance(row.get(key), str) and row.get(key)
    ]
