"""The sweep directory's files: one JSON per job written atomically, and the names every layer shares.

Only the orchestrator writes the sweep-level files (plan, ledger, table, verdict, dashboard). A job
writes inside its own folder (its result, rank errors, traceback, caches), and into the few places of
the sweep that jobs share on purpose, each made safe for that: the inductor cache with
`compile.cache=shared`, a node's measured matmul peaks (`bench.measure_peaks`), the links to this
code under `code/` for an `env.python` interpreter, and submitit's logs under `logs/`. A file is
written to a temporary name and renamed, so a reader never sees half of one. Plain `json` and the
standard library only: the supervisor (no torch, no pandas) uses it too.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

RESULT_FILE = "result.json"
PLAN_FILE = "plan.json"
JOBS_DIR = "jobs"


def job_dir(sweep_dir: Path | str, job_id: str) -> Path:
    return Path(sweep_dir) / JOBS_DIR / job_id


def private_cache_prefix(pid: int) -> str:
    """The name a job process's private compile caches begin with, in its job's folder (the host
    too: the ranks of a job on several nodes share the folder, and pids repeat across hosts)."""
    return f"inductor-{socket.gethostname()}-{pid}-"


def remove_private_caches(folder: Path, pid: int | None = None) -> None:
    """Remove the private compile caches in a job's folder that a process killed before its own
    clean-up left there (GBs on a GPU): process `pid`'s; or, before the job is submitted again, those
    of this host's processes that are gone (an attempt still running elsewhere keeps its own)."""
    if pid is not None:
        doomed = list(folder.glob(private_cache_prefix(pid) + "*"))
    else:
        here = f"inductor-{socket.gethostname()}-"
        doomed = [c for c in folder.glob(here + "*") if not _alive(c.name.removeprefix(here).split("-")[0])]
    for cache in doomed:
        shutil.rmtree(cache, ignore_errors=True)


def _alive(pid: str) -> bool:
    """A process that can still use its cache: not gone, and not a zombie (dead, not yet reaped: a
    host whose init reaps late, or a container with none, keeps one for ever; `os.kill(pid, 0)` alone
    reads it alive, and its cache stayed)."""
    if not pid.isdigit():
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        pass  # no /proc here (or gone while read): ask the kernel
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def json_safe(value: Any) -> Any:
    """JSON-safe: NaN/inf become strings so that the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(json_safe(data), f, indent=2, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file's content, or None if it is absent or unreadable (never half-trusted)."""
    try:
        data: dict[str, Any] | None = json.loads(path.read_text())
        return data
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def read_result(job_dir: Path) -> dict[str, Any] | None:
    """The job's result, or None if there is none (or it is unreadable)."""
    return read_json(job_dir / RESULT_FILE)


def has_result(job_dir: Path) -> bool:
    """Whether the job has a result file (written atomically: whole, or not there), without reading it."""
    return (job_dir / RESULT_FILE).exists()


def read_plan(sweep_dir: Path) -> dict[str, Any]:
    """The sweep's planned jobs (`plan.json`: id -> label and axes), in plan order; {} if absent."""
    plan = read_json(sweep_dir / PLAN_FILE)
    jobs: dict[str, Any] = plan["jobs"] if plan else {}
    return jobs
