"""One job at a time measures on a device: a node-local lock per GPU (or per CPU host), for
`launcher.overlap`.

A job takes its device's lock before it first touches the device (the primer) and never lets go:
the lock is released when its process ends, when its CUDA context ends with it. So every second
that touches the device, the primer, the cold compile, the timed repetitions, the fresh processes
(more repetitions, each side alone, the compile probes), runs while no other job of this node holds
a context on that GPU, and NVML, the isolation check's source, lists no sibling: a sibling still
waiting has not touched CUDA (`torch.cuda.is_available()` initialises no context). What runs before
the lock, beside another job's measurements, is the interpreter's start, the imports, the set-up
and the import of the workload's model class.

The lock files live in the node's temporary directory, not in the sweep directory (which may be a
network file system, where `flock` is not to be trusted); sweeps on one node share them. The key is
the job's view of its GPUs (`CUDA_VISIBLE_DEVICES`, as the local launcher sets it).
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from pathlib import Path
from typing import IO

import torch

from orchestrator.job.wall import WallClock

LOCK_DIR = Path(tempfile.gettempdir()) / "orchestrator-device-locks"
_held: list[IO[str]] = []  # open until the process ends: closing the file would release the lock


def device_key(device: torch.device) -> str:
    """The lock's name for this job's device, read without touching CUDA."""
    if device.type != "cuda":
        return "cpu"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
    return "cuda-" + re.sub(r"[^A-Za-z0-9_.-]", "_", visible)


def hold_device(device: torch.device, clock: WallClock, lock_dir: Path = LOCK_DIR) -> float:
    """Wait (the `wait` phase) for this device's lock and keep it until the process ends; returns
    when it was taken (epoch seconds)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock = (lock_dir / f"{device_key(device)}.lock").open("a")  # not inherited by exec'd children
    with clock.phase("wait"):
        fcntl.flock(lock, fcntl.LOCK_EX)
    _held.append(lock)
    return time.time()
