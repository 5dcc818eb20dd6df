"""Energy on GPU: joules per step of each side from NVML's cumulative energy counter
(`nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver loaded, nvidia-ml-py), read
around the same timed blocks as the step times; and the energy break-even of compiling.

The counter is the whole board's (all processes on that GPU), refreshed by the driver every few
tens of milliseconds: per-step figures need timed blocks well above that (steps_per_repeat x step
time), and a GPU to itself. Where NVML is absent (a CPU, no nvidia-ml-py) every figure is null and
`energy_note` says why.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

from orchestrator.core.numbers import payback_steps
from orchestrator.core.result import Energy

Counter = Callable[[], float]  # cumulative joules


@functools.cache
def _nvml_counter(device: str) -> tuple[Counter | None, str | None]:
    dev = torch.device(device)
    if dev.type != "cuda":
        return None, "energy: not measured on CPU (NVML counts GPU energy only)"
    try:
        import pynvml
    except ImportError:
        return None, "energy: not measured (nvidia-ml-py is not installed)"
    try:
        pynvml.nvmlInit()
        props: Any = torch.cuda.get_device_properties(dev)  # pci_* fields: newer than some torch's stubs
        bus = getattr(props, "pci_bus_id", None)
        if bus is None:  # an older torch: NVML's order is CUDA's when CUDA_VISIBLE_DEVICES is unset
            handle = pynvml.nvmlDeviceGetHandleByIndex(dev.index or 0)
        else:
            pci = f"{props.pci_domain_id:08X}:{bus:02X}:{props.pci_device_id:02X}.0"
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except pynvml.NVMLError as e:
        return None, f"energy: not measured (NVML: {e})"
    return (lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0), None


def counter(device: torch.device) -> tuple[Counter | None, str | None]:
    """The device's cumulative-joules counter, or None and the reason."""
    return _nvml_counter(str(device))


class EnergyMeter:
    """Joules of each side, summed over its timed blocks, from a cumulative counter."""

    def __init__(self, read: Counter | None, note: str | None = None) -> None:
        self.read, self.note = read, note
        self.joules = {"eager": 0.0, "compiled": 0.0}
        self.steps = {"eager": 0, "compiled": 0}

    @classmethod
    def for_device(cls, device: torch.device) -> EnergyMeter:
        return cls(*counter(device))

    @contextlib.contextmanager
    def side(self, name: str, steps: int) -> Iterator[None]:
        """Count the energy of `steps` steps of side `name` (the block must end synchronized)."""
        if self.read is None:
            yield
            return
        start = self.read()
        yield
        self.joules[name] += self.read() - start
        self.steps[name] += steps

    def summary(self, compile_energy_j: float | None) -> Energy:
        """Joules per step per side, their ratio, and compile energy over energy saved per step."""
        if self.read is None:
            return Energy(energy_note=self.note)
        per_step = {k: self.joules[k] / self.steps[k] if self.steps[k] else None for k in self.joules}
        e, c = per_step["eager"], per_step["compiled"]
        saved = e - c if e is not None and c is not None else None
        return Energy(
            eager_j_per_step=e,
            compiled_j_per_step=c,
            energy_ratio=c / e if e and c is not None else None,
            energy_break_even_steps=payback_steps(compile_energy_j, saved),
        )
