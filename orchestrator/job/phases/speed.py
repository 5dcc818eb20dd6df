"""Speed: FLOPs of a step, warm-up, then R repetitions of k-step blocks alternating which side goes
first; each step timed on its own too (percentiles). `summarize` turns the timings of every process
(the job's own and `bench.processes - 1` fresh ones) into the speedup, its CI, throughput and MFU."""

from __future__ import annotations

import os
import statistics
from functools import partial

import torch

from orchestrator.core.numbers import payback_steps, saved_per_step_s
from orchestrator.core.result import Energy, Isolation, Speed
from orchestrator.core.stats import median_ratio_ci, percentiles, unpaired_ratio_ci
from orchestrator.job.context import JobContext, Side, first_line, synchronize
from orchestrator.job.phases import isolation, peaks
from orchestrator.job.phases.energy import EnergyMeter


def count_flops(ctx: JobContext) -> tuple[int | None, str, bool]:
    """FLOPs of one forward(+backward) step, how they were counted, and whether the step drew random
    numbers. Counted by torch's FlopCounterMode on the unwrapped model; where the counter itself fails
    (its attention formula on grouped-query attention, torch 2.11 CUDA), the step runs again without
    it and the FLOPs come from the usual formula (2 x params x tokens per forward, x3 with the
    backward), or stay null without tokens. It is also the first eager step: a model that fails
    eagerly is a crash, not a compile error."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    before = rng_states(ctx.device)
    basis = "counted (FlopCounterMode)"
    try:
        with counter:
            ctx.forward_backward(ctx.wl.model, ctx.inputs)
        flops = int(counter.get_total_flops()) or None
    except Exception as e:  # the counter's, or the model's: the step again without the counter tells
        ctx.wl.model.zero_grad(set_to_none=True)
        ctx.forward_backward(ctx.wl.model, ctx.inputs)  # the model's own failure raises here
        why = f"{type(e).__name__}: {first_line(e)}"[:200]
        flops, basis = formula_flops(ctx), f"the counter failed ({why})"
        basis = (
            f"formula 2 x params x tokens x {3 if ctx.train else 1}; {basis}" if flops else f"none: {basis}"
        )
    finally:
        ctx.wl.model.zero_grad(set_to_none=True)
    # Random ops (dropout...) advance the generator; ops that merely could (attention with
    # dropout_p=0) do not: the state says which, whatever the op is called.
    random_ops = not all(map(torch.equal, before, rng_states(ctx.device)))
    return flops, basis, random_ops


def formula_flops(ctx: JobContext) -> int | None:
    """2 x parameters x tokens per forward (a matmul's multiply and add per weight and token), three
    times that with the backward; None for a workload without tokens."""
    tokens = ctx.wl.batch_size * ctx.wl.seq_len if ctx.wl.seq_len else None
    return 2 * ctx.wl.n_params * tokens * (3 if ctx.train else 1) if tokens else None


def rng_states(device: torch.device) -> list[torch.Tensor]:
    """The CPU generator's state, and the device's where it has its own."""
    states = [torch.get_rng_state()]
    if device.type == "cuda":
        states.append(torch.cuda.get_rng_state(device))
    return states


def measure_speed(
    ctx: JobContext, sides: dict[str, Side], process: int = 0
) -> tuple[Isolation, Energy | None]:
    """Warm-up, then R repetitions of k-step blocks per side (alternating which goes first), into
    ctx.timings: `<side>_ms` (per step, block mean), `<side>_step_ms` (each step), `process`.
    Returns the conditions they were measured in, and (both sides timed) their energy."""
    b, t = ctx.cfg.bench, ctx.timings
    for _ in range(b.warmup + 1):
        for side in sides.values():
            ctx.step(side)
    synchronize(ctx.device)
    # Who else is on the device, clocks, throttling, host load: the conditions of these timings.
    own_pids = {int(p) for p in ctx.all_gather(os.getpid())} | {os.getppid()}
    conditions = isolation.snapshot(ctx.device, own_pids)
    names = list(sides)
    meter = EnergyMeter.for_device(ctx.device)  # joules of each side's timed blocks (job/phases/energy.py)
    for i in range(b.repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            with meter.side(name, b.steps_per_repeat):
                steps = ctx.timed_steps(partial(ctx.step, sides[name]), b.steps_per_repeat, b.sync_each_step)
            t.setdefault(f"{name}_ms", []).append(sum(steps) / len(steps) * 1000)
            t.setdefault(f"{name}_step_ms", []).extend(s * 1000 for s in steps)
        t.setdefault("process", []).append(process)
    compile_j = ctx.result.compile.compile_energy_j if ctx.result.compile else None
    return conditions, meter.summary(compile_j) if len(sides) == 2 else None


def summarize(ctx: JobContext, interleaved: bool = True, sides_note: str | None = None) -> Speed:
    """Speedup with its CI (paired, or unpaired when the sides ran one after the other), step-time
    medians and percentiles, throughput summed over ranks, MFU, break-even steps."""
    b, t, model = ctx.cfg.bench, ctx.timings, ctx.result.model
    e_ms, c_ms = t["eager_ms"], t["compiled_ms"]
    if interleaved:
        speedup, low, high = median_ratio_ci(e_ms, c_ms, b.bootstrap, b.seed, t.get("process"))
    else:
        speedup, low, high = unpaired_ratio_ci(e_ms, c_ms, b.bootstrap, b.seed)
    n_proc = len(set(t.get("process") or [0]))
    peak = peaks.peaks_of(ctx.device, b.dtype, ctx.peaks)
    out = Speed(
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        processes=n_proc,
        speedup_ci_scope=f"{n_proc} processes" if n_proc > 1 else "one process (rerun may differ)",
        interleaved=interleaved,
        sides_note=sides_note,
        mfu_peak_tflops=peak.flops_per_s / 1e12 if peak.flops_per_s else None,
        mfu_basis=peak.flops_basis,
        mfu_spec_tflops=peak.spec_flops_per_s / 1e12 if peak.spec_flops_per_s else None,
    )
    flops = model.flops_per_step if model else None
    batch, seq = (model.batch_size, model.seq_len) if model else (None, None)
    for name, side in (("eager", out.eager), ("compiled", out.compiled)):
        side.ms = ms = statistics.median(t[f"{name}_ms"])
        pct = percentiles(t.get(f"{name}_step_ms", []))
        side.p50_ms, side.p90_ms, side.p99_ms = pct.get(50), pct.get(90), pct.get(99)
        side.samples_per_s_by_rank = ctx.all_gather(batch / (ms / 1000)) if batch else []
        side.samples_per_s = sum(side.samples_per_s_by_rank) if batch else None
        side.tokens_per_s = side.samples_per_s * seq if seq and side.samples_per_s else None
        side.tokens_per_s_per_device = side.tokens_per_s / ctx.world if side.tokens_per_s else None
        side.mfu = peaks.utilization(flops, ms / 1000, peak.flops_per_s)
        side.mfu_spec = peaks.utilization(flops, ms / 1000, peak.spec_flops_per_s)
    compile_s = ctx.result.compile.compile_s if ctx.result.compile else None
    if ctx.compiled_mode and compile_s:
        out.break_even_steps = payback_steps(compile_s, saved_per_step_s(out.eager.ms, speedup))
    return out
