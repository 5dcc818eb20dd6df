"""`bench.task=generate`: a decoder served as LLMs are. A request is a prefill of the prompt (its
logits give the first token) and then one greedy token at a time over a KV cache (`generate.cache`).

Eager and compiled run in one process on one model and one prompt, each with its own cache. The order:
the cache's check -> each side's first request (cold: the compiled side compiles in it; its frames,
recompiles and graph breaks are counted there) -> teacher-forced parity against an upcast reference
(generation_checks.py) -> one untimed request per side -> `bench.repeats` timed requests per side,
alternating -> on CUDA, each side's peak memory over one request. The headline speedup (the table's,
the verdict's) is the per-token decode latency's: a step is one decode token of the batch.
Dynamo's warning that a frame hit its recompile limit (the rest of that frame then runs eager, while
counted as compiled) is caught and kept in the result, never timed silently.

Parameters are cast to `bench.dtype` (bf16/fp16; buffers such as RoPE's frequencies stay fp32) and
nothing runs under autocast, as servers load an LLM. Under autocast over fp32 weights the sides would
not move the same bytes (eager casts each weight once per request, inductor's graph at every decode
step: `_to_copy` kernels), and transformers 5.17 cannot fill a static cache there (values take the
keys' dtype, and Llama's keys leave RoPE in fp32).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.result import NO_REASON, CompileCost, Explain, Generation, ModelFigures
from orchestrator.core.stats import median_ratio_ci, percentiles
from orchestrator.job.context import JobContext
from orchestrator.job.phases import compile_cost, generation_checks, limits, parity, speed
from orchestrator.job.phases.parity import compute_dtype
from orchestrator.job.setup.compile_settings import numerics_now
from orchestrator.job.setup.parallelize import compile_kwargs
from workloads.decoding import Decoder, decoder_of, served_weights

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
Step = Callable[[torch.Tensor, Any, torch.Tensor], torch.Tensor]  # (ids, cache, positions) -> logits


@dataclass
class GenSide:
    """One side: how it runs a prefill and a decode step, and its own cache."""

    name: str
    prefill: Step
    decode: Step
    cache: Any


@dataclass
class Request:
    """One request as measured: seconds to the first token, of each decode token, and the tokens."""

    ttft_s: float
    decode_s: list[float]
    tokens: torch.Tensor  # (batch, new tokens)

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + sum(self.decode_s)


def _prefill_of(decoder: Decoder) -> Step:
    def prefill(ids: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor:
        return decoder.forward(ids, cache, pos)

    return prefill


def _decode_of(decoder: Decoder) -> Step:  # its own code object: dynamo caches its frames apart
    def decode(ids: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor:
        return decoder.forward(ids, cache, pos)

    return decode


def sides(ctx: JobContext, decoder: Decoder) -> tuple[GenSide, GenSide]:
    """Eager, and the compiled side: the prefill, the decode step or both compiled (`generate.compiled`);
    under `compile.mode=eager` both sides eager (the control)."""
    what = ctx.cfg.generate.compiled
    eager = GenSide("eager", decoder.forward, decoder.forward, decoder.new_cache())
    prefill: Step = decoder.forward
    decode: Step = decoder.forward
    if ctx.compiled_mode:
        kwargs = compile_kwargs(ctx.cfg.compile)
        prefill = torch.compile(_prefill_of(decoder), **kwargs) if what in ("both", "prefill") else prefill
        decode = torch.compile(_decode_of(decoder), **kwargs) if what in ("both", "decode") else decode
    return eager, GenSide("compiled", prefill, decode, decoder.new_cache())


def request(ctx: JobContext, side: GenSide, decoder: Decoder, prompt: torch.Tensor, pos: list) -> Request:
    """One greedy request on `side`, timed token by token (ctx.timed_steps: CUDA events and one sync
    on a GPU); its cache reset first, untimed."""
    side.cache = decoder.reset(side.cache)
    tokens: list[torch.Tensor] = []

    def step() -> None:  # the prefill, then a decode step on the last token
        ctx.mark_cudagraph_step()
        if tokens:
            logits = side.decode(tokens[-1][:, None], side.cache, pos[len(tokens)])
        else:
            logits = side.prefill(prompt, side.cache, pos[0])
        tokens.append(logits.argmax(-1))

    with torch.no_grad():  # weights in bench.dtype, no autocast (the module's docstring)
        seconds = ctx.timed_steps(step, len(pos))
    return Request(seconds[0], seconds[1:], torch.stack(tokens, 1))


def run_generation(ctx: JobContext) -> None:
    """Fill ctx.result for one generation job; a parity failure is raised after the timings."""
    cfg, wl, r = ctx.cfg, ctx.wl, ctx.result
    g, b = cfg.generate, cfg.bench
    dtype = DTYPES.get(b.dtype, next(wl.model.parameters()).dtype)
    if b.dtype in DTYPES:  # served weights (the module's docstring)
        served_weights(wl.model, dtype)
    decoder = decoder_of(wl.model, str(g.cache), g.prompt_len + g.new_tokens, wl.batch_size, dtype)
    inputs = wl.make_inputs(g.prompt_len)
    prompt = inputs["input_ids"] if isinstance(inputs, dict) else inputs[0]
    pos = [torch.arange(g.prompt_len, device=ctx.device)]
    pos += [torch.tensor([g.prompt_len + i], device=ctx.device) for i in range(g.new_tokens - 1)]
    # A step of the headline is one decode token of each of the batch's sequences.
    mode = "eval" if not wl.model.training else "train"
    r.model = ModelFigures(
        wl.n_params, wl.batch_size, 1, mode, compute_dtype=compute_dtype(wl.model, b.dtype)
    )
    r.numerics = numerics_now()
    out = r.generation = Generation()
    eager, compiled = sides(ctx, decoder)
    # The cache path against a forward without one, before anything is timed; it also allocates each
    # side's static cache (transformers' at its first update) before compiled code sees it.
    ref = generation_checks.reference_of(ctx, decoder)
    for side in (eager, compiled):
        generation_checks.check_cache_path(ctx, decoder, side, prompt, pos, ref)
    with compile_cost.recompile_limit_lines() as limit_lines:
        with ctx.clock.phase("first_calls"):
            first_eager = request(ctx, eager, decoder, prompt, pos)
            first_compiled = _first_compiled(ctx, compiled, decoder, prompt, pos, first_eager)
        out.gen_first_divergence = generation_checks.first_divergence(
            first_eager.tokens, first_compiled.tokens
        )
        if b.parity:
            with ctx.clock.phase("parity"):
                r.parity, out.gen_parity_errors = generation_checks.teacher_forced(
                    ctx, eager, compiled, decoder, prompt, pos, ref
                )
        del ref  # the upcast copy: out of the timings' memory and the memory figures
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
        with ctx.clock.phase("timed"), compile_cost.frames_compiled() as timed_frames:
            runs = _timed(ctx, {"eager": eager, "compiled": compiled}, decoder, prompt, pos)
    out.gen_recompile_limit = limit_lines[0] if limit_lines else None
    if ctx.compiled_mode and r.compile is not None:
        again = compile_cost.recompiles(timed_frames)
        r.compile.step_recompiles, r.compile.step_recompile_reasons = len(again), again[:3]
    _summarize(ctx, out, runs, (first_eager, first_compiled))
    out.gen_cache_gib = decoder.bytes(compiled.cache) / 2**30
    limits.fill(ctx, out, decoder, decoder.cache_tensors(compiled.cache))
    if cfg.compile.mode in CUDAGRAPH_MODES and ctx.compiled_mode:
        from orchestrator.job.protocol import check_cudagraphs

        check_cudagraphs(ctx)
    if ctx.device.type == "cuda":  # in this process, one request a side (bench.memory: processes)
        with ctx.clock.phase("memory"):
            one = partial(request, ctx, decoder=decoder, prompt=prompt, pos=pos)
            r.memory = generation_checks.peak_memory(ctx, eager, compiled, decoder, one)
    parity.raise_if_failed(r.parity)  # after the speed figures: a failure keeps its timings


def _first_compiled(
    ctx: JobContext, side: GenSide, decoder: Decoder, prompt: torch.Tensor, pos: list, eager: Request
) -> Request:
    """The compiled side's first request, with what it compiled: frames, recompiles, graph breaks."""
    from torch._dynamo.utils import counters

    counters.clear()
    with compile_cost.frames_compiled() as metrics:
        first = request(ctx, side, decoder, prompt, pos)
    if not ctx.compiled_mode:
        return first
    out, r = ctx.result.generation, ctx.result
    assert out is not None
    reasons = [m for m in compile_cost.recompiles(metrics) if m != NO_REASON]
    frames = len(compile_cost.compiled(metrics))
    out.gen_frames, out.gen_recompiles, out.gen_recompile_reasons = frames, len(reasons), reasons[:3]
    out.gen_compile_s = max(first.e2e_s - eager.e2e_s, 0.0)
    out.gen_recompile_s = compile_cost.recompile_seconds(metrics)
    breaks = dict(counters["graph_break"])
    r.explain = Explain(
        explain_graphs=int(counters["stats"]["unique_graphs"]),
        graph_breaks=sum(breaks.values()),
        break_reasons=[{"reason": " ".join(str(k).split())[:400], "where": None} for k in breaks],
        explain_note="counted over the compiled side's first request (dynamo's counters), not by explain",
    )
    r.compile = CompileCost(
        first_call_s=first.e2e_s,
        compile_s=out.gen_compile_s,
        graphs=int(counters["stats"]["unique_graphs"]),
        frames_ok=len(metrics),
        metrics=compile_cost.summarize(metrics),
    )
    return first


