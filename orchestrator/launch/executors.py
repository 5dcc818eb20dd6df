"""The submitit executor of a sweep and each job's parameters (ranks, nodes, GPUs, time limit)."""

from __future__ import annotations

import math
from pathlib import Path

import submitit
import torch

from orchestrator.config import Config
from orchestrator.job.device import expects_cuda
from orchestrator.spec import JobSpec


def uses_cuda(cfg: Config) -> bool:
    """Whether the job runs on GPUs: asked for, `auto` under Slurm (the login node's own GPUs say
    nothing about the compute nodes'), or `auto` on a local machine that has one."""
    device = cfg.bench.device
    return expects_cuda(device, cfg.launcher.name) or (device == "auto" and torch.cuda.is_available())


def slurm_time_min(cfg: Config) -> int:
    return cfg.launcher.time_min or max(1, math.ceil(cfg.bench.timeout_s / 60))


def _slurm_mem(gb: float | None) -> str | None:
    if not gb:
        return None
    return f"{int(gb)}G" if gb == int(gb) else f"{int(gb * 1024)}M"


def make_executor(base: Config, sweep_dir: Path) -> submitit.Executor:
    """The submitit executor for `launcher.name`, with the sweep's parameters."""
    lc = base.launcher
    folder = sweep_dir / "logs" / "%j"
    if lc.name == "debug":
        return submitit.DebugExecutor(folder=folder)
    if lc.name == "local":
        return submitit.LocalExecutor(folder=folder, max_num_timeout=lc.max_requeues)
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=lc.max_requeues, python=lc.python)
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


def job_parameters(spec: JobSpec, base: Config) -> dict:
    """Per-job executor parameters: ranks, nodes, GPUs and the time limit."""
    cfg = spec.cfg
    distributed = cfg.parallel.world_size > 1
    ranks_per_node = cfg.parallel.ranks_per_node if distributed else 1
    gpus = base.launcher.gpus_per_node
    if gpus is None:
        gpus = ranks_per_node if uses_cuda(cfg) else 0
    timeout_s = cfg.bench.timeout_s
    if base.launcher.name == "slurm":
        return {
            "ntasks_per_node": ranks_per_node,
            "nodes": cfg.parallel.nodes if distributed else 1,
            "gpus_per_node": gpus or None,
            "time": slurm_time_min(cfg),
            "signal_delay_s": int(min(90, max(10, timeout_s / 4))),
        }
    return {
        "tasks_per_node": ranks_per_node,
        "gpus_per_node": gpus,
        "timeout_min": timeout_s / 60,
        "signal_delay_s": int(min(30, max(1, timeout_s / 4))),
    }


def sbatch_script(spec: JobSpec, base: Config, sweep_dir: Path) -> str:
    """The sbatch script submitit would write for this job (what `--dry-run` shows for Slurm)."""
    executor = make_executor(base, sweep_dir)
    executor.update_parameters(**job_parameters(spec, base))
    return executor._make_submission_file_text(executor._submitit_command_str, "%j")
