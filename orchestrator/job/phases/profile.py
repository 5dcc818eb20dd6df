"""Why it is faster (`bench.profile=true`): an untimed torch.profiler pass per side after the timed
phase, and a roofline point per side.

Per side: kernels per step (CUDA kernels; on a CPU, aten ops: inductor's C++ kernels run inside the
compiled region's op, which is what the CPU list shows), GPU busy fraction (the union of kernel
intervals over the profiled wall time), the top kernels by time, and the trace kept in the job's
directory. `verdict.profile` (on by default, compiled jobs) runs the same pass for the verdict's
causes without the trace and the roofline's byte counts (about 1 s a job on an H200).
Roofline: FLOPs of a step (flops_per_step) and bytes it moves at kernel boundaries, over the timed
step time, against the device's peaks. Eager's bytes are counted op by op (each aten op reads its
inputs and writes its outputs); compiled's are inductor's own count over its scheduled kernels
(`GraphLowering.count_bytes`, forward and backward graphs), recorded while the job compiled.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from orchestrator.core.result import Profile, SideProfile
from orchestrator.job.context import JobContext, Side, synchronize
from orchestrator.job.phases.peaks import peaks_of, utilization

TOP = 5
# The compiled call's own host work: dynamo's guard check, and the compiled region's wrapper around
# its kernels (their self time: the kernels and ops they call count apart).
OVERHEAD_EVENTS = ("TorchDynamo Cache Lookup", "Torch-Compiled Region")
CPU_UNIT = "cpu ops (aten; compiled C++ kernels run inside their region)"
MAX_STEPS = 5  # profiled steps per side: enough to average, a trace of a few MB
# Inductor counts a graph's bytes only while this logger is enabled for INFO (compile_fx.py).
_METRICS_LOG = "torch._inductor.compile_fx.__inductor_metrics"


@contextlib.contextmanager
def counting_compiled_bytes(enabled: bool) -> Iterator[None]:
    """Inductor's byte count of what it compiles in this scope, into its metrics (silently)."""
    if not enabled:
        yield
        return
    from torch._inductor import metrics

    log = logging.getLogger(_METRICS_LOG)
    saved = (log.level, log.propagate, log.disabled)
    quiet = logging.NullHandler()
    log.setLevel(logging.INFO)
    log.propagate, log.disabled = False, False
    log.addHandler(quiet)
    metrics.reset()
    try:
        yield
    finally:
        log.removeHandler(quiet)
        log.level, log.propagate, log.disabled = saved


def compiled_bytes() -> int | None:
    from torch._inductor import metrics

    return int(metrics.num_bytes_accessed) or None