def _timed(
    ctx: JobContext, sides: dict[str, GenSide], decoder: Decoder, prompt, pos
) -> dict[str, list[Request]]:
    """One untimed request per side, then `bench.repeats` per side in alternating order; each
    repetition's median decode token into ctx.timings (`<side>_ms`), every token (`<side>_step_ms`)."""
    b, t = ctx.cfg.bench, ctx.timings
    names = list(sides)
    for name in names:  # one untimed request each, whatever bench.warmup (CUDA graphs record by now)
        request(ctx, sides[name], decoder, prompt, pos)
    runs: dict[str, list[Request]] = {n: [] for n in names}
    for i in range(b.repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            run = request(ctx, sides[name], decoder, prompt, pos)
            runs[name].append(run)
            decode_ms = [s * 1000 for s in run.decode_s] or [run.ttft_s * 1000]
            t.setdefault(f"{name}_ms", []).append(statistics.median(decode_ms))
            t.setdefault(f"{name}_step_ms", []).extend(decode_ms)
        t.setdefault("process", []).append(0)
    return runs


def _summarize(ctx: JobContext, out: Generation, runs: dict, firsts: tuple[Request, Request]) -> None:
    """The speed section (per-token decode latency: table, verdict, compare) and the serving figures."""
    b, t = ctx.cfg.bench, ctx.timings
    ctx.result.speed = speed.summarize(ctx)
    for name, fig, first in zip(("eager", "compiled"), (out.eager, out.compiled), firsts, strict=True):
        pct = percentiles(t[f"{name}_step_ms"], (50, 90))
        fig.decode_p50_ms, fig.decode_p90_ms = pct.get(50), pct.get(90)
        fig.ttft_ms = statistics.median(run.ttft_s * 1000 for run in runs[name])
        fig.e2e_ms = statistics.median(run.e2e_s * 1000 for run in runs[name])
        fig.first_request_s, fig.first_ttft_ms = first.e2e_s, first.ttft_s * 1000  # cold
        decoding = [run for run in runs[name] if run.decode_s]  # none where a request is one token
        per_s = [ctx.wl.batch_size * len(run.decode_s) / sum(run.decode_s) for run in decoding]
        fig.decode_tokens_per_s = statistics.median(per_s) if per_s else None

    # the requests alternate, so each repetition is a pair
    pairs = {
        a: [[getattr(r, a) for r in runs[n]] for n in ("eager", "compiled")] for a in ("ttft_s", "e2e_s")
    }
    ci = partial(median_ratio_ci, resamples=b.bootstrap, seed=b.seed)
    out.gen_ttft_speedup, out.gen_ttft_ci_low, out.gen_ttft_ci_high = ci(*pairs["ttft_s"])
    out.gen_e2e_speedup, out.gen_e2e_ci_low, out.gen_e2e_ci_high = ci(*pairs["e2e_s"])
