"""`compile.path=aoti`: the deployment path for inference. `torch.export`, then an AOTInductor
package (`torch._inductor.aoti_compile_and_package`), loaded as a server would load it.

The package is loaded first in a fresh process: its load and first call there are a server's cold
start, and a load that kills the process (a segfault was seen on torch 2.11 + H200) is reported
with its signal instead of taking the job down. Then it is loaded here, and its speed measured
paired against eager like any compiled side.

    python -m orchestrator.job.processes.fresh REQUEST.json   (kind `aoti-load`, the cold start: run_module)
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from orchestrator.core.failures import CompileError
from orchestrator.core.result import Aoti, CompileCost
from orchestrator.job.context import JobContext, autocast, first_line, synchronize
from orchestrator.job.phases import energy
from orchestrator.job.processes.fresh import run_module
from workloads.inputs import call, map_inputs

PACKAGE_FILE = "model.pt2"
INPUTS_FILE = "aoti_inputs.pt"


class Autocast(nn.Module):
    """The model under the job's autocast inside forward, so that export records it."""

    def __init__(self, inner: nn.Module, device: torch.device, dtype: str) -> None:
        super().__init__()
        self.inner, self.device, self.dtype = inner, device, dtype

    def forward(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> object:
        with autocast(self.device, self.dtype):
            return self.inner(*args, **kwargs)


class Package(nn.Module):
    """A loaded AOTInductor package as the compiled side's model (its weights live in the package)."""

    def __init__(self, runner: object) -> None:
        super().__init__()
        self.runner = runner

    def forward(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> object:
        return self.runner(*args, **kwargs)  # type: ignore[operator]


def _load(path: Path, device: torch.device) -> object:
    load = torch._inductor.aoti_load_package
    kwargs: dict[str, Any] = {}
    if device.type == "cuda" and "device_index" in inspect.signature(load).parameters:  # newer torch
        kwargs["device_index"] = device.index if device.index is not None else torch.cuda.current_device()
    return load(str(path), **kwargs)


def link_configs(user_libs: list[str] | None, platform: str, cross_target: str | None) -> dict:
    """On Linux, link the shared libstdc++ into the package's `.so` by name, unless the user set
    `aot_inductor.custom_op_libs` (`compile.options`; `[]` turns this off) or cross-compiles. On the
    H200's image (g++ 13.3, torch 2.11) inductor's own link left libstdc++ out of the `.so`'s NEEDED
    and put a copy of its locale code inside; `std::regex` there crashed every load
    (benchmarks/h200-crashes/). Linked by name, the same package loads, there and here."""
    if user_libs is not None or cross_target or not platform.startswith("linux"):
        return {}
    return {"aot_inductor.custom_op_libs": [":libstdc++.so.6"]}


def load(job_dir: Path, device: torch.device) -> nn.Module:
    """The job's package, loaded again (in a side process: job/processes/side_process.py)."""
    return Package(_load(job_dir / PACKAGE_FILE, device))


def build(ctx: JobContext) -> tuple[nn.Module, Aoti, CompileCost]:
    """Export, package, cold-load in a fresh process, load here: the compiled side and its figures."""
    assert ctx.job_dir is not None, "the package is kept in the job's directory"
    job_dir = ctx.job_dir
    model = Autocast(ctx.wl.model, ctx.device, ctx.cfg.bench.dtype).eval()
    read_j, _ = energy.counter(ctx.device)  # the GPU's energy over export, package and load
    j0 = read_j() if read_j else None
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            inputs = ctx.inputs  # named inputs are exported as keywords
            args, kwargs = ((), inputs) if isinstance(inputs, dict) else (tuple(inputs), None)
            exported = torch.export.export(model, args, kwargs)
    except torch.OutOfMemoryError:
        raise
    except Exception as e:  # the model cannot be exported: a compile error whose message says export
        raise CompileError(f"export: {type(e).__name__}: {first_line(e)}") from e
    export_s = time.perf_counter() - t0
    configs = {"max_autotune": True} if ctx.cfg.compile.mode == "max-autotune-no-cudagraphs" else {}
    aot = torch._inductor.config.aot_inductor
    configs |= link_configs(aot.custom_op_libs, sys.platform, getattr(aot, "cross_target_platform", None))
    t0 = time.perf_counter()
    try:
        path = Path(
            torch._inductor.aoti_compile_and_package(
                exported, package_path=str(job_dir / PACKAGE_FILE), inductor_configs=configs
            )
        )
    except torch.OutOfMemoryError:
        raise
    except Exception as e:
        raise CompileError(f"aoti package: {type(e).__name__}: {first_line(e)}") from e
    package_s = time.perf_counter() - t0
    # Kept in the result even when the load below fails: how long export and packaging took.
    figures = Aoti(export_s, package_s, path.stat().st_size / 2**20, str(path))
    ctx.result.aoti = figures
    cold = cold_start(path, ctx, job_dir)
    t0 = time.perf_counter()
    runner = _load(path, ctx.device)
    figures.aoti_load_warm_s = time.perf_counter() - t0
    figures.aoti_load_s = cold.load_s
    figures.aoti_cold_start_s = cold.load_s + cold.first_call_s
    cost = CompileCost(
        compile_s=export_s + package_s + cold.load_s,  # what a server pays before its first call
        graphs=1,
        compile_energy_j=read_j() - j0 if read_j and j0 is not None else None,
    )
    return Package(runner), figures, cost


@dataclass
class ColdStart:
    """What the `aoti-load` process measured: it sends `asdict`, the parent rebuilds `ColdStart(**d)`."""

    load_s: float  # loading the package in a process that has loaded nothing
    first_call_s: float  # its first call


def cold_start(path: Path, ctx: JobContext, job_dir: Path) -> ColdStart:
    """Load the package and call it once in a fresh process; a crash there is a compile error."""
    inputs = job_dir / INPUTS_FILE
    torch.save(map_inputs(ctx.inputs, lambda t: t.cpu()), inputs)
    request = {"package": str(path), "device": str(ctx.device), "inputs": str(inputs)}
    try:
        got, why = run_module(job_dir, ctx.cfg.bench.timeout_s, "aoti-load", "aoti-load", request)
    finally:
        inputs.unlink(missing_ok=True)
    if got is None:
        raise CompileError(f"aoti load of {path.name}: {why}")
    return ColdStart(**got)


def answer(spec: None, req: dict) -> dict:
    """job/processes/fresh.py's entry for kind `aoti-load`: load the package, call it once (no spec: the
    package and the inputs are all it needs)."""
    device = torch.device(req["device"])
    inputs = map_inputs(torch.load(req["inputs"]), lambda t: t.to(device))
    t0 = time.perf_counter()
    runner = _load(Path(req["package"]), device)
    synchronize(device)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        call(runner, inputs)  # type: ignore[arg-type]
    synchronize(device)
    return dataclasses.asdict(ColdStart(load_s, time.perf_counter() - t0))
