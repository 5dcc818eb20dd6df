"""One part of a job's measurement in a fresh process (job/processes/fresh.py): `paired`, both sides again,
interleaved, for the CI across processes (the first such process primes and measures the warm
compile probe first, job/processes/compile_probe.py, instead of a process of its own); or one side `eager` /
`compiled` alone on the device, for its memory (everything it allocates: weights, gradients,
optimizer state, activations, CUDA-graph pools) and, when the two sides do not fit together, its
timings. A `paired` process may measure one side alone first (`alone_first`), before the other
side exists: that side's memory without a process of its own.

Run through job/processes/fresh.py (kind `side`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from orchestrator.config.spec import JobSpec
from orchestrator.core.result import Isolation, Probe
from orchestrator.job.context import JobContext, Side, job_model, synchronize
from orchestrator.job.phases.compared import flat_tensors, gradients
from orchestrator.job.phases.memory import GIB
from orchestrator.job.processes.compile_probe import first_compile
from orchestrator.job.setup.primer import prime

ROLES = ("paired", "eager", "compiled")


@dataclass
class SideAnswer:
    """What a side process measured. It sends `to_dict()` as its answer (job/processes/fresh.py); the parent
    rebuilds it with `from_dict()`."""

    pid: int | None = None
    timings: dict[str, list] = field(default_factory=dict)
    """`<side>_ms` per repetition, `<side>_step_ms` per step, `process` (speed.measure_speed)."""
    isolation: Isolation | None = None
    """Whether the process was measured alone (job/phases/isolation.py)."""
    peak_gib: float | None = None  # the process's peak memory (CUDA), allocated
    reserved_gib: float | None = None  # and reserved (a CUDA-graph pool is reserved only)
    first_call_s: dict[str, float] = field(default_factory=dict)
    """Each side's first call, by side name (a compiled one compiles, from the job's cache)."""
    probe: Probe | None = None
    """The warm compile probe folded into a paired process (its first compile)."""
    alone: SideAnswer | None = None
    """A paired process's side measured alone before the other side was made (`alone_first`)."""
    error: str | None = None
    """Why the side alone failed (then measured in a process of its own)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SideAnswer:
        parts = {
            "isolation": Isolation(**data["isolation"]) if data.get("isolation") else None,
            "probe": Probe(**data["probe"]) if data.get("probe") else None,
            "alone": cls.from_dict(data["alone"]) if data.get("alone") else None,
        }
        return cls(**{**data, **parts})


SAMPLE_ELEMENTS = 4_000_000  # per side, for parity of sides run apart: a strided sample, same indices


def sampled(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Every n-th element of each tensor, n chosen so the total stays under SAMPLE_ELEMENTS."""
    total = sum(t.numel() for t in tensors)
    stride = max(1, math.ceil(total / SAMPLE_ELEMENTS))
    return [t.detach().flatten()[::stride].float().cpu() for t in tensors]


def save_sample(path: Path, side: Side, first: object, train: bool) -> None:
    """The first call's sampled outputs and gradients, for parity of sides run apart. A function of
    its own, so that no reference to the full gradients outlives it (it would add to the peak)."""
    grads = gradients(side.model) if train else {}
    grad_sample = dict(zip(grads, sampled(list(grads.values())), strict=True))
    torch.save({"out": sampled(flat_tensors(first)), "grads": grad_sample}, path)


def _few_steps(ctx: JobContext) -> JobContext:
    """The context for a side measured alone for its memory: a few steps reach the peak, into
    timings of their own (the paired timings that follow are the process's figures)."""
    few = copy.copy(ctx)
    few.cfg = dataclasses.replace(ctx.cfg, bench=dataclasses.replace(ctx.cfg.bench, warmup=1, repeats=2))
    few.timings = {}
    return few


def _peaks(device: torch.device) -> tuple[float | None, float | None]:
    """Peak memory since the process's reset: allocated, and reserved (a graph pool is reserved only)."""
    if device.type != "cuda":
        return None, None
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) / GIB, torch.cuda.max_memory_reserved(device) / GIB


def _make_side(spec: JobSpec, ctx: JobContext, name: str, own_model: bool, rebuild: bool) -> Side:
    """Side `name` of this process. `own_model`: the compiled side compiles the built model itself
    (no eager side shares it); `rebuild`: the eager side gets a model built again (same seed, same
    weights), the built one being compiled already (in place, for compile.scope=blocks)."""
    from orchestrator.job.setup.parallelize import prepare
    from workloads import build_workload

    cfg, wl = ctx.cfg, ctx.wl
    if name == "eager":
        if not rebuild:
            return Side(wl.model)
        return Side(build_workload(cfg.workload, cfg.bench.task, ctx.device, cfg.bench.seed).model)
    if cfg.compile.path == "aoti":  # the package the job built
        from orchestrator.job.phases import aoti

        return Side(aoti.load(spec.job_dir, ctx.device), compiled=True)
    compile_cfg = cfg.compile if ctx.compiled_mode else None
    model = prepare(wl, "none", compile_cfg, ctx.device, cfg.bench.dtype, copy_model=not own_model)
    return Side(model, compiled=True)


