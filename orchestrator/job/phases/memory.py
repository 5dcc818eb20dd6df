"""Peak CUDA memory of each side."""

from __future__ import annotations

import torch

from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.result import Memory
from orchestrator.job.context import JobContext, Side, synchronize

GIB = 2**30


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t  # FSDP2 DTensor: this rank's shard


def state_bytes(side: Side) -> int:
    """Bytes a side keeps between steps on this rank: parameters, gradients, optimizer state."""
    total = 0
    for p in side.model.parameters():
        total += _local(p).nbytes
        if p.grad is not None:
            total += _local(p.grad).nbytes
    if side.optimizer is not None:
        for state in side.optimizer.state.values():
            total += sum(_local(t).nbytes for t in state.values() if isinstance(t, torch.Tensor))
    return total


def measure_memory(ctx: JobContext, eager: Side, compiled: Side) -> Memory:
    """Peak CUDA memory of a few steps of each side, as if that side were alone on the device.

    Both sides live on the device at once, so the peak is taken relative to the memory in use
    before the side's steps, plus the bytes the side itself keeps (weights, grads, optimizer).
    """
    out = Memory()
    for side, into in ((eager, out.eager), (compiled, out.compiled)):
        synchronize(ctx.device)
        torch.cuda.reset_peak_memory_stats(ctx.device)
        before = torch.cuda.memory_allocated(ctx.device)
        for _ in range(2):
            ctx.step(side)
        synchronize(ctx.device)
        peak = torch.cuda.max_memory_allocated(ctx.device) - before + state_bytes(side)
        into.peak_gib = ctx.all_reduce_max(peak / GIB)
        into.reserved_gib = ctx.all_reduce_max(torch.cuda.max_memory_reserved(ctx.device) / GIB)
    assert out.compiled.peak_gib is not None  # both sides measured above
    out.memory_ratio = out.compiled.peak_gib / out.eager.peak_gib if out.eager.peak_gib else None
    if ctx.cfg.compile.mode in CUDAGRAPH_MODES:
        out.memory_note = (
            "CUDA graph pool allocated at capture, before this phase: compiled peak leaves it out"
        )
    return out
