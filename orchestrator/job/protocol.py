"""The measurement protocol (docs/architecture.md): the order of its phases, and the two decisions
between them (whether the sides fit on the device together; a parity failure raised after the timings).

Eager and compiled run in one process on the same inputs. Order matters: FLOPs (the first eager
step) -> explain (it resets dynamo) -> the first eager and first compiled call from identical
weights (compile cost, graphs captured, parity) -> warm-up and interleaved timed repetitions ->
the untimed profile pass (`bench.profile`) -> memory (distributed CUDA; one process: job/processes/apart.py)
-> the dynamic-shape schedule -> convergence over N steps (optional) -> a model with random ops:
its parity check's own compiles, last, so that they find the timed compile's kernels in the job's
cache instead of warming the cold compile (checked first, they made T5's and BERT's cold compile
read 20-60% short on a CPU). When the two sides do not fit on the device together, SidesDoNotFit
hands over to apart.one_after_the_other (the worker calls it).
"""

from __future__ import annotations

import torch

from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.failures import CompileError
from orchestrator.core.result import JobResult, ModelFigures, Parity, Profile
from orchestrator.job.context import JobContext, Side, first_line
from orchestrator.job.phases import (
    aoti,
    compile_cost,
    convergence,
    graphs,
    memory,
    parity,
    profile,
    random_parity,
    shapes,
    speed,
)
from orchestrator.job.phases.parity import compute_dtype
from orchestrator.job.setup.compile_settings import numerics_now
from orchestrator.job.setup.parallelize import prepare
from orchestrator.job.sides import SidesRule


class SidesDoNotFit(torch.OutOfMemoryError):
    """The two sides together ran out of device memory (each alone may still fit: job/processes/apart.py)."""


def run_protocol(ctx: JobContext, rule: SidesRule) -> JobResult:
    """Fill `ctx.result` phase by phase; a phase that fails raises, leaving what was measured.
    `rule`: how the sides run (job/sides.py). Where it says `apart`, only the single-model phases
    run here (the sides run in fresh processes, job/processes/apart.py)."""
    cfg, wl, r = ctx.cfg, ctx.wl, ctx.result
    r.model = ModelFigures(
        params=wl.n_params,
        batch_size=wl.batch_size,
        seq_len=wl.seq_len,
        model_mode="train" if wl.model.training else "eval",
        blocks=wl.blocks_where or None,
        optimizer=ctx.optimizer_text(),
        compute_dtype=compute_dtype(wl.model, cfg.bench.dtype),
    )
    r.numerics = numerics_now()  # inside the job's scope (compile_settings): what both sides run at
    clock = ctx.clock
    with clock.phase("flops"):
        r.model.flops_per_step, r.model.flops_basis, r.model.random_ops = speed.count_flops(ctx)
    if ctx.compiled_mode and cfg.bench.explain:
        with clock.phase("explain"):
            r.explain = graphs.explain(ctx)
    random_check = cfg.bench.parity and ctx.random_ops and ctx.compiled_mode
    if rule.apart:
        if random_check:  # the sides compile cold from the job's cache: keep this check out of it
            from torch._inductor.utils import fresh_cache

            with clock.phase("random_parity"), fresh_cache():
                r.parity = _random_parity(ctx)
        return r
    # The timed steps train the eager side (the workload's own model) with AdamW; the check below
    # must see the weights every other parity check sees, the built ones (on the H200, T5-base's
    # check read 0.0312 on them and 0.0100 on the trained ones). Kept on the host: no device peak.
    # FSDP's sides are copies: the workload's model is not trained there.
    built = None
    if (random_check and ctx.train and cfg.parallel.strategy != "fsdp") or cfg.bench.convergence_steps:
        built = _host_copy(wl.model)
    ctx.start_state = built  # convergence starts every side from the same weights (one copy)
    out_of_memory = None
    try:
        _both_sides(ctx, rule)
    except torch.OutOfMemoryError as e:
        if not rule.fall_back:
            raise
        out_of_memory = f"{type(e).__name__}: {e}"
    if out_of_memory:  # raised here, after the handler, so that the sides' tensors are freed
        raise SidesDoNotFit(out_of_memory)
    if random_check:  # after the cold compile, which it would warm; its kernels come from that cache
        with clock.phase("random_parity"):
            if built is not None:
                wl.model.load_state_dict(built)
            r.parity = _random_parity(ctx)
    parity.raise_if_failed(r.parity)  # after the speed figures: a failure keeps its timings
    return r


