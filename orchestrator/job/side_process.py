"""One part of a job's measurement in a fresh process (job/fresh.py): `paired`, both sides again,
interleaved, for the CI across processes (the first such process primes and measures the warm
compile probe first, job/compile_probe.py, instead of a process of its own); or one side `eager` /
`compiled` alone on the device, for its memory (everything it allocates: weights, gradients,
optimizer state, activations, CUDA-graph pools) and, when the two sides do not fit together, its
timings.

Run through job/fresh.py (kind `side`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

import torch

from orchestrator.config.spec import JobSpec
from orchestrator.job.compared import flat_tensors, gradients
from orchestrator.job.compile_probe import first_compile
from orchestrator.job.context import Side, job_model, synchronize
from orchestrator.job.memory import GIB
from orchestrator.job.primer import prime

ROLES = ("paired", "eager", "compiled")
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


def measure(spec: JobSpec, device: torch.device, cache: Path, role: str, req: dict) -> dict:
    """Build the job's model here, make the side(s) of `role`, time them; peak memory since start."""
    from orchestrator.job import speed
    from orchestrator.job.parallelize import prepare

    cfg = spec.cfg
    if not req.get("full", True):  # memory only: a few steps are enough to reach the peak
        cfg = dataclasses.replace(cfg, bench=dataclasses.replace(cfg.bench, warmup=1, repeats=2))
    if req.get("prime"):
        prime(device, cfg.bench.task == "train", cfg.compile.path == "aoti")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    out: dict = {"pid": os.getpid()}
    with job_model(cfg, device, cache) as ctx:
        wl = ctx.wl
        sides = {}
        if role in ("paired", "eager"):
            sides["eager"] = Side(wl.model)
        if role in ("paired", "compiled"):
            compile_cfg = cfg.compile if ctx.compiled_mode else None
            if cfg.compile.path == "aoti":  # the package the job built
                from orchestrator.job import aoti

                model = aoti.load(spec.job_dir, device)
            else:
                model = prepare(wl, "none", compile_cfg, device, cfg.bench.dtype, copy_model=role == "paired")
            sides["compiled"] = Side(model, compiled=True)
        called: set[str] = set()  # sides whose first calls the folded probe made
        if req.get("probe"):  # the warm compile probe: this primed process's first compile
            try:
                probe = first_compile(ctx, sides["eager"].model, sides["compiled"].model)
                out["probe"], called = {**probe, "load_s": None}, {"eager", "compiled"}
            except Exception as e:  # the probe's failure is its figure's; the paired timings go on
                out["probe"] = {"error": f"{type(e).__name__}: {e}"[:500]}
        for name, side in sides.items():
            if name in called:  # as after a first call: its optimizer step, its gradients cleared
                ctx.end_first_call(side)
                continue
            t0 = time.perf_counter()
            first = ctx.forward_backward(side.model, ctx.inputs)  # compiles (the job's cache) here
            synchronize(device)
            out[f"{name}_first_call_s"] = time.perf_counter() - t0
            if req.get("save"):
                save_sample(Path(req["save"]), side, first, ctx.train)
            del first  # not kept alive through the timed steps (it would add to their peak)
            ctx.end_first_call(side)
        conditions, _ = speed.measure_speed(ctx, sides, req.get("process", 0))
        out["timings"] = ctx.timings
        out["isolation"] = dataclasses.asdict(conditions)
    if device.type == "cuda":
        synchronize(device)
        out["peak_gib"] = torch.cuda.max_memory_allocated(device) / GIB
        out["reserved_gib"] = torch.cuda.max_memory_reserved(device) / GIB
    return out


def answer(spec: JobSpec, req: dict) -> dict:
    """job/fresh.py's entry for kind `side`."""
    return measure(spec, torch.device(req["device"]), Path(req["cache"]), req["role"], req)