def measure_sides(spec: JobSpec, device: torch.device, cache: Path, role: str, req: dict) -> SideAnswer:
    """Build the job's model here, make the side(s) of `role`, time them; peak memory since start.
    A paired process with `alone_first` makes that side first and measures it alone (its memory,
    a few steps) before the other side exists."""
    from orchestrator.job.phases import speed

    cfg = spec.cfg
    if not req.get("full", True):  # memory only: a few steps are enough to reach the peak
        cfg = dataclasses.replace(cfg, bench=dataclasses.replace(cfg.bench, warmup=1, repeats=2))
    if req.get("prime"):
        prime(device, cfg.bench.task == "train", cfg.compile.path == "aoti")
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the primer's blocks are not the side's reserved memory
        torch.cuda.reset_peak_memory_stats(device)
    out = SideAnswer(pid=os.getpid())
    first_alone = req.get("alone_first")
    names = [n for n in ("eager", "compiled") if role in ("paired", n)]
    if first_alone:  # made first, alone
        names = [first_alone, *(n for n in names if n != first_alone)]
    with job_model(cfg, device, cache) as ctx:
        sides: dict[str, Side] = {}
        ready: set[str] = set()  # sides past their first call (measured alone)
        for name in names:
            alone = role != "paired" or name == first_alone
            # the compiled side took the built model (an AOTInductor package leaves it to the eager side)
            rebuild = first_alone == "compiled" and cfg.compile.path == "jit"
            sides[name] = _make_side(spec, ctx, name, own_model=alone, rebuild=rebuild)
            if role == "paired" and name == first_alone:
                out.alone = _alone(ctx, sides[name], name, req, out)
                if out.alone.error is None:
                    ready.add(name)
        sides = {n: sides[n] for n in ("eager", "compiled") if n in sides}  # measure_speed's order
        called: set[str] = set()  # sides whose first calls the folded probe made
        if req.get("probe"):  # the warm compile probe: this primed process's first compile
            try:
                out.probe = first_compile(ctx, sides["eager"].model, sides["compiled"].model)
                called = {"eager", "compiled"}
            except Exception as e:  # the probe's failure is its figure's; the paired timings go on
                out.probe = Probe(error=f"{type(e).__name__}: {e}"[:500])
        for name, side in sides.items():
            if name in ready:  # its optimizer made; the probe's gradients cleared, as after a step
                side.model.zero_grad(set_to_none=True)
                continue
            if name in called:  # as after a first call: its optimizer step, its gradients cleared
                ctx.end_first_call(side)
                continue
            _first_call(ctx, side, name, req, out)
        conditions, _ = speed.measure_speed(ctx, sides, req.get("process", 0))
        out.timings = ctx.timings
        out.isolation = conditions
    out.peak_gib, out.reserved_gib = _peaks(device)
    return out


def _alone(ctx: JobContext, side: Side, name: str, req: dict, out: SideAnswer) -> SideAnswer:
    """A paired process's side measured alone, before the other side is made: its first call, a
    few steps, the process's peaks so far. A failure here is the side alone's (its memory is then
    measured in a process of its own: processes.sides_alone), not the paired timings'."""
    from orchestrator.job.phases import speed

    few = _few_steps(ctx)
    try:
        _first_call(few, side, name, req, out)
        conditions, _ = speed.measure_speed(few, {name: side})
    except Exception as e:  # noqa: BLE001 (recorded: the caller measures that side alone again)
        side.model.zero_grad(set_to_none=True)
        return SideAnswer(error=f"{type(e).__name__}: {e}"[:500])
    side.model.zero_grad(set_to_none=True)  # a copy made next starts without them
    peak, reserved = _peaks(ctx.device)
    return SideAnswer(timings=few.timings, isolation=conditions, peak_gib=peak, reserved_gib=reserved)


def _first_call(ctx: JobContext, side: Side, name: str, req: dict, out: SideAnswer) -> None:
    """A side's first call (a compiled one compiles, from the job's cache), timed; its sample saved
    where asked; then its optimizer step."""
    t0 = time.perf_counter()
    first = ctx.forward_backward(side.model, ctx.inputs)
    synchronize(ctx.device)
    out.first_call_s[name] = time.perf_counter() - t0
    if req.get("save"):
        save_sample(Path(req["save"]), side, first, ctx.train)
    del first  # not kept alive through the timed steps (it would add to their peak)
    ctx.end_first_call(side)


def answer(spec: JobSpec, req: dict) -> dict:
    """job/processes/fresh.py's entry for kind `side`: the SideAnswer, as the dict the parent rebuilds."""
    return measure_sides(spec, torch.device(req["device"]), Path(req["cache"]), req["role"], req).to_dict()
