"""Peak CUDA memory of each side."""

from __future__ import annotations

import torch

from orchestrator.config import CUDAGRAPH_MODES
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


def measure_memory(ctx: JobContext, eager: Side, compiled: Side) -> None:
    """Peak CUDA memory of a few steps of each side, as if that side were alone on the device.

    Both sides live on the device at once, so the peak is taken relative to the memory in use
    before the side's steps, plus the bytes the side itself keeps (weights, grads, optimizer).
    """
    r = ctx.result
    for name, side in (("eager", eager), ("compiled", compiled)):
        synchronize(ctx.device)
        torch.cuda.reset_peak_memory_stats(ctx.device)
        before = torch.cuda.memory_allocated(ctx.device)
        for _ in range(2):
            ctx.step(side)
        synchronize(ctx.device)
        peak = torch.cuda.max_memory_allocated(ctx.device) - before + state_bytes(side)
        r[f"{name}_peak_gib"] = ctx.all_reduce_max(peak / GIB)
        r[f"{name}_reserved_gib"] = ctx.all_reduce_max(torch.cuda.max_memory_reserved(ctx.device) / GIB)
    r["memory_ratio"] = r["compiled_peak_gib"] / r["eager_peak_gib"] if r["eager_peak_gib"] else None
    if ctx.cfg.compile.mode in CUDAGRAPH_MODES:
        r["memory_note"] = (
            "CUDA graph pool allocated at capture, before this phase: compiled peak leaves it out"
        )
