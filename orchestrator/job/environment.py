"""What a result was measured on."""

from __future__ import annotations

import platform
import socket
import subprocess
from pathlib import Path

import torch

# Dense peak TFLOP/s for bf16/fp16 tensor cores, by device-name fragment.
PEAK_TFLOPS_16BIT = {"H200": 989.0, "H100": 989.0, "A100": 312.0}


def peak_flops(device: torch.device, dtype: str) -> float | None:
    """Peak FLOP/s for MFU, where known (16-bit dtypes on known GPUs)."""
    if device.type != "cuda" or dtype == "fp32":
        return None
    name = torch.cuda.get_device_name(device)
    for fragment, tflops in PEAK_TFLOPS_16BIT.items():
        if fragment in name:
            return tflops * 1e12
    return None


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


def describe(device: torch.device, world_size: int) -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    cuda = device.type == "cuda"
    return {
        "env_torch": torch.__version__,
        "env_triton": triton_version,
        "env_cuda": torch.version.cuda if cuda else None,
        "env_device": torch.cuda.get_device_name(device) if cuda else (platform.processor() or "cpu"),
        "env_host": socket.gethostname(),
        "env_python": platform.python_version(),
        "env_world_size": world_size,
        "env_git": git_revision(),
        "env_cpu_threads": torch.get_num_threads(),
    }
