"""Graph health: dynamo's explain (graph breaks and their reasons), and the first compiled call
(compile seconds, graphs captured; a model that captured none is a failure, not a speedup)."""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from orchestrator.core.failures import CompileError, NoGraphError
from orchestrator.core.result import CompileCost, Explain
from orchestrator.job.context import JobContext, Side, first_line, synchronize
from orchestrator.job.phases import energy
from orchestrator.job.phases.compared import load_buffers, snapshot_buffers
from orchestrator.job.phases.compile_cost import clear_compilation_metrics
from workloads.inputs import call


def _short_reason(text: str) -> str:
    """A graph-break reason in one line: its headline and dynamo's explanation."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    keep = lines[:1] + [ln for ln in lines[1:] if ln.startswith(("Explanation:", "Developer debug context:"))]
    return " ".join(keep)[:400]


# dynamo's internal codes for a break, in words a user can act on (the code kept after them)
_IN_WORDS = (
    (
        re.compile(r"^generic_jump \w*(Tensor|SymNode)Variable"),
        "a Python branch on a tensor's value (an `if` or `while` on a tensor): dynamo cannot trace both "
        "ways; usual fixes: `torch.where` to choose between values, `torch.cond` to choose between "
        "branches, or decide outside the compiled model",
    ),
)


def in_words(reason: str) -> str:
    """A break reason in words a user can act on, where dynamo gave its internal code."""
    for code, words in _IN_WORDS:
        if code.search(reason):
            return f"{words} (dynamo: {reason})"
    return reason


_SKIPPED = re.compile(r"frame skipped: (\S+) \((.+) line (\d+)\)")


def _reasons(breaks: list, messages: list[str], unimplemented: list[str]) -> list[dict]:
    """Each break's reason and place. Where explain gives only a code (`step_unsupported`: dynamo hit
    a call it cannot trace), the message dynamo logged for it (its graph-break counter, in order)
    names the cause: a logging call, a data-dependent branch... A break dynamo could not resume from
    (inside a loop) skips its whole frame, which then runs eager: explain lists nothing for it, so it
    is read from dynamo's `unimplemented` counter, with the skipped frame as its place."""
    spare = [m for m in messages if not any(_short_reason(m)[:60] in str(b.reason) for b in breaks)]
    reasons = []
    for br in breaks:
        frame = br.user_stack[-1] if br.user_stack else None
        text = str(br.reason)
        if " " not in text.strip() and spare:  # a bare code
            text = f"{text}: {spare.pop(0)}"
        where = f"{frame.filename}:{frame.lineno}" if frame else None
        reasons.append({"reason": in_words(_short_reason(text)), "where": where})
    for message in unimplemented:
        if skipped := _SKIPPED.search(message):
            cause = _short_reason(message.split("***")[0])
            fn, file, line = skipped.groups()
            text = f"frame {fn} skipped, runs eager (a break it cannot resume from): {cause}"
            reasons.append({"reason": text[:400], "where": f"{file}:{line}"})
    return reasons


_MATMULS = {"mm", "addmm", "bmm", "baddbmm"}
_MASKS = ("attn_mask", "attn_bias")  # the fused attention ops' mask argument, by backend


def expanded_masks(gm: torch.fx.GraphModule) -> int:
    """SDPA calls in a dynamo graph whose mask is expanded: stride 0 along its last dimension, which
    no fused GPU kernel takes (PyTorch's sdp_utils), so they run the math path. Read from the
    nodes' fake tensors, before any kernel is chosen."""
    count = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or "scaled_dot_product_attention" not in str(node.target):
            continue
        mask = node.kwargs.get("attn_mask", node.args[3] if len(node.args) > 3 else None)
        value = mask.meta.get("example_value") if isinstance(mask, torch.fx.Node) else None
        if isinstance(value, torch.Tensor) and value.dim() and value.shape[-1] > 1 and value.stride(-1) == 0:
            count += 1
    return count


