"""Compile again in a fresh process: `warm` against the cache the job filled (what a restart on the
same node pays), `portable` from an empty cache given the job's saved artifacts (what a second node
of a cluster pays when handed them). An in-process `torch._dynamo.reset()` would keep in-memory code
caches and undercount, so each probe is its own interpreter.

    python -m orchestrator.job.compile_probe REQUEST.json     (writes the answer beside it)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

from orchestrator.job.compile_cost import (
    clear_compilation_metrics,
    compilation_metrics,
    compile_settings,
    prime,
    summarize,
)
from orchestrator.job.context import JobContext, synchronize
from orchestrator.job.fresh import read_request, run_fresh, write_answer
from orchestrator.spec import JobSpec

# Probe figure -> the suffix of its result field, compile_<kind>_<suffix>.
PROBE_KEYS = {
    "compile_s": "s",
    "load_s": "load_s",
    "compile_cache_hits": "cache_hits",
    "compile_frames": "frames",
    "pid": "pid",
}


def probe(spec: JobSpec, device: torch.device, cache: Path, artifacts: Path | None) -> dict:
    """In this (fresh) process: build the job's model, compile it once, time that first call."""
    from orchestrator.job.parallelize import prepare
    from workloads import build_workload

    cfg = spec.cfg
    if cfg.workload.path and cfg.workload.path not in sys.path:
        sys.path.insert(0, cfg.workload.path)
    prime(device)
    out: dict = {"load_s": None}
    with compile_settings(spec.config["compile"], len(cfg.workload.shapes), cache):
        if artifacts is not None:
            t0 = time.perf_counter()
            torch.compiler.load_cache_artifacts(artifacts.read_bytes())
            out["load_s"] = time.perf_counter() - t0
        wl = build_workload(cfg.workload, cfg.bench.task, device, cfg.bench.seed)
        ctx = JobContext(cfg, wl, device)
        compiled = prepare(wl, "none", cfg.compile, device, cfg.bench.dtype)
        ctx.forward_backward(wl.model, ctx.inputs)  # lazy init, allocator warm
        eager_s = ctx.timed(lambda: ctx.forward_backward(wl.model, ctx.inputs))
        clear_compilation_metrics()
        t0 = time.perf_counter()
        ctx.forward_backward(compiled, ctx.inputs)
        synchronize(device)
        first_s = time.perf_counter() - t0
        out.update(summarize(compilation_metrics()))
    out["compile_s"] = max(first_s - eager_s, 0.0) + (out["load_s"] or 0.0)
    out["pid"] = os.getpid()
    return out


def run_probe(spec: JobSpec, kind: str, device: torch.device, cache: Path, artifacts: Path | None) -> dict:
    """Start one probe process and return its figures as `compile_<kind>_...` fields (or its error)."""
    payload = {"device": str(device), "cache": str(cache), "artifacts": str(artifacts) if artifacts else None}
    got, error = run_fresh(spec, "orchestrator.job.compile_probe", f"probe-{kind}", payload)
    if got is None:
        return {f"compile_{kind}_error": error}
    return {f"compile_{kind}_{suffix}": got.get(key) for key, suffix in PROBE_KEYS.items()}


def main(request_path: str) -> None:
    spec, req = read_request(request_path)
    device = torch.device(req["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    artifacts = Path(req["artifacts"]) if req["artifacts"] else None
    write_answer(req, probe(spec, device, Path(req["cache"]), artifacts))


if __name__ == "__main__":
    main(sys.argv[1])
