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

from orchestrator.core.failures import DeviceWaitTimeout
from orchestrator.job.phases.wall import WallClock

LOCK_DIR = Path(tempfile.gettempdir()) / "orchestrator-device-locks"
POLL_S = 0.2
_held: list[IO[str]] = []  # open until the process ends: closing the file would release the lock


def _forget_in_child() -> None:
    """A child forked without exec (a fork-started compile worker, the user's own) must not keep
    the lock once this process ends: it closes its copies (which leaves the parent's lock held)."""
    for lock in _held:
        lock.close()
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def device_key(device: torch.device) -> str:
    """The lock's name for this job's device, read without touching CUDA."""
    if device.type != "cuda":
        return "cpu"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
    return "cuda-" + re.sub(r"[^A-Za-z0-9_.-]", "_", visible)


def _lock_file(lock_dir: Path, key: str) -> IO[str]:
    """The key's lock file, open; the folder and the file writable by every user of the node (the
    first user's umask would lock the others out)."""
    if not lock_dir.exists():
        lock_dir.mkdir(parents=True, exist_ok=True)
        if lock_dir.stat().st_uid == os.getuid():
            lock_dir.chmod(0o1777)  # shared, as /tmp is: each may remove only their own files
    fd = os.open(lock_dir / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    if os.fstat(fd).st_uid == os.getuid():
        os.fchmod(fd, 0o666)
    return os.fdopen(fd, "r+")


def hold_device(device: torch.device, clock: WallClock, wait_s: float, lock_dir: Path = LOCK_DIR) -> float:
    """Wait (the `wait` phase) at most `wait_s` for this device's lock and keep it until the process
    ends; returns when it was taken (epoch seconds). Raises DeviceWaitTimeout past `wait_s`."""
    if _held:  # this process holds it already (jobs run one after another in one process)
        return clock.locked_at or time.time()
    lock = _lock_file(lock_dir, device_key(device))
    deadline = time.monotonic() + wait_s
    with clock.phase("wait"):
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise DeviceWaitTimeout(
                        f"waited {wait_s:.0f} s for the lock of its device ({device_key(device)}), held by "
                        "another job of this node (launcher.overlap)"
                    ) from None
                time.sleep(POLL_S)
    _held.append(lock)
    return time.time()
