"""Which device a job runs on, and the check that it got the one it was submitted for.

Under Slurm the orchestrator runs on a login node, which has no GPU: `torch.cuda.is_available()`
there says nothing about the compute nodes. So `bench.device=auto` with `launcher=slurm` means a
GPU job (Slurm is asked for GPUs), and a job that lands without CUDA fails instead of quietly
timing the CPU.
"""

from __future__ import annotations

import socket

import torch


class DeviceMissingError(RuntimeError):
    """The job was submitted for a GPU and CUDA sees none here (a `crash` row with this message)."""


def expects_cuda(device: str, launcher: str) -> bool:
    """Whether the job must run on CUDA whatever the submitting host has."""
    return device == "cuda" or (device == "auto" and launcher == "slurm")


def job_device(device: str) -> torch.device:
    """The device the job runs on here: CUDA where it may (`cuda`, `auto`) and this process sees a
    GPU, else the CPU (where CUDA was expected, `check_device` then fails the job)."""
    return torch.device("cuda" if device != "cpu" and torch.cuda.is_available() else "cpu")


def check_device(device: str, launcher: str) -> None:
    """Raise DeviceMissingError, in one line saying what to do, when CUDA was expected and is absent."""
    if not expects_cuda(device, launcher) or torch.cuda.is_available():
        return
    why = (
        "bench.device=auto under launcher=slurm asks Slurm for one"
        if device == "auto"
        else "bench.device=cuda"
    )
    raise DeviceMissingError(
        f"expected a GPU ({why}) but CUDA sees none on {socket.gethostname()}; "
        "set bench.device=cpu to benchmark the CPU"
    )
