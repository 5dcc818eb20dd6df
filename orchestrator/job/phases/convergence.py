"""Convergence: over N training steps, does compiled follow eager's loss curve as closely as eager
follows itself when only the floating-point reduction order changes?

Three sides train from identical weights on one data stream (`Workload.stream`, the same batch at
step i for all): eager, compiled, and a second eager copy, the *reference*, that sees each batch in
reverse sample order. Reversing the batch leaves the loss (a mean over samples) and its gradients
mathematically unchanged, but every sum over the batch (the loss mean, each weight gradient's
X^T dY) adds its terms in another order: the same kind of rounding difference that a compiled
kernel's fused, reordered reductions make. How far the reference drifts from eager is therefore the
noise floor; compiled drifting well beyond it is a numeric change that one-step parity can miss.
(Switching `torch.use_deterministic_algorithms` would not do: on a CPU, and for most GPU kernels, it
changes nothing, so the floor would read zero.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from orchestrator.core.result import Convergence
from orchestrator.job.context import JobContext, Side
from orchestrator.job.phases.parity import PARITY_TOL
from orchestrator.job.setup.parallelize import prepare
from workloads.inputs import Inputs, call, map_inputs

Stream = Callable[[int], Inputs]


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under torch.compile's and DDP's wrappers (its state_dict has plain keys)."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = cast(nn.Module, model._orig_mod)  # torch.compile's wrapper: the module it compiled
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def data_stream(ctx: JobContext) -> Stream:
    """The workload's learnable stream, else its random inputs seeded by the step."""
    if ctx.wl.stream is not None:
        return ctx.wl.stream
    seed = ctx.cfg.bench.seed

    def stream(step: int) -> Inputs:
        torch.manual_seed(seed * 1_000_003 + step + 1)
        return ctx.wl.make_inputs(None)

    return stream


def train_step(ctx: JobContext, side: Side, inputs: Inputs) -> float:
    """One optimizer step; its loss (read at once: a CUDA-graph output is overwritten next step)."""
    ctx.mark_cudagraph_step()
    assert side.optimizer is not None
    side.optimizer.zero_grad(set_to_none=True)
    with ctx.amp():
        loss = call(side.model, inputs)
    value = float(loss.detach())
    loss.backward()
    side.optimizer_step()  # type: ignore[misc]
    return value


def max_rel_divergence(curve: list[float], ref: list[float]) -> float:
    """Largest |curve - ref| / |ref| over the steps; NaN anywhere is NaN (it never passes)."""
    worst = 0.0
    for x, y in zip(curve, ref, strict=True):
        d = abs(x - y) / max(abs(y), 1e-12)
        if math.isnan(d):
            return math.nan
        worst = max(worst, d)
    return worst


def run_convergence(ctx: JobContext, eager: Side, compiled: Side) -> Convergence:
    """Train the three sides `bench.convergence_steps` steps; the curves and the check. (The config
    refuses it for inference and FSDP, before anything runs.)"""
    cfg = ctx.cfg
    # A copy of the eager side's module (the workload's own may be in fp64 now: the parity reference).
    plain = dataclasses.replace(ctx.wl, model=unwrap(eager.model))
    reference = Side(prepare(plain, cfg.parallel.strategy, None, ctx.device, cfg.bench.dtype))
    # The weights both sides started from, kept on the CPU before the first calls (job/protocol.py):
    # the eager side is the workload's own model and has trained since.
    start = ctx.start_state
    assert start is not None, "protocol keeps the start weights when convergence_steps > 0"
    sides = {"eager": eager, "compiled": compiled, "reference": reference}
    for side in sides.values():
        unwrap(side.model).load_state_dict(start)  # in place: the compiled graphs stay valid
        ctx.new_optimizer(side)
    stream = data_stream(ctx)
    curves: dict[str, list[float]] = {name: [] for name in sides}
    for step in range(cfg.bench.convergence_steps):
        inputs = stream(step)
        reversed_batch = map_inputs(inputs, lambda t: t.flip(0))
        for name, side in sides.items():
            torch.manual_seed(cfg.bench.seed + step)  # random ops draw alike on every side
            curves[name].append(train_step(ctx, side, reversed_batch if name == "reference" else inputs))
    e, c, b = curves["eager"], curves["compiled"], curves["reference"]
    divergence = ctx.all_reduce_max(max_rel_divergence(c, e))
    baseline = ctx.all_reduce_max(max_rel_divergence(b, e))
    # The parity rule (PyTorch's harness): within a multiple of eager's own noise, plus a floor.
    limit = cfg.bench.parity_multiplier * baseline + PARITY_TOL[cfg.bench.dtype] / 10
    note = "batch of 1: reversing it changes no reduction order; the floor alone is the limit"
    return Convergence(
        conv_steps=len(e),
        conv_eager_loss=e,
        conv_compiled_loss=c,
        conv_reference_loss=b,
        conv_divergence=divergence,
        conv_baseline_divergence=baseline,
        conv_limit=limit,
        conv_ok=bool(divergence <= limit),  # NaN compares False
        conv_final_diff=c[-1] - e[-1],
        conv_final_rel_diff=(c[-1] - e[-1]) / max(abs(e[-1]), 1e-12),
        conv_loss_drop=1 - e[-1] / e[0] if e[0] else None,
        conv_note=note if ctx.wl.batch_size < 2 else None,
    )
