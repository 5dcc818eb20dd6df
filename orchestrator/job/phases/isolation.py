"""Was the job alone? A snapshot taken right before the timed repetitions.

On CUDA, through NVML (nvidia-ml-py, imported as `pynvml`; the `gpu` extra): other compute processes
on this GPU, its SM clock against the maximum, active throttle reasons, temperature and power. On
CPU, the host's 1-minute load average against the cores this job may use. `iso_ok` is False when
a figure was measured next to a foreign process, throttled, or on a busy host; `iso_note` says why.
"""

from __future__ import annotations

import dataclasses
import os
from types import ModuleType
from typing import Any

import torch

from orchestrator.core.result import Isolation

# NVML's clock-event (throttle) reason bits, as nvml.h defines them (stable across driver versions;
# nvidia-ml-py renamed the constants from ...ThrottleReason... to ...EventReason..., the bits stayed).
# Only these mean the clocks were pulled below what the workload would get on a healthy, idle-spec
# GPU: hardware protection (slowdown, power brake) and heat (SW/HW thermal). The power cap is listed
# but does not flag the job: on the H200 a compiled GPT-2 step reaches the board's 700 W limit by
# itself (seen on every compiled job there), which is the workload's own draw, not interference.
# Not throttling: gpu_idle (nothing running at the instant of the snapshot), the applications-
# clocks and display-clock settings (configuration, not a slowdown) and sync boost (clocks held
# together across a group of GPUs).
THROTTLE_REASONS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000020: "sw_thermal",
    0x0000000000000040: "hw_thermal",
    0x0000000000000080: "hw_power_brake",
}
NVML_MISSING = "NVML unavailable: isolation not checked"


def cores_available() -> int:
    """Cores this process may run on (a Slurm or taskset binding), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def host_load() -> dict:
    """The host's 1-minute load average and the cores available to the job."""
    return {"iso_load_1m": round(os.getloadavg()[0], 2), "iso_cores": cores_available()}


def cpu_snapshot() -> Isolation:
    """CPU job: a load above the job's cores means other work shared those cores while it ran."""
    fields = host_load()
    load, cores = fields["iso_load_1m"], fields["iso_cores"]
    busy = load > cores
    note = f"host busy: load {load:.2f} on {cores} cores" if busy else None
    return Isolation(**fields, iso_ok=not busy, iso_note=note)


def _read(nvml: ModuleType, fn: str, *args: object) -> Any:
    """One NVML reading (a number, a list, bytes); None where this GPU or driver does not support it."""
    try:
        return getattr(nvml, fn)(*args)
    except nvml.NVMLError:
        return None


def _process_name(nvml: ModuleType, pid: int) -> str:
    name = _read(nvml, "nvmlSystemGetProcessName", pid)
    if isinstance(name, bytes):  # older nvidia-ml-py returns bytes
        name = name.decode(errors="replace")
    return os.path.basename(str(name)) if name else "?"


def _throttle_reasons(nvml: ModuleType, handle: object) -> list[str]:
    getter = (
        "nvmlDeviceGetCurrentClocksEventReasons"
        if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons")
        else "nvmlDeviceGetCurrentClocksThrottleReasons"
    )
    mask = _read(nvml, getter, handle) or 0
    return [name for bit, name in THROTTLE_REASONS.items() if int(mask) & bit]


def gpu_snapshot(nvml: ModuleType, uuid: str, own_pids: set[int]) -> Isolation:
    """The NVML readings of the GPU with this UUID ("GPU-..." or "MIG-...")."""
    handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
    procs = _read(nvml, "nvmlDeviceGetComputeRunningProcesses", handle) or []
    others = [p for p in procs if p.pid not in own_pids]
    foreign = len(others)
    if procs and len(others) == len(procs):
        # This job holds a context on the GPU, yet none of the PIDs is ours: NVML reports PIDs of
        # another namespace (a container). One of them is this job; the rest are foreign.
        foreign -= 1
    listed = []
    for p in others:
        mib = f"{p.usedGpuMemory / 2**20:.0f}" if p.usedGpuMemory is not None else "?"
        listed.append(f"{p.pid}:{_process_name(nvml, p.pid)}:{mib}")
    power_mw = _read(nvml, "nvmlDeviceGetPowerUsage", handle)
    throttle = _throttle_reasons(nvml, handle)
    notes = []
    if foreign > 0:
        notes.append(f"{foreign} foreign process{'es' if foreign > 1 else ''} on the GPU")
    slowed = [t for t in throttle if t != "sw_power_cap"]  # the cap: listed, not flagged (above)
    if slowed:
        notes.append(f"throttled: {', '.join(slowed)}")
    return Isolation(
        iso_foreign_processes=listed,
        iso_sm_clock_mhz=_read(nvml, "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM),
        iso_max_sm_clock_mhz=_read(nvml, "nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM),
        iso_throttle=throttle,
        iso_temperature_c=_read(nvml, "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
        iso_power_w=power_mw / 1000 if isinstance(power_mw, int | float) else None,
        iso_ok=not notes,
        iso_note="; ".join(notes) or None,
    )


def _load_nvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return pynvml


def snapshot(device: torch.device, own_pids: set[int]) -> Isolation:
    """Whether the job had its device to itself; `own_pids` are this job's processes (every rank),
    which are not foreign."""
    if device.type != "cuda":
        return cpu_snapshot()
    nvml = _load_nvml()
    if nvml is None:
        return Isolation(**host_load(), iso_ok=None, iso_note=NVML_MISSING)
    try:
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        prefixed = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        return dataclasses.replace(gpu_snapshot(nvml, prefixed, own_pids), **host_load())
    except nvml.NVMLError as e:
        return Isolation(**host_load(), iso_ok=None, iso_note=f"NVML failed: {e}; isolation not checked")
    finally:
        nvml.nvmlShutdown()
