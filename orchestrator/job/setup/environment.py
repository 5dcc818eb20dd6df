"""What a result was measured on."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from pathlib import Path

import torch

from orchestrator.core.result import Environment


def git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def boot_id() -> str | None:
    """This boot of this host (Linux): two jobs with the same host name and another boot ran on
    different machines, or across a reboot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def describe(device: torch.device, world_size: int, ask_device: bool = True) -> Environment:
    """The job's software and hardware. `ask_device` False: the GPU's name is not asked (CUDA would
    start up beside another job's measurements, for a job that failed before it held its device)."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    cuda = device.type == "cuda"
    return Environment(
        env_torch=torch.__version__,
        env_triton=triton_version,
        env_cuda=torch.version.cuda if cuda else None,
        env_device=(torch.cuda.get_device_name(device) if ask_device else None)
        if cuda
        else (platform.processor() or "cpu"),
        env_host=socket.gethostname(),
        env_boot=boot_id(),
        env_python=platform.python_version(),
        env_interpreter=sys.executable,
        env_world_size=world_size,
        env_git=git_revision(),
        env_cpu_threads=torch.get_num_threads(),
    )
