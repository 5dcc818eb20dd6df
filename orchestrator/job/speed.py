"""Speed: FLOPs of a step, warm-up, then R repetitions of k-step blocks alternating which side goes
first; each step timed on its own too (percentiles). `summarize` turns the timings of every process
(the job's own and `bench.processes - 1` fresh ones) into the speedup, its CI, throughput and MFU."""

from __future__ import annotations

import os
import statistics

import torch

from orchestrator.job import isolation, peaks
from orchestrator.job.context import JobContext, Side, synchronize
from orchestrator.job.energy import EnergyMeter
from orchestrator.stats import median_ratio_ci, percentiles, unpaired_ratio_ci


def count_flops(ctx: JobContext) -> int | None:
    """FLOPs of one forward(+backward) step, counted by torch's FlopCounterMode on the unwrapped model.
    It is also the first eager step: a model that fails eagerly is a crash, not a compile error."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    before = rng_states(ctx.device)
    try:
        with counter:
            ctx.forward_backward(ctx.wl.model, ctx.inputs)
    finally:
        ctx.wl.model.zero_grad(set_to_none=True)
    # Random ops (dropout...) advance the generator; ops that merely could (attention with
    # dropout_p=0) do not: the state says which, whatever the op is called.
    ctx.result["random_ops"] = not all(map(torch.equal, before, rng_states(ctx.device)))
    return int(counter.get_total_flops()) or None


def rng_states(device: torch.device) -> list[torch.Tensor]:
    """The CPU generator's state, and the device's where it has its own."""
    states = [torch.get_rng_state()]
    if device.type == "cuda":
        states.append(torch.cuda.get_rng_state(device))
    return states


def measure_speed(ctx: JobContext, sides: dict[str, Side], process: int = 0) -> None:
    """Warm-up, then R repetitions of k-step blocks per side (alternating which goes first), into
    ctx.timings: `<side>_ms` (per step, block mean), `<side>_step_ms` (each step), `process`."""
    b, t = ctx.cfg.bench, ctx.timings
    for _ in range(b.warmup + 1):
        for side in sides.values():
            ctx.step(side)
    synchronize(ctx.device)
    # Who else is on the device, clocks, throttling, host load: the conditions of these timings.
    own_pids = {int(p) for p in ctx.all_gather(os.getpid())} | {os.getppid()}
    ctx.result.update(isolation.snapshot(ctx.device, own_pids))
    names = list(sides)
    meter = EnergyMeter.for_device(ctx.device)  # joules of each side's timed blocks (job/energy.py)
    for i in range(b.repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            with meter.side(name, b.steps_per_repeat):
                steps = ctx.timed_steps(lambda s=sides[name]: ctx.step(s), b.steps_per_repeat)
            t.setdefault(f"{name}_ms", []).append(sum(steps) / len(steps) * 1000)
            t.setdefault(f"{name}_step_ms", []).extend(s * 1000 for s in steps)
        t.setdefault("process", []).append(process)
    if len(sides) == 2:
        ctx.result.update(meter.summary(ctx.result.get("compile_energy_j")))


def summarize(ctx: JobContext) -> None:
    """Speedup with its CI (paired, or unpaired when the sides ran one after the other), step-time
    medians and percentiles, throughput summed over ranks, MFU, break-even steps."""
    b, r, t = ctx.cfg.bench, ctx.result, ctx.timings
    e_ms, c_ms = t["eager_ms"], t["compiled_ms"]
    if r.get("interleaved", True):
        speedup, low, high = median_ratio_ci(e_ms, c_ms, b.bootstrap, b.seed, t.get("process"))
    else:
        speedup, low, high = unpaired_ratio_ci(e_ms, c_ms, b.bootstrap, b.seed)
    n_proc = len(set(t.get("process") or [0]))
    eager_med, comp_med = statistics.median(e_ms), statistics.median(c_ms)
    r.update(
        eager_ms=eager_med,
        compiled_ms=comp_med,
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        processes=n_proc,
        speedup_ci_scope=f"{n_proc} processes" if n_proc > 1 else "one process (rerun may differ)",
    )
    for name in ("eager", "compiled"):
        for q, v in percentiles(t.get(f"{name}_step_ms", [])).items():
            r[f"{name}_p{q}_ms"] = v
    peak, basis = peaks.peak_flops(ctx.device, b.dtype, ctx.peaks)
    r["mfu_peak_tflops"] = peak / 1e12 if peak else None
    r["mfu_basis"] = basis
    flops = r.get("flops_per_step")
    batch, seq = r["batch_size"], r.get("seq_len")
    for name, ms in (("eager", eager_med), ("compiled", comp_med)):
        r[f"{name}_samples_per_s_by_rank"] = ctx.all_gather(batch / (ms / 1000))
        r[f"{name}_samples_per_s"] = sum(r[f"{name}_samples_per_s_by_rank"])
        tokens = r[f"{name}_samples_per_s"] * seq if seq else None
        r[f"{name}_tokens_per_s"] = tokens
        r[f"{name}_tokens_per_s_per_device"] = tokens / ctx.world if tokens else None
        r[f"{name}_mfu"] = flops / (ms / 1000) / peak if peak and flops else None
    saved_s = (eager_med - comp_med) / 1000
    compile_s = r.get("compile_s")
    r["break_even_steps"] = compile_s / saved_s if saved_s > 0 and ctx.compiled_mode and compile_s else None