def _host_copy(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _random_parity(ctx: JobContext) -> Parity:
    """The random-ops parity check in compiles of its own: dynamo must not hand it the timed side's
    code (compiled without `fallback_random`), nor keep its code for anything after."""
    torch._dynamo.reset()
    ctx.wl.model.zero_grad(set_to_none=True)  # its copies' gradients start from none, as eager's did
    try:
        return random_parity.check_random_parity(ctx)
    finally:
        torch._dynamo.reset()


def _both_sides(ctx: JobContext, rule: SidesRule) -> None:
    cfg, wl, r, clock = ctx.cfg, ctx.wl, ctx.result, ctx.clock
    strategy, dtype = cfg.parallel.strategy, cfg.bench.dtype
    # Two models on the device, no more: eager is the workload's own (FSDP shards in place: a copy).
    eager = Side(prepare(wl, strategy, None, ctx.device, dtype, copy_model=strategy == "fsdp"))
    aoti_cost = None
    counting = profile.counting_compiled_bytes(cfg.bench.profile and ctx.compiled_mode)
    with clock.phase("first_calls"), counting:
        if cfg.compile.path == "aoti":  # export and package instead of torch.compile (job/phases/aoti.py)
            compiled_model, r.aoti, aoti_cost = aoti.build(ctx)
        else:
            compiled_model = prepare(
                wl, strategy, cfg.compile if ctx.compiled_mode else None, ctx.device, dtype
            )
        compiled = Side(compiled_model, compiled=True)
        outputs, r.compile = graphs.first_calls(ctx, eager, compiled)
    compiled_bytes = profile.compiled_bytes() if cfg.bench.profile else None
    if aoti_cost is not None:
        r.compile = aoti_cost
    elif ctx.compiled_mode:
        r.compile.metrics = compile_cost.summarize(compile_cost.compilation_metrics())
        if ctx.artifacts_dir is not None:
            saved = compile_cost.save_artifacts(ctx.artifacts_dir)
            r.compile.compile_artifacts_mb = saved.stat().st_size / 2**20 if saved else None
    if cfg.bench.parity and not (ctx.random_ops and ctx.compiled_mode):
        with clock.phase("parity"):
            r.parity = parity.check_parity(ctx, eager, compiled, outputs)
    del outputs
    graphs.check_graph_captured(ctx)
    with clock.phase("first_calls"):  # a compiled optimizer step compiles here
        eager_step_s = ctx.end_first_call(eager)
        compiled_step_s = ctx.end_first_call(compiled)
    if cfg.compile.optimizer and ctx.compiled_mode:  # its first compiled step compiled it
        r.compile.compile_optimizer_s = max(compiled_step_s - eager_step_s, 0.0)
        r.compile.compile_s = (r.compile.compile_s or 0.0) + r.compile.compile_optimizer_s
    with clock.phase("timed"), compile_cost.frames_compiled() as timed_frames:
        r.isolation, r.energy = speed.measure_speed(ctx, {"eager": eager, "compiled": compiled})
        r.speed = speed.summarize(ctx)
    if ctx.compiled_mode and r.compile is not None and aoti_cost is None:
        again = compile_cost.recompiles(timed_frames)
        r.compile.step_recompiles, r.compile.step_recompile_reasons = len(again), again[:3]
    # untimed, after the timed phase (job/phases/profile.py); a failure is a note
    if cfg.bench.profile or (cfg.verdict.profile and ctx.compiled_mode and ctx.world == 1):
        try:
            with clock.phase("profile"):
                r.profile = profile.profile_sides(ctx, eager, compiled, compiled_bytes, cfg.bench.profile)
        except Exception as e:  # noqa: BLE001 (an auxiliary figure never sinks the job)
            r.profile = Profile(profile_note=f"profile failed: {type(e).__name__}: {first_line(e)}")
    if cfg.compile.mode in CUDAGRAPH_MODES:
        check_cudagraphs(ctx)
    if rule.memory_in_place:  # else each side alone in a fresh process (apart.py), or none
        with clock.phase("memory"):
            r.memory = memory.measure_memory(ctx, eager, compiled)
    if cfg.workload.shapes:
        with clock.phase("shapes"):
            r.shapes = shapes.run_shape_schedule(ctx, eager, compiled)
    if cfg.bench.convergence_steps:
        with clock.phase("convergence"):
            r.convergence = convergence.run_convergence(ctx, eager, compiled)


def check_cudagraphs(ctx: JobContext) -> None:
    """A CUDA-graph mode that skipped its graphs says so (and fails, if the user asked for that)."""
    from torch._dynamo.utils import counters

    cost = ctx.result.compile
    assert cost is not None, "after the first calls"
    cost.cudagraph_skips = int(counters["inductor"]["cudagraph_skips"]) if ctx.device.type == "cuda" else None
    if cost.cudagraph_skips and ctx.cfg.compile.require_cudagraphs:
        reasons = (
            "; ".join(cost.metrics.cudagraph_skip_reasons if cost.metrics else []) or "no reason recorded"
        )
        raise CompileError(f"CUDA graphs skipped ({cost.cudagraph_skips}x): {reasons}")