class _CountOps(TorchDispatchMode):
    """Counts ATen operator calls (the unit of the compiled fraction), and of them the matmuls and
    those in float32 (autocast has cast its matmuls before they reach this mode), and the fused
    attention calls (a backend's `_scaled_dot_product_*` op) and those passed a mask or bias tensor
    (by the argument's name in the op's schema; a causal call without a mask passes none)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = self.matmuls = self.fp32_matmuls = self.attention = self.masked_attention = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.calls += 1
        name = func.overloadpacket.__name__
        if name in _MATMULS:
            self.matmuls += 1
            self.fp32_matmuls += any(isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in args)
        elif "scaled_dot_product" in name and not name.endswith("backward"):
            self.attention += 1
            names = [a.name for a in func._schema.arguments][: len(args)]  # positional, then keywords
            named = dict(zip(names, args, strict=True)) | (kwargs or {})
            self.masked_attention += any(isinstance(named.get(n), torch.Tensor) for n in _MASKS)
        return func(*args, **(kwargs or {}))


def explain(ctx: JobContext) -> Explain:
    """Graph count and breaks with reasons, as torch._dynamo.explain gives them (its recording backend,
    dynamo reset before and after: it runs before the timed compile), and the compiled fraction: of
    the ATen operator calls of one forward, the share that ran inside the captured graphs (counted in
    a second call of the traced model, against one eager forward). An auxiliary figure: where it
    fails, the section holds only a note and the job goes on (a model dynamo cannot trace fails its
    real compile next)."""
    import torch._dynamo
    from torch._dynamo.backends.debugging import ExplainWithBackend
    from torch._dynamo.utils import counters

    model = ctx.wl.model
    recorder = ExplainWithBackend("eager")
    in_graphs = _CountOps()
    counting, expanded = False, 0

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        nonlocal expanded
        expanded += expanded_masks(gm)
        graph = recorder(gm, example_inputs)

        def run(*args: Any) -> object:
            if not counting:
                return graph(*args)
            with in_graphs:
                return graph(*args)

        return run

    torch._dynamo.reset()
    counters.clear()
    saved = snapshot_buffers(model)  # its calls must not move the model's running statistics
    try:
        with ctx.amp(), contextlib.nullcontext() if ctx.train else torch.no_grad():
            traced = torch.compile(model, backend=backend)
            call(traced, ctx.inputs)
            ex = recorder.output()
            messages = list(counters["graph_break"])
            unimplemented = list(counters["unimplemented"])
            counting = True
            call(traced, ctx.inputs)
            with _CountOps() as everything:
                call(model, ctx.inputs)
    except torch.OutOfMemoryError:
        raise
    except Exception as e:  # noqa: BLE001 (an auxiliary figure never sinks the job)
        model.zero_grad(set_to_none=True)
        load_buffers(model, saved)
        torch._dynamo.reset()
        return Explain(explain_note=f"explain failed: {type(e).__name__}: {first_line(e)}"[:400])
    model.zero_grad(set_to_none=True)
    load_buffers(model, saved)
    torch._dynamo.reset()
    reasons = _reasons(ex.break_reasons, messages, unimplemented)
    return Explain(
        explain_graphs=ex.graph_count,
        graph_breaks=len(reasons),
        break_reasons=reasons,
        explain_ops=sum(len(o) for o in ex.ops_per_graph or []),
        compiled_fraction=min(in_graphs.calls / everything.calls, 1.0) if everything.calls else None,
        forward_ops=everything.calls,
        graph_matmuls=in_graphs.matmuls,
        graph_fp32_matmuls=in_graphs.fp32_matmuls,
        graph_attention=in_graphs.attention,
        graph_masked_attention=in_graphs.masked_attention,
        graph_expanded_masks=expanded,
        forward_attention=everything.attention,
        forward_masked_attention=everything.masked_attention,
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
    return out, cost


def check_graph_captured(ctx: JobContext) -> None:
    if ctx.compiled_mode and not (ctx.result.compile and ctx.result.compile.graphs):
        raise NoGraphError("compiled model captured no graph (it ran eager); check the compile/wrap order")
