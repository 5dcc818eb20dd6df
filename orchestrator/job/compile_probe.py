"""Compile again in a fresh process: `warm` against the cache the job filled (what a restart on the
same node pays), `portable` from an empty cache given the job's saved artifacts (what a second node
of a cluster pays when handed them). An in-process `torch._dynamo.reset()` would keep in-memory code
caches and undercount, so each probe is its own interpreter.

Run through job/fresh.py (kind `probe`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from orchestrator.config.spec import JobSpec
from orchestrator.job.compile_cost import clear_compilation_metrics, compilation_metrics, summarize
from orchestrator.job.context import JobContext, job_model, synchronize
from orchestrator.job.fresh import run_fresh
from orchestrator.job.primer import prime
from orchestrator.job.result import Probe


def first_compile(ctx: JobContext, eager: torch.nn.Module, compiled: torch.nn.Module) -> dict:
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
    return {
        "compile_s": max(first_s - eager_s, 0.0),
        "cache_hits": metrics.compile_cache_hits,
        "frames": metrics.compile_frames,
        "pid": os.getpid(),
    }


def probe(spec: JobSpec, device: torch.device, cache: Path, artifacts: Path | None) -> dict:
    """In this (fresh) process: build the job's model, compile it once, time that first call."""
    from orchestrator.job.parallelize import prepare

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
    out["compile_s"] += load_s or 0.0
    return {**out, "load_s": load_s}


def as_probe(got: dict) -> Probe:
    """A probe's figures, from a probe process's answer or a paired process's folded-in probe."""
    return Probe(got["compile_s"], got["load_s"], got["cache_hits"], got["frames"], got["pid"])


def run_probe(spec: JobSpec, kind: str, device: torch.device, cache: Path, artifacts: Path | None) -> Probe:
    """Start one probe process and return its figures (or its error)."""
    payload = {"device": str(device), "cache": str(cache), "artifacts": str(artifacts) if artifacts else None}
    got, error = run_fresh(spec, "probe", f"probe-{kind}", payload)
    if got is None:
        return Probe(error=error)
    return as_probe(got)


def answer(spec: JobSpec, req: dict) -> dict:
    """job/fresh.py's entry for kind `probe`."""
    artifacts = Path(req["artifacts"]) if req["artifacts"] else None
    return probe(spec, torch.device(req["device"]), Path(req["cache"]), artifacts)
