"""The isolation snapshot (orchestrator/job/phases/isolation.py) and its flag in the table and dashboard."""

from __future__ import annotations

import importlib.util
import os
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from rich.console import Console

from orchestrator.job.phases import isolation
from orchestrator.results.text import print_table


@pytest.fixture
def one_core():
    """This process bound to one core (as Slurm or taskset would bind a job), restored after."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    yield
    os.sched_setaffinity(0, before)


def test_cpu_snapshot_compares_the_real_load_with_the_bound_cores(one_core):
    snap = isolation.snapshot(torch.device("cpu"), {os.getpid()})
    assert snap.iso_cores == 1, "the cores this job may use, not the machine's"
    load = snap.iso_load_1m
    assert abs(load - os.getloadavg()[0]) < 1.0
    busy = load > 1
    assert snap.iso_ok is (not busy)
    assert snap.iso_note == (f"host busy: load {load:.2f} on 1 cores" if busy else None)


def test_cuda_without_nvml_says_isolation_was_not_checked():
    """nvidia-ml-py is not installed here (it is the `gpu` extra): the real import fails."""
    if importlib.util.find_spec("pynvml") is not None:
        pytest.skip("pynvml is installed here")
    snap = isolation.snapshot(torch.device("cuda", 0), {os.getpid()})
    assert snap.iso_ok is None and snap.iso_note == "NVML unavailable: isolation not checked"
    assert snap.iso_cores >= 1


class FakeNVMLError(Exception):
    pass


def fake_nvml(procs: list[tuple[int, int | None]], reasons: int, power_mw: int | None = 310_000):
    """A stand-in for the `pynvml` module: NVML needs an NVIDIA driver and GPU, which this machine
    does not have, so the calls isolation.py makes are answered from these values. The reason bits
    are nvml.h's (0x1 idle, 0x2 applications clocks, 0x20 SW thermal, 0x80 HW power brake)."""

    def power(handle):
        if power_mw is None:
            raise FakeNVMLError("Not Supported")
        return power_mw

    names = {p: f"/usr/bin/python{p}" for p, _ in procs}
    return SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVML_CLOCK_SM=1,
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetHandleByUUID=lambda uuid: ("handle", uuid),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in procs
        ],
        nvmlSystemGetProcessName=lambda pid: names[pid].encode(),
        nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 1 else 0,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980 if kind == 1 else 0,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: reasons,
        nvmlDeviceGetTemperature=lambda h, kind: 41,
        nvmlDeviceGetPowerUsage=power,
    )


def test_alone_on_an_idle_gpu_is_clean():
    nvml = fake_nvml([(100, 2 * 2**30)], reasons=0x1 | 0x2)  # idle and applications clocks: benign
    snap = isolation.gpu_snapshot(nvml, "GPU-x", {100})
    assert snap.iso_ok is True and snap.iso_note is None
    assert snap.iso_foreign_processes == [] and snap.iso_throttle == []
    assert (snap.iso_sm_clock_mhz, snap.iso_max_sm_clock_mhz) == (1980, 1980)
    assert (snap.iso_temperature_c, snap.iso_power_w) == (41, 310.0)


def test_a_foreign_process_and_thermal_throttling_are_flagged():
    nvml = fake_nvml([(100, 2**30), (200, 3 * 2**30), (300, None)], reasons=0x1 | 0x20 | 0x80, power_mw=None)
    snap = isolation.gpu_snapshot(nvml, "GPU-x", {100, 101})
    assert snap.iso_foreign_processes == ["200:python200:3072", "300:python300:?"]
    assert snap.iso_throttle == ["sw_thermal", "hw_power_brake"]
    assert snap.iso_ok is False
    assert snap.iso_note == "2 foreign processes on the GPU; throttled: sw_thermal, hw_power_brake"
    assert snap.iso_power_w is None, "not supported: recorded as absent"


def test_pids_of_another_namespace_count_one_of_them_as_this_job():
    alone = isolation.gpu_snapshot(fake_nvml([(9001, 2**30)], 0), "GPU-x", {100})
    assert alone.iso_ok is True, "the only process on the GPU is this job, seen from the host"
    shared = isolation.gpu_snapshot(fake_nvml([(9001, 2**30), (9002, 2**30)], 0), "GPU-x", {100})
    assert shared.iso_note == "1 foreign process on the GPU"


def test_table_and_dashboard_flag_a_job_that_was_not_alone(tmp_path):
    from orchestrator.report.dashboard import prepare

    df = pd.DataFrame(
        [
            {"job_id": "a1", "label": "compile.mode=eager", "mode": "eager", "status": "ok", "iso_ok": True},
            {
                "job_id": "b2",
                "label": "compile.mode=default",
                "mode": "default",
                "status": "ok",
                "iso_ok": False,
                "iso_note": "host busy: load 5.20 on 2 cores",
            },
        ]
    )
    console = Console(file=(out := tmp_path / "out.txt").open("w"), force_terminal=False, width=200)
    print_table(df, "sweep t", console)
    console.file.close()
    lines = out.read_text().splitlines()
    header = lines[1].split()
    assert "isolation" in header
    cells = {line.split()[0]: line.split() for line in lines[2:4]}
    assert cells["default"][header.index("isolation")] == "!"
    assert cells["eager"][header.index("isolation")] == "-"
    assert "b2 isolation: host busy: load 5.20 on 2 cores" in lines
    page, _ = prepare(df, tmp_path, {})
    assert page.set_index("job_id")["isolation"].to_dict() == {"a1": "", "b2": "!"}
    clean, _ = prepare(df.assign(iso_ok=True), tmp_path, {})
    assert "isolation" not in clean, "no column when every job had its device to itself"
