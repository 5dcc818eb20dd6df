"""Compile again in a fresh process: `warm` against the cache the job filled (what a restart on the
same node pays), `portable` from an empty cache given the job's saved artifacts (what a second node
of a cluster pays when handed them). An in-process `torch._dynamo.reset()` would keep in-memory code
caches and undercount, so each probe is its own interpreter.

Run through job/processes/fresh.py (kind `probe`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

import torch

from orchestrator.config.spec import JobSpec
from orchestrator.core.files import private_cache_prefix
from orchestrator.core.numbers import payback_steps, saved_per_step_s
from orchestrator.core.result import JobResult, Probe, Probes
from orchestrator.job.context import JobContext, job_model, synchronize
from orchestrator.job.phases.compile_cost import (
    ARTIFACTS_FILE,
    clear_compilation_metrics,
    compilation_metrics,
    summarize,
)
from orchestrator.job.processes.fresh import run_fresh
from orchestrator.job.setup.compile_settings import fresh_dir
from orchestrator.job.setup.primer import prime


def first_compile(ctx: JobContext, eager: torch.nn.Module, compiled: torch.nn.Module) -> Probe:
    """The first call of `compiled`, which compiles, less an eager call: the probe's figure, in a
    fresh process that has compiled nothing yet (its compile cache decides warm or portable)."""
    ctx.forward_backward(eager, ctx.inputs)  # lazy init, allocator warm
    eager_s = ctx.timed(lambda: ctx.forward_backward(eager, ctx.inputs))
    clear_compilation_metrics()
    t0 = time.perf_counter()
    ctx.forward_backward(compiled, ctx.inputs)
    synchronize(ctx.device)
    first_s = time.perf_counter() - t0
    metrics = summarize(compilation_metrics())
    return Probe(
        s=max(first_s - eager_s, 0.0),
        cache_hits=metrics.compile_cache_hits,
        frames=metrics.compile_frames,
        pid=os.getpid(),
    )


def probe(spec: JobSpec, device: torch.device, cache: Path, artifacts: Path | None) -> Probe:
    """In this (fresh) process: build the job's model, compile it once, time that first call."""
    from orchestrator.job.setup.parallelize import prepare

    cfg = spec.cfg
    prime(device, cfg.bench.task == "train", cfg.compile.path == "aoti")
    load_s = None
    with job_model(cfg, device, cache) as ctx:
        wl = ctx.wl
        if artifacts is not None:  # into the probe's empty cache, before anything compiles
            t0 = time.perf_counter()
            torch.compiler.load_cache_artifacts(artifacts.read_bytes())
            load_s = time.perf_counter() - t0
        compiled = prepare(wl, "none", cfg.compile, device, cfg.bench.dtype)
        out = first_compile(ctx, wl.model, compiled)
    out.s = (out.s or 0.0) + (load_s or 0.0)
    out.load_s = load_s
    return out


def run_probe(spec: JobSpec, kind: str, device: torch.device, cache: Path, artifacts: Path | None) -> Probe:
    """Start one probe process and return its figures (or its error)."""
    payload = {"device": str(device), "cache": str(cache), "artifacts": str(artifacts) if artifacts else None}
    got, error = run_fresh(spec, "probe", f"probe-{kind}", payload)
    return Probe(**got) if got is not None else Probe(error=error)  # sent as asdict(Probe)


def compile_probes(spec: JobSpec, device: torch.device, cache: Path, result: JobResult) -> Probes:
    """Warm and portable compile, each in a fresh process (the warm one already measured by the first
    paired process where the job has more, apart.py); the steps that pay the warm one back."""
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the probe shares the device
    folded = result.probes.compile_warm if result.probes is not None else None
    if folded is None or folded.s is None:
        folded = run_probe(spec, "warm", device, cache, None)
    probes = Probes(compile_warm=folded)
    artifacts = spec.job_dir / ARTIFACTS_FILE
    if artifacts.exists():
        empty = fresh_dir(spec.job_dir, private_cache_prefix(os.getpid()) + "portable-")
        probes.compile_portable = run_probe(spec, "portable", device, empty, artifacts)
        shutil.rmtree(empty, ignore_errors=True)
        artifacts.unlink()
    speed = result.speed
    if speed is not None:
        saved = saved_per_step_s(speed.eager.ms, speed.speedup)
        probes.break_even_warm_steps = payback_steps(probes.compile_warm.s, saved)
    return probes


def answer(spec: JobSpec, req: dict) -> dict:
    """fresh.py's entry for kind `probe`: the Probe, as a dict the parent rebuilds (`Probe(**d)`)."""
    artifacts = Path(req["artifacts"]) if req["artifacts"] else None
    return dataclasses.asdict(probe(spec, torch.device(req["device"]), Path(req["cache"]), artifacts))
