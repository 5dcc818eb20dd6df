"""The job's fresh processes (job/processes/side_process.py), after its own measurement:

- `more_processes`: `bench.processes - 1` more paired measurements, so that the speedup's CI covers
  what changes from one process to the next (core/stats.py); the first also measures the warm compile
  probe where the job has probes;
- `sides_alone`: each side alone on the device, for its memory (CUDA-graph pools included): in a
  paired process, before the other side is made, where there is one; else in a process of its own;
- `one_after_the_other`: when the two sides do not fit on the device together, each side's
  timings come from its own process (not interleaved: the result says so).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch

from orchestrator.config.spec import JobSpec
from orchestrator.core.result import CompileCost, Isolation, Memory, Probe, Probes
from orchestrator.job.context import JobContext
from orchestrator.job.phases import parity, speed
from orchestrator.job.phases.parity import check_sampled_parity
from orchestrator.job.processes.fresh import run_fresh
from orchestrator.job.processes.side_process import SideAnswer


def _side(
    spec: JobSpec, device: torch.device, cache: Path, role: str, **payload: Any
) -> tuple[SideAnswer | None, str | None]:
    """A side process's answer, rebuilt typed (side_process.SideAnswer), or None and its error."""
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the fresh process shares the device with this one
    request = {"device": str(device), "cache": str(cache), "role": role, **payload}
    got, error = run_fresh(spec, "side", f"side-{role}", request)
    return (SideAnswer.from_dict(got) if got is not None else None), error


def more_processes(
    spec: JobSpec, ctx: JobContext, cache: Path, processes: int, warm_probe: bool, memory: bool
) -> dict[str, SideAnswer]:
    """Paired repetitions in `processes - 1` fresh processes (the job's cache: compiled warm). With
    `warm_probe`, the first of them primes and measures the warm compile probe first (its first
    compiled call is what a probe process of its own would time): one process fewer. With `memory`,
    the first measures the eager side alone before it makes the compiled one, and the second the
    compiled side alone before the eager one (two processes fewer where `processes` is 3 or more).
    Returns what those sides alone read (for sides_alone), by role; a side whose part alone failed is
    left out (sides_alone measures it in a process of its own), the paired timings kept."""
    r, alone = ctx.result, {}
    for p in range(1, processes):
        fold = warm_probe and p == 1
        first = ("eager", "compiled")[p - 1] if memory and p <= 2 else None
        got, error = _side(
            spec, ctx.device, cache, "paired", process=p, probe=fold, prime=fold, alone_first=first
        )
        if got is None:
            r.outcome.processes_error = error
            break
        for key, values in got.timings.items():
            ctx.timings.setdefault(key, []).extend(values)
        r.isolation = flagged(r.isolation, got.isolation)
        if fold:
            r.probes = Probes(compile_warm=got.probe or Probe(error="no probe in the answer"))
        if first and got.alone is not None and got.alone.error is None:  # else alone in its own process
            alone[first] = got.alone
    r.speed = speed.summarize(ctx)
    return alone


def flagged(mine: Isolation | None, other: Isolation | None) -> Isolation | None:
    """A process measured under foreign load or throttling flags the job (the first such note)."""
    if other is None:
        return mine
    return other if other.iso_ok is False and (mine is None or mine.iso_ok is not False) else mine


def sides_alone(
    spec: JobSpec,
    ctx: JobContext,
    cache: Path,
    full: bool,
    prime: bool = False,
    measured: dict[str, SideAnswer] | None = None,
) -> dict[str, SideAnswer]:
    """Each side alone in its own process: its memory (CUDA) and step time, and with `full` its
    timings and a sampled output/gradient file for parity; a side already `measured` alone (by
    role, in a paired process: more_processes) is not measured again. Sets the job's memory
    section; raises OutOfMemoryError when one side alone does not fit."""
    r, answers, memory = ctx.result, dict(measured or {}), Memory()
    for role, into in (("eager", memory.eager), ("compiled", memory.compiled)):
        if role not in answers:
            save = spec.job_dir / f"sample-{role}.pt" if full else None
            save_to = str(save) if save else None
            got, error = _side(spec, ctx.device, cache, role, full=full, save=save_to, prime=prime)
            if got is None:
                if "OutOfMemoryError" in (error or ""):
                    raise torch.OutOfMemoryError(f"the {role} side alone does not fit on the device: {error}")
                raise RuntimeError(f"the {role} side alone failed: {error}")
            answers[role] = got
        got = answers[role]
        r.isolation = flagged(r.isolation, got.isolation)
        into.peak_gib, into.reserved_gib = got.peak_gib, got.reserved_gib
        into.alone_ms = statistics.mean(got.timings[f"{role}_ms"])
    if memory.eager.peak_gib:
        memory.memory_ratio = memory.compiled.peak_gib / memory.eager.peak_gib  # type: ignore[operator]
        memory.memory_basis = "each side alone in a fresh process (everything it allocates)"
    r.memory = memory
    return answers


def one_after_the_other(spec: JobSpec, ctx: JobContext, cache: Path, why: str | None) -> None:
    """Both sides measured apart (they do not fit together): timings, memory, sampled parity."""
    r = ctx.result
    ctx.timings = {}
    compiled_here = r.compile is not None  # else the main process never got to compile
    answers = sides_alone(spec, ctx, cache, full=True, prime=not compiled_here)
    for got in answers.values():
        for key, values in got.timings.items():
            if key != "process":
                ctx.timings[key] = values
    if not compiled_here:
        first_s = answers["compiled"].first_call_s["compiled"] - answers["eager"].first_call_s["eager"]
        r.compile = CompileCost(compile_s=max(first_s, 0.0) if ctx.compiled_mode else 0.0)
    note = "sides measured one after the other, each alone" + (
        f" (together: {why.splitlines()[0][:160]})" if why else ""
    )
    r.speed = speed.summarize(ctx, interleaved=False, sides_note=note)
    samples = (spec.job_dir / "sample-eager.pt", spec.job_dir / "sample-compiled.pt")
    if ctx.cfg.bench.parity and not (ctx.random_ops and r.parity):  # random ops: checked in-process
        r.parity = check_sampled_parity(ctx, *samples)
    for sample in samples:
        sample.unlink(missing_ok=True)
    parity.raise_if_failed(r.parity)  # after the speed figures: a failure keeps its timings
