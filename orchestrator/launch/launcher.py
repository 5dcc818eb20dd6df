"""A launcher: where a sweep's jobs run, as an object (local, debug and slurm are its kinds, as
submitit models its executors). It makes the submitit executor and each job's parameters, says how
many jobs run at once, how a running job is seen to end and what state it is in, checks what it
needs of this machine, and cancels or stops what an earlier orchestrator left. The runner and the
commands on a sweep directory ask it instead of comparing launcher names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import submitit
import torch

from orchestrator.config.schema import Config
from orchestrator.config.spec import JobSpec
from orchestrator.core.failures import ConfigError
from orchestrator.job.processes.supervisor import Worker
from orchestrator.job.setup.device import expects_cuda
from orchestrator.launch.diagnosis import Attempt


def uses_cuda(cfg: Config) -> bool:
    """Whether the job runs on GPUs: asked for, `auto` under Slurm (the login node's own GPUs say
    nothing about the compute nodes'), or `auto` on a local machine that has one."""
    device = cfg.bench.device
    return expects_cuda(device, cfg.launcher.name) or (device == "auto" and torch.cuda.is_available())


class Launcher:
    """The launcher of one sweep: its executor, its jobs' parameters, and how they are watched."""

    name: ClassVar[str]
    arrays: ClassVar[bool] = False
    """Whether jobs go in as arrays (all at once) rather than one by one as capacity frees."""
    places_gpus: ClassVar[bool] = False
    """Whether the orchestrator picks each job's GPUs of this host (CUDA_VISIBLE_DEVICES)."""
    pid_jobs: ClassVar[bool] = False
    """Whether a job's scheduler id is the PID of its controller on this host (ledger.py)."""

    def __init__(self, base: Config, sweep_dir: Path) -> None:
        self.base, self.sweep_dir = base, sweep_dir
        self.folder = sweep_dir / "logs" / "%j"

    def executor(self) -> submitit.Executor:
        raise NotImplementedError

    def parameters(self, spec: JobSpec) -> dict[str, Any]:
        """Per-job executor parameters: ranks, GPUs and the time limit."""
        raise NotImplementedError

    def task(self) -> Callable[[JobSpec], Any]:
        """The callable each job runs: the supervisor, which watches the worker in a child process."""
        return Worker()

    def gpus(self, spec: JobSpec) -> int:
        """GPUs per node for this job: `launcher.gpus_per_node`, else one per rank on CUDA."""
        gpus = self.base.launcher.gpus_per_node
        if gpus is not None:
            return gpus
        cfg = spec.cfg
        return (cfg.parallel.ranks_per_node if cfg.parallel.world_size > 1 else 1) if uses_cuda(cfg) else 0

    def submitting(self, spec: JobSpec) -> contextlib.AbstractContextManager:
        """The scope `spec`'s submission runs in (local: where the controllers' own output goes, and
        the port its ranks meet at)."""
        return contextlib.nullcontext()

    def jobs_per_device(self) -> int:
        """Jobs placed on one GPU (or the CPU host) at once: two under `launcher.overlap`, where one
        starts while the other measures (job/processes/device_lock.py), else one."""
        return 2 if self.base.launcher.overlap else 1

    def capacity(self) -> int:
        """Jobs at once: `launcher.max_parallel`, else `jobs_per_device` per GPU of this host (per
        CPU host)."""
        if self.base.launcher.max_parallel:
            return self.base.launcher.max_parallel
        devices = torch.cuda.device_count()
        if self.base.launcher.overlap and not uses_cuda(self.base):
            devices = 1  # CPU jobs share one lock per host: two at a time, not two per GPU
        return self.jobs_per_device() * max(1, devices)

    def ended(self, attempt: Attempt) -> bool:
        return attempt.job.done()

    def state(self, attempt: Attempt) -> str:
        return str(getattr(attempt.job, "state", ""))

    def check_cluster(self, dry_run: bool) -> None:
        """What the launcher needs of this machine for any job (slurm: `sbatch`): one ConfigError line."""

    def queued(self, known: dict[str, dict], specs: list[JobSpec]) -> list[Attempt]:
        """Jobs of `specs` an earlier orchestrator submitted that are still queued (slurm), to wait for."""
        return []

    def dry_run_text(self, spec: JobSpec) -> str | None:
        """What `--dry-run` shows of a job beyond the plan (slurm: its sbatch script)."""
        return None

    def check(self, cfg: Config) -> None:
        """One job's needs that this launcher cannot meet here: one ConfigError line."""
        if cfg.bench.device == "cuda" and not torch.cuda.device_count():
            raise ConfigError(
                "bench.device=cuda but this machine has no GPU; choose bench.device=cpu or auto"
            )
        if self.base.sweep.detach:
            raise ConfigError(f"sweep.detach=true needs launcher=slurm (got launcher={self.name})")

    # --- a sweep directory's jobs, from its ledger (status, cancel, a killed orchestrator's orphans)
    @classmethod
    def scheduler_state(cls, sweep_dir: Path, scheduler_id: str) -> str:
        return "UNKNOWN"

    @classmethod
    def cancel(cls, sweep_dir: Path, entry: dict) -> bool:
        """Cancel one unfinished job of the ledger; whether it was still there to cancel."""
        raise NotImplementedError

    @classmethod
    def stop_orphans(cls, sweep_dir: Path) -> int:
        """Stop jobs an earlier, killed orchestrator left running, so a re-run never duplicates them."""
        return 0