class _ByteCounter(TorchDispatchMode):
    """Bytes each aten op reads (its tensor inputs) and writes (its tensor outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves((args, kwargs, out)):
            if isinstance(t, torch.Tensor):
                self.bytes += t.numel() * t.element_size()
        return out


def eager_bytes(ctx: JobContext, eager: Side) -> int:
    counter = _ByteCounter()
    with counter:
        ctx.forward_backward(eager.model, ctx.inputs)
    eager.model.zero_grad(set_to_none=True)
    return counter.bytes


# Kernel (op) names to the kind of work, first match wins; names are lower-cased. A label of measured
# time, not a measurement: `other` holds what no pattern knows.
KINDS = (
    ("host", ("torchdynamo cache lookup", "torch-compiled region")),
    ("attention", ("flash", "fmha", "attention", "sdpa", "scaled_dot_product", "_efficient_attention")),
    (
        "matmul",
        ("gemm", "nvjet", "addmm", "aten::mm", "aten::bmm", "matmul", "cutlass", "xmma", "cublas", "linear"),
    ),
    ("fused", ("triton_", "cpp_fused", "kernel_cpp", "## call compiledfxgraph")),  # CPU: its C++ kernels
    ("copy", ("copy", "memcpy", "memset", "aten::cat", "clone", "contiguous", "transpose", "permute")),
    ("elementwise", ("elementwise", "vectorized", "reduce", "norm", "gelu", "softmax", "aten::", "native")),
)


def kernel_kind(name: str) -> str:
    low = name.lower()
    return next((kind for kind, marks in KINDS if any(m in low for m in marks)), "other")


# Which fused attention a kernel (CPU: aten op) is, first match wins: FlashAttention, the
# memory-efficient (cutlass fmha) kernels, cuDNN's, or the math path's own op on a CPU. On a GPU the
# math path runs no kernel of its own (matmuls and a softmax): a side with none reads `none fused`.
ATTENTION = (  # cuDNN's first: its SDPA kernels' names hold `flash` too
    ("cudnn", ("cudnn_generated_fort_native_sdpa", "cudnn_attention", "cudnn_sdpa", "sdpa_cudnn")),
    ("flash", ("flash",)),
    ("efficient", ("efficient_attention", "fmha_cutlass", "mem_eff")),
    ("math", ("attention_math",)),
)


def attention_backend(names: list[str]) -> str:
    """The fused attention kernels a side ran, by name (`flash`, `efficient+cudnn`), or `none fused`."""
    found = []
    for name in (n.lower() for n in names):
        backend = next((b for b, marks in ATTENTION if any(m in name for m in marks)), None)
        if backend is not None and backend not in found:
            found.append(backend)
    return "+".join(sorted(found)) or "none fused"


def device_kernels(events: list) -> list:
    """The GPU's kernels among a profile's events: not the ranges of `record_function` the profiler
    also draws on the GPU's timeline (`is_user_annotation`: "Optimizer.step#AdamW.step" spans the
    optimizer's kernels and the idle time between them), which torch's own device-time totals leave
    out too. Counted in, it read 8 ms of "other kernels" in an eager BERT training step on an H100."""
    from torch.autograd import DeviceType

    gpu = [e for e in events if e.device_type == DeviceType.CUDA]
    return [e for e in gpu if not getattr(e, "is_user_annotation", False)]


def _profile_side(ctx: JobContext, side: Side, name: str, steps: int, keep_trace: bool) -> SideProfile:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = ctx.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    synchronize(ctx.device)
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            ctx.step(side)
        synchronize(ctx.device)
        wall_us = (time.perf_counter() - t0) * 1e6
    trace = ctx.job_dir / f"profile_{name}.json" if keep_trace and ctx.job_dir is not None else None
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    if cuda:
        events = device_kernels(prof.events())
        spans = sorted((e.time_range.start, e.time_range.end) for e in events)
        busy, end = 0.0, float("-inf")
        for a, b in spans:  # union of the kernel intervals
            busy += max(0.0, b - max(a, end))
            end = max(end, b)
        times = [(e.name, e.time_range.elapsed_us()) for e in events]
        busy_fraction: float | None = busy / wall_us if wall_us else None
    else:
        aten = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.name.startswith("aten::")]
        # The ops that do the work: aten ops that call no other aten op (linear -> addmm counts once).
        events = [e for e in aten if not any(c.name.startswith("aten::") for c in e.cpu_children)]
        times = [(e.name, e.self_cpu_time_total) for e in prof.events() if e.device_type == DeviceType.CPU]
        busy_fraction = None
    ranges = [e for e in prof.events() if e.name.startswith("Optimizer.step")]
    ranges = [e for e in ranges if e.device_type == DeviceType.CUDA] or ranges  # its device span first
    optimizer_ms = sum(e.time_range.elapsed_us() for e in ranges) / steps / 1000 if ranges else None
    host = [e for e in prof.events() if e.device_type == DeviceType.CPU]
    overhead_us = sum(e.self_cpu_time_total for e in host if e.name.startswith(OVERHEAD_EVENTS))
    by_name: dict[str, float] = {}
    for kname, us in times:
        by_name[kname] = by_name.get(kname, 0.0) + us
    total = sum(by_name.values()) or 1.0
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:TOP]
    split: dict[str, float] = {}
    for kname, us in by_name.items():
        kind = kernel_kind(kname)
        split[kind] = split.get(kind, 0.0) + us / steps / 1000
    return SideProfile(
        kernels_per_step=len(events) / steps,
        busy_fraction=busy_fraction,
        overhead_ms_per_step=overhead_us / steps / 1000,
        profile_step_ms=wall_us / steps / 1000,
        optimizer_ms_per_step=optimizer_ms,
        top_kernels=[
            {"name": k[:160], "ms_per_step": us / steps / 1000, "share": us / total} for k, us in top
        ],
        profile_trace=str(trace) if trace is not None else None,
        attention_backend=attention_backend(list(by_name)),
        time_split=dict(sorted(split.items(), key=lambda kv: -kv[1])),
    )


def profile_sides(
    ctx: JobContext, eager: Side, compiled: Side, compiled_bytes_per_step: int | None, full: bool = True
) -> Profile:
    """The profile pass, and with `full` (`bench.profile`) the traces and the roofline's byte counts."""
    cuda = ctx.device.type == "cuda"
    steps = min(max(2, ctx.cfg.bench.steps_per_repeat), MAX_STEPS)
    peak = peaks_of(ctx.device, ctx.cfg.bench.dtype, ctx.peaks)
    out = Profile(
        profile_unit="cuda kernels"
        if cuda
        else "cpu ops (aten; compiled C++ kernels run inside their region)",
        profile_steps=steps,
        peak_bytes_per_s=peak.bytes_per_s,
        peak_bytes_basis=peak.bytes_basis,
        spec_bytes_per_s=peak.spec_bytes_per_s,
        peak_flops_per_s=peak.flops_per_s,
        eager=_profile_side(ctx, eager, "eager", steps, full),
        compiled=_profile_side(ctx, compiled, "compiled", steps, full),
    )
    flops = ctx.result.model.flops_per_step if ctx.result.model else None
    moved = {"eager": eager_bytes(ctx, eager) if full else None, "compiled": compiled_bytes_per_step}
    if not full:
        out.roofline_note = "no byte counts: the verdict's profile pass (bench.profile=true counts them)"
    elif not ctx.compiled_mode:  # the eager control: both sides are the eager model
        moved["compiled"] = moved["eager"]
    elif ctx.cfg.compile.scope != "model":  # one block graph serves every block; the rest is eager
        moved["compiled"] = None
        out.roofline_note = "compiled bytes: per compiled graph, not per step, under compile.scope != model"
    speed = ctx.result.speed
    for name, side in (("eager", out.eager), ("compiled", out.compiled)):
        ms = getattr(speed, name).ms if speed else None
        side.bytes_per_step = moved_bytes = moved[name]
        side.flops_per_s = flops / (ms / 1000) if flops and ms else None
        side.bytes_per_s = moved_bytes / (ms / 1000) if moved_bytes and ms else None
        side.mbu = utilization(moved_bytes, ms / 1000 if ms else None, peak.bytes_per_s)
        side.mbu_spec = utilization(moved_bytes, ms / 1000 if ms else None, peak.spec_bytes_per_s)
        side.intensity = flops / moved_bytes if flops and moved_bytes else None
    return out
