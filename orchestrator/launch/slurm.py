"""Slurm queries: a job's state, and the queue (one squeue call, cached between polls)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import submitit


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


class QueueView:
    """squeue read at most every `max_age_s`, so a poll costs one call whatever the number of jobs."""

    def __init__(self, max_age_s: float = 2.0) -> None:
        self.max_age_s = max_age_s
        self._ids: set[str] | None = None
        self._read_at = 0.0

    def ids(self) -> set[str] | None:
        now = time.time()
        if now - self._read_at > self.max_age_s:
            self._ids, self._read_at = slurm_queue(), now
        return self._ids
