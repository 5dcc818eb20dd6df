"""The Slurm launcher: job arrays on a cluster (submitit's SlurmExecutor; slurm_arrays.py sizes
them), and the queries it watches them with (sacct through submitit, scontrol, one squeue per poll)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import submitit

from orchestrator.config.schema import Config
from orchestrator.config.spec import JobSpec
from orchestrator.core.failures import ConfigError
from orchestrator.launch.diagnosis import Attempt
from orchestrator.launch.launcher import Launcher

LEFT_QUEUE_GRACE_S = 5.0
"""Seconds a Slurm job that left the queue gets to land its result before it is judged."""


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


class SlurmLauncher(Launcher):
    """Job arrays on a Slurm cluster (submitit's SlurmExecutor; slurm_arrays.py sizes them)."""

    name = "slurm"
    arrays = True

    def __init__(self, base: Config, sweep_dir: Path) -> None:
        super().__init__(base, sweep_dir)
        self.queue = QueueView()

    def executor(self) -> submitit.Executor:
        lc = self.base.launcher
        ex = submitit.SlurmExecutor(folder=self.folder, max_num_timeout=lc.max_requeues, python=lc.python)
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

    def parameters(self, spec: JobSpec) -> dict[str, Any]:
        cfg = spec.cfg
        distributed = cfg.parallel.world_size > 1
        return {
            "ntasks_per_node": cfg.parallel.ranks_per_node if distributed else 1,
            "nodes": cfg.parallel.nodes if distributed else 1,
            "gpus_per_node": self.gpus(spec) or None,
            "time": self.base.launcher.time_min or max(1, math.ceil(cfg.bench.timeout_s / 60)),
            "signal_delay_s": int(min(90, max(10, cfg.bench.timeout_s / 4))),
        }

    def capacity(self) -> int:
        return self.base.launcher.array_parallelism  # Slurm holds it (slurm_arrays.py)

    def ended(self, attempt: Attempt) -> bool:
        """Done, or gone from the queue for a moment (without accounting, submitit cannot see a job
        end that wrote no result)."""
        if attempt.job.done():
            return True
        queue = self.queue.ids()
        if queue is None or str(attempt.job.job_id) in queue:
            attempt.left_queue = None
            return False
        now = time.time()
        attempt.left_queue = attempt.left_queue or now
        return now - attempt.left_queue > LEFT_QUEUE_GRACE_S

    def state(self, attempt: Attempt) -> str:
        return slurm_state(str(attempt.job.job_id), self.folder)

    def check(self, cfg: Config) -> None:
        pass  # the compute nodes' GPUs and cores are Slurm's to judge

    def check_cluster(self, dry_run: bool) -> None:
        if not dry_run and shutil.which("sbatch") is None:
            raise ConfigError(
                "launcher=slurm but sbatch is not on PATH (run on a Slurm login node, or launcher=local)"
            )

    def queued(self, known: dict[str, dict], specs: list[JobSpec]) -> list[Attempt]:
        """Jobs an earlier orchestrator submitted that are still queued: waited for, never resubmitted."""
        queue = self.queue.ids() if known else None
        return [
            Attempt(spec, submitit.SlurmJob(self.folder, known[spec.job_id]["job_id"]), time.time())
            for spec in specs
            if queue and spec.job_id in known and known[spec.job_id]["job_id"] in queue
        ]

    def dry_run_text(self, spec: JobSpec) -> str | None:
        return f"sbatch script of {spec.job_id}:\n{self.sbatch_script(spec)}"

    def sbatch_script(self, spec: JobSpec) -> str:
        """The sbatch script submitit would write for this job (what `--dry-run` shows)."""
        executor = self.executor()
        executor.update_parameters(**self.parameters(spec))
        return executor._make_submission_file_text(executor._submitit_command_str, "%j")  # type: ignore[attr-defined]

    @classmethod
    def scheduler_state(cls, sweep_dir: Path, scheduler_id: str) -> str:
        return slurm_state(scheduler_id, sweep_dir / "logs" / "%j")

    @classmethod
    def cancel(cls, sweep_dir: Path, entry: dict) -> bool:
        submitit.SlurmJob(sweep_dir / "logs" / "%j", entry["job_id"]).cancel(check=False)
        return True


def _slurm_mem(gb: float | None) -> str | None:
    if not gb:
        return None
    return f"{int(gb)}G" if gb == int(gb) else f"{int(gb * 1024)}M"
