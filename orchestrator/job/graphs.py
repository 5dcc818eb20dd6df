"""Graph health: dynamo's explain (graph breaks and their reasons), and the first compiled call
(compile seconds, graphs captured; a model that captured none is a failure, not a speedup)."""

from __future__ import annotations

import contextlib
import time

import torch

from orchestrator.core.failures import CompileError, NoGraphError
from orchestrator.job import energy
from orchestrator.job.compile_cost import clear_compilation_metrics
from orchestrator.job.context import JobContext, Side, first_line, synchronize
from orchestrator.job.parity import load_buffers, snapshot_buffers
from orchestrator.job.result import CompileCost, Explain
from workloads.inputs import call


def _short_reason(text: str) -> str:
    """A graph-break reason in one line: its headline and dynamo's explanation."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    keep = lines[:1] + [ln for ln in lines[1:] if ln.startswith("Explanation:")]
    return " ".join(keep)[:400]


def explain(ctx: JobContext) -> Explain:
    """Graph count and breaks with reasons, from torch._dynamo.explain (it resets dynamo, so it runs
    before the timed compile). An auxiliary figure: where explain itself fails, the section holds
    only a note and the job goes on (a model dynamo cannot trace fails its real compile next)."""
    import torch._dynamo

    model = ctx.wl.model
    try:
        with ctx.amp(), contextlib.nullcontext() if ctx.train else torch.no_grad():
            ex = call(torch._dynamo.explain(model), ctx.inputs)
    except torch.OutOfMemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (an auxiliary figure never sinks the job)
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        return Explain(explain_note=f"explain failed: {type(e).__name__}: {first_line(e)}"[:400])
    reasons = []
    for br in ex.break_reasons:
        frame = br.user_stack[-1] if br.user_stack else None
        where = f"{frame.filename}:{frame.lineno}" if frame else None
        reasons.append({"reason": _short_reason(str(br.reason)), "where": where})
    model.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    return Explain(
        explain_graphs=ex.graph_count,
        # The count the table shows is the reasons listed beside it; dynamo's own tally stays too.
        graph_breaks=len(reasons),
        explain_break_count=ex.graph_break_count,
        break_reasons=reasons,
        explain_ops=sum(len(o) for o in ex.ops_per_graph or []),
    )


def first_calls(ctx: JobContext, eager: Side, compiled: Side) -> tuple[dict[str, object], CompileCost]:
    """The first eager and first compiled forward(+backward) from identical weights and inputs:
    compile seconds and graphs captured. Returns both outputs (for the parity check) and the cost."""
    from torch._dynamo.utils import counters

    ctx.start_buffers = snapshot_buffers(eager.model)  # the compiled copy holds these too
    ctx.forward_backward(eager.model, ctx.inputs)  # lazy init, allocator warm
    eager.model.zero_grad(set_to_none=True)
    load_buffers(eager.model, ctx.start_buffers)  # so the compared call is each side's first
    out: dict[str, object] = {}
    seeded = ctx.random_ops  # random ops: both calls draw from the same seed
    if seeded:
        torch.manual_seed(ctx.cfg.bench.seed)
    eager_s = ctx.timed(lambda: out.__setitem__("eager", ctx.forward_backward(eager.model, ctx.inputs)))
    counters.clear()
    clear_compilation_metrics()
    if seeded:
        torch.manual_seed(ctx.cfg.bench.seed)
    read_j, _ = energy.counter(ctx.device)  # the GPU's energy over the compile (None: not measured)
    j0 = read_j() if read_j else None
    t0 = time.perf_counter()
    try:
        out["compiled"] = ctx.forward_backward(compiled.model, ctx.inputs)
        synchronize(ctx.device)
    except torch.OutOfMemoryError:
        raise
    except Exception as e:
        raise CompileError(f"{type(e).__name__}: {first_line(e)}") from e
    first_s = time.perf_counter() - t0
    cost = CompileCost(
        first_call_s=first_s,
        compile_s=max(first_s - eager_s, 0.0) if ctx.compiled_mode else 0.0,
        compile_energy_j=read_j() - j0 if read_j and j0 is not None and ctx.compiled_mode else None,
    )
    if ctx.compiled_mode:
        cost.graphs = int(counters["stats"]["unique_graphs"])
        cost.frames_ok = int(counters["frames"]["ok"])
        cost.graph_breaks_compile = int(sum(counters["graph_break"].values()))
    return out, cost


def check_graph_captured(ctx: JobContext) -> None:
    if ctx.compiled_mode and not (ctx.result.compile and ctx.result.compile.graphs):
        raise NoGraphError("compiled model captured no graph (it ran eager); check the compile/wrap order")
