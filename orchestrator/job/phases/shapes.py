"""The dynamic-shape schedule: recompiles, the compile seconds they cost, and speed across shapes."""

from __future__ import annotations

from functools import partial

from torch._dynamo.utils import counters

from orchestrator.core.result import Shapes
from orchestrator.job.context import JobContext, Side
from orchestrator.job.phases.compile_cost import clear_compilation_metrics, compilation_metrics, summarize


def run_shape_schedule(ctx: JobContext, eager: Side, compiled: Side) -> Shapes:
    """Each length of `workload.shapes` in turn: a first and a second compiled call (a new graph's
    compile is their difference), and an eager call."""
    clear_compilation_metrics()
    recompiles, recompile_s, eager_s, compiled_s = 0, 0.0, 0.0, 0.0
    for seq in ctx.cfg.workload.shapes:
        inputs = ctx.wl.make_inputs(seq)
        graphs_before = counters["stats"]["unique_graphs"]
        first = ctx.timed(partial(ctx.forward_backward, compiled.model, inputs))
        second = ctx.timed(partial(ctx.forward_backward, compiled.model, inputs))
        new = counters["stats"]["unique_graphs"] - graphs_before
        if new:
            recompiles += new
            recompile_s += max(first - second, 0.0)
        ctx.forward_backward(eager.model, inputs)
        eager_s += ctx.timed(partial(ctx.forward_backward, eager.model, inputs))
        compiled_s += second
        for side in (eager, compiled):
            side.model.zero_grad(set_to_none=True)
    compiled_mode = ctx.compiled_mode
    first_compile_s = (ctx.result.compile.compile_s if ctx.result.compile else None) or 0.0
    return Shapes(
        dyn_shapes=len(ctx.cfg.workload.shapes),
        dyn_recompiles=recompiles if compiled_mode else 0,
        dyn_compile_s=recompile_s if compiled_mode else 0.0,
        dyn_total_compile_s=(first_compile_s + recompile_s) if compiled_mode else 0.0,
        dyn_speedup=eager_s / compiled_s if compiled_s else None,
        dyn_recompile_reasons=summarize(compilation_metrics()).recompile_reasons if compiled_mode else [],
    )
