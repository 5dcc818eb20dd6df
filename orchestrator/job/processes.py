"""The job's fresh processes (job/side_process.py), after its own measurement:

- `more_processes`: `bench.processes - 1` more paired measurements, so that the speedup's CI covers
  what changes from one process to the next (stats.py);
- `sides_alone`: each side alone on the device, for its memory (CUDA-graph pools included);
- `one_after_the_other`: when the two sides do not fit on the device together, each side's
  timings come from its own process (not interleaved: the result says so).
"""

from __future__ import annotations

from pathlib import Path

import torch

from orchestrator.failures import ParityError
from orchestrator.job import speed
from orchestrator.job.context import JobContext
from orchestrator.job.fresh import run_fresh
from orchestrator.spec import JobSpec

MODULE = "orchestrator.job.side_process"


def default_processes(requested: int | None, device: torch.device, world: int) -> int:
    """`bench.processes`, or 3 on a GPU (where process-to-process spread is real) and 1 on a CPU;
    always 1 for distributed jobs (their ranks already are separate processes)."""
    if world > 1:
        return 1
    return requested if requested is not None else (3 if device.type == "cuda" else 1)


def _side(spec: JobSpec, device: torch.device, cache: Path, role: str, **payload) -> tuple:
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the fresh process shares the device with this one
    request = {"device": str(device), "cache": str(cache), "role": role, **payload}
    return run_fresh(spec, MODULE, f"side-{role}", request)


def more_processes(spec: JobSpec, ctx: JobContext, cache: Path, processes: int) -> None:
    """Paired repetitions in `processes - 1` fresh processes (the job's cache: compiled warm)."""
    for p in range(1, processes):
        got, error = _side(spec, ctx.device, cache, "paired", process=p)
        if got is None:
            ctx.result["processes_error"] = error
            break
        for key, values in got["timings"].items():
            ctx.timings.setdefault(key, []).extend(values)
        merge_isolation(ctx.result, got.get("isolation"))
    speed.summarize(ctx)


def merge_isolation(result: dict, other: dict | None) -> None:
    """A process measured under foreign load or throttling flags the job (the first such note)."""
    if other and other.get("iso_ok") is False and result.get("iso_ok") is not False:
        result.update(other)


def sides_alone(spec: JobSpec, ctx: JobContext, cache: Path, full: bool, prime: bool = False) -> dict:
    """Each side alone in its own process: memory fields (CUDA), and with `full` its timings and a
    sampled output/gradient file for parity. Raises OutOfMemoryError when one side alone does not fit."""
    r, answers = ctx.result, {}
    for role in ("eager", "compiled"):
        save = spec.job_dir / f"sample-{role}.pt" if full else None
        save_to = str(save) if save else None
        got, error = _side(spec, ctx.device, cache, role, full=full, save=save_to, prime=prime)
        if got is None:
            if "OutOfMemoryError" in (error or ""):
                raise torch.OutOfMemoryError(f"the {role} side alone does not fit on the device: {error}")
            raise RuntimeError(f"the {role} side alone failed: {error}")
        answers[role] = got
        merge_isolation(r, got.get("isolation"))
        if "peak_gib" in got:
            r[f"{role}_peak_gib"], r[f"{role}_reserved_gib"] = got["peak_gib"], got["reserved_gib"]
        r[f"{role}_alone_ms"] = sum(got["timings"][f"{role}_ms"]) / len(got["timings"][f"{role}_ms"])
    if r.get("eager_peak_gib"):
        r["memory_ratio"] = r["compiled_peak_gib"] / r["eager_peak_gib"]
        r["memory_basis"] = "each side alone in a fresh process (everything it allocates)"
    return answers


def one_after_the_other(spec: JobSpec, ctx: JobContext, cache: Path, why: str | None) -> None:
    """Both sides measured apart (they do not fit together): timings, memory, sampled parity."""
    from orchestrator.job.parity import check_sampled_parity

    r = ctx.result
    ctx.timings = {}
    answers = sides_alone(spec, ctx, cache, full=True, prime=r.get("compile_s") is None)
    for got in answers.values():
        for key, values in got["timings"].items():
            if key != "process":
                ctx.timings[key] = values
    r["interleaved"] = False
    r["sides_note"] = "sides measured one after the other, each alone" + (
        f" (together: {why.splitlines()[0][:160]})" if why else ""
    )
    if r.get("compile_s") is None and ctx.compiled_mode:  # the main process never got to compile
        first_s = answers["compiled"]["compiled_first_call_s"] - answers["eager"]["eager_first_call_s"]
        r["compile_s"] = max(first_s, 0.0)
    speed.summarize(ctx)
    if ctx.cfg.bench.parity:
        samples = (spec.job_dir / "sample-eager.pt", spec.job_dir / "sample-compiled.pt")
        if not check_sampled_parity(ctx, *samples):
            raise ParityError(r["parity_error"])  # after the timings: a parity failure keeps them
