"""Speed: FLOPs of a step, warm-up, then R repetitions of k-step blocks alternating which side goes
first; speedup as the median of the pair ratios with a bootstrap CI; throughput summed over ranks."""

from __future__ import annotations

import statistics

import torch

from orchestrator.job.context import JobContext, Side, synchronize
from orchestrator.job.energy import EnergyMeter
from orchestrator.job.environment import peak_flops
from orchestrator.stats import median_ratio_ci


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


def measure_speed(ctx: JobContext, eager: Side, compiled: Side) -> None:
    b, r = ctx.cfg.bench, ctx.result
    for _ in range(b.warmup + 1):
        ctx.step(eager)
        ctx.step(compiled)
    synchronize(ctx.device)
    meter = EnergyMeter.for_device(ctx.device)  # joules of each side's timed blocks (job/energy.py)
    for i in range(b.repeats):
        order = (eager, compiled) if i % 2 == 0 else (compiled, eager)
        t = {}
        for s in order:
            with meter.side("eager" if s is eager else "compiled", b.steps_per_repeat):
                t[id(s)] = ctx.timed(lambda s=s: ctx.step(s), b.steps_per_repeat)
        ctx.timings["eager_ms"].append(t[id(eager)] * 1000)
        ctx.timings["compiled_ms"].append(t[id(compiled)] * 1000)
    e_ms, c_ms = ctx.timings["eager_ms"], ctx.timings["compiled_ms"]
    speedup, low, high = median_ratio_ci(e_ms, c_ms, b.bootstrap, b.seed)
    eager_med, comp_med = statistics.median(e_ms), statistics.median(c_ms)
    r.update(
        eager_ms=eager_med,
        compiled_ms=comp_med,
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
    )
    peak = peak_flops(ctx.device, ctx.cfg.bench.dtype)
    flops = r.get("flops_per_step")
    for name, ms in (("eager", eager_med), ("compiled", comp_med)):
        r[f"{name}_samples_per_s_by_rank"] = ctx.all_gather(ctx.wl.batch_size / (ms / 1000))
        r[f"{name}_samples_per_s"] = sum(r[f"{name}_samples_per_s_by_rank"])
        tokens = r[f"{name}_samples_per_s"] * ctx.wl.seq_len if ctx.wl.seq_len else None
        r[f"{name}_tokens_per_s"] = tokens
        r[f"{name}_tokens_per_s_per_device"] = tokens / ctx.world if tokens else None
        r[f"{name}_mfu"] = flops / (ms / 1000) / peak if peak and flops else None
    saved_s = (eager_med - comp_med) / 1000
    r["break_even_steps"] = r["compile_s"] / saved_s if saved_s > 0 and ctx.compiled_mode else None
    r.update(meter.summary(r.get("compile_energy_j")))
