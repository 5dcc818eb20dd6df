"""submitted.json: which scheduler job runs which spec, and stopping what a killed orchestrator left.

Only the orchestrator writes the ledger. For local jobs it also records each controller's process
start time, so that a later orchestrator never signals a recycled PID.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import submitit

from orchestrator.config.spec import JobSpec
from orchestrator.core.files import has_result, write_json_atomic

SUBMITTED_FILE = "submitted.json"
STOP_GRACE_S = 5.0
"""Seconds a left-over local job gets to end on SIGINT (submitit's cancel) before SIGKILL."""


def read_ledger(sweep_dir: Path) -> dict:
    path = sweep_dir / SUBMITTED_FILE
    return json.loads(path.read_text()) if path.exists() else {"launcher": None, "jobs": {}}


def record_submitted(
    sweep_dir: Path, launcher: str, jobs: list[submitit.Job], specs: list[JobSpec], pid_jobs: bool
) -> None:
    """Add jobs to the ledger; `pid_jobs`: their ids are controller PIDs, recorded with start times."""
    data = read_ledger(sweep_dir)
    data["launcher"] = launcher
    for job, spec in zip(jobs, specs, strict=True):
        entry = {"job_id": str(job.job_id), "label": spec.label, "submitted": time.time()}
        if pid_jobs:
            entry["start_time"] = process_start_time(int(job.job_id))
        data["jobs"][spec.job_id] = entry
    data["orchestrator_pid"] = os.getpid()
    write_json_atomic(sweep_dir / SUBMITTED_FILE, data)


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of a process (clock ticks since boot), its identity beside the PID."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
    return None if fields[0] == "Z" else int(fields[19])


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (the controller's tasks and what they started)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone while we looked
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def stop_process_tree(pid: int, start_time: int | None, grace_s: float = STOP_GRACE_S) -> bool:
    """Stop a local job's controller and everything below it, for certain; True if it was running.

    SIGINT first (submitit's own cancel: the controller kills its tasks), then SIGKILL to every
    process of the tree that is left; returns only once they are gone. Checkpointable jobs ignore
    SIGTERM, so it is never relied on. A PID whose start time differs is someone else's: left alone.
    """
    if start_time is None or process_start_time(pid) != start_time:
        return False
    tree = [pid, *descendants(pid)]
    _signal_all(tree, signal.SIGINT)
    deadline = time.time() + grace_s
    while time.time() < deadline and any(process_start_time(p) is not None for p in tree):
        time.sleep(0.1)
    tree += [p for p in descendants(pid) if p not in tree]
    _signal_all([p for p in tree if process_start_time(p) is not None], signal.SIGKILL)
    deadline = time.time() + 30
    while any(process_start_time(p) is not None for p in tree):
        if time.time() > deadline:  # SIGKILL cannot be ignored; only a process stuck in the kernel stays
            raise RuntimeError(f"local job {pid} survived SIGKILL; stop it before re-running this sweep")
        time.sleep(0.05)
    return True


def stop_orphans(sweep_dir: Path) -> int:
    """Stop local jobs left running by an orchestrator that was killed, so a re-run never duplicates them
    (the ledger's entries that have a start time: controller PIDs of this host)."""
    data = read_ledger(sweep_dir)
    stopped = 0
    for job_id, info in data["jobs"].items():
        if has_result(sweep_dir / "jobs" / job_id) or "start_time" not in info:
            continue
        stopped += stop_process_tree(int(info["job_id"]), info.get("start_time"))
    return stopped
