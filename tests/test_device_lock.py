"""The device lock of `launcher.overlap` (job/processes/device_lock.py), with real processes: held until the
holder ends, not by what the holder forked; a wait bounded by its limit; and the runner's GPU slots."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from orchestrator.core.failures import DeviceWaitTimeout
from orchestrator.job.phases.wall import WallClock
from orchestrator.job.processes.device_lock import hold_device
from orchestrator.launch.runner import spread

HOLDER = textwrap.dedent(
    """
    import os, sys, time, torch
    from pathlib import Path
    from orchestrator.job.processes.device_lock import hold_device
    from orchestrator.job.phases.wall import WallClock
    hold_device(torch.device("cpu"), WallClock(), wait_s=60, lock_dir=Path(sys.argv[1]))
    child = os.fork()
    if child == 0:  # a child forked without exec outlives the holder: it must not keep the lock
        os.close(0), os.close(1)
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
    sys.stdin.readline()  # hold until told to end
    """
)


def test_the_lock_is_held_until_its_process_ends_and_not_by_its_forks(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(holder.stdout.readline())
    try:
        clock = WallClock()
        with pytest.raises(DeviceWaitTimeout, match="waited 1 s for the lock of its device"):
            hold_device(torch.device("cpu"), clock, wait_s=1.0, lock_dir=tmp_path)
        assert clock.seconds["wait"] >= 1.0, "the wait is the job's `wait` phase"
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)  # the holder ends; its forked child sleeps on
        assert _alive(child), "the forked child is still there"
        assert hold_device(torch.device("cpu"), clock, wait_s=30.0, lock_dir=tmp_path) > 0
    finally:
        holder.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_jobs_spread_over_the_gpus_before_two_share_one():
    assert spread([]) == []
    assert spread([0, 0]) == [0, 0]
    assert spread([0, 1, 0, 1]) == [0, 0, 1, 1]  # the runner spreads again after each pick (below)
    free, placed = spread([0, 1] * 2), []
    while free:
        placed.append(free[0])
        free = spread(free[1:])
    assert placed[:2] == [0, 1], placed
    assert spread([1, 0, 1]) == [1, 1, 0], "an idle GPU (two free slots) before a busy one"
