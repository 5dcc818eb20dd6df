"""What `bench.task=generate` checks beside its timings: teacher-forced parity, where greedy tokens
part, and each side's peak memory over a request (job/generation.py runs them).

Random weights leave the top logits of a decoder near-tied, so greedy tokens of two correct sides can
part at any token for reasons that are not a miscompile. Parity therefore feeds both sides eager's
tokens (teacher forcing) and compares every token's logits, each against the dtype's tolerance
(job/tolerance.py, the limit the other tasks use); the first token where free-running greedy tokens
differ is reported beside it, never used to pass or fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import torch

from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.stats import rel_error
from orchestrator.job.context import JobContext, synchronize
from orchestrator.job.result import Memory, Parity
from orchestrator.job.tolerance import PARITY_TOL, compute_dtype
from workloads.decoding import Decoder


class Side(Protocol):
    """A side as job/generation.py makes it: its prefill and decode step, and its own cache."""

    name: str
    prefill: Callable[..., torch.Tensor]
    decode: Callable[..., torch.Tensor]
    cache: Any


RULE = "teacher-forced: both sides fed eager's tokens; every token's logits within the dtype's tolerance"


def first_divergence(eager: torch.Tensor, compiled: torch.Tensor) -> int | None:
    """The first generated token (0: the prefill's) where any sequence's greedy tokens differ; None: none."""
    differs = (eager != compiled).any(dim=0).nonzero()
    return int(differs[0]) if len(differs) else None


def teacher_forced(
    ctx: JobContext, eager: Side, compiled: Side, decoder: Decoder, prompt: torch.Tensor, pos: list
) -> tuple[Parity, list[float]]:
    """Both sides step by step on eager's tokens, each with its own cache: each token's logits error."""
    errors = []
    eager.cache, compiled.cache = decoder.reset(eager.cache), decoder.reset(compiled.cache)
    with torch.no_grad():  # weights in bench.dtype (generation.py)
        e = eager.prefill(prompt, eager.cache, pos[0])
        ctx.mark_cudagraph_step()
        errors.append(rel_error([compiled.prefill(prompt, compiled.cache, pos[0])], [e]))
        for p in pos[1:]:
            token = e.argmax(-1)[:, None]
            e = eager.decode(token, eager.cache, p)
            ctx.mark_cudagraph_step()
            errors.append(rel_error([compiled.decode(token, compiled.cache, p)], [e]))
    tol = PARITY_TOL[compute_dtype(ctx.wl.model, ctx.cfg.bench.dtype)]
    worst = max(errors, key=lambda x: math.inf if math.isnan(x) else x)
    bad = [i for i, x in enumerate(errors) if not x <= tol]
    parity = Parity(
        parity_ok=not bad,
        parity_err=worst,
        parity_limit=tol,
        parity_tol=tol,
        parity_rule=RULE,
        parity_reference="eager",
        parity_out_err=worst,
    )
    if bad:
        parity.parity_error = (
            f"generated token {bad[0]}: compiled logits' relative error {errors[bad[0]]:.3g} is past "
            f"the tolerance {tol:g} ({len(bad)} of {len(errors)} tokens), both sides fed eager's tokens"
        )
    return parity, errors


def check_cache_path(ctx: JobContext, decoder: Decoder, side: Side, prompt: torch.Tensor, pos: list) -> None:
    """The prefill and one decode step over the side's cache give the last logits a forward of the
    whole sequence without a cache gives (eager, within the dtype's tolerance); else the cache is
    misused (a transformers version's keywords) and every figure after would be of a wrong model."""
    with torch.no_grad():  # weights in bench.dtype (generation.py)
        side.cache = decoder.reset(side.cache)
        token = decoder.forward(prompt, side.cache, pos[0]).argmax(-1)[:, None]
        cached = decoder.forward(token, side.cache, pos[1]) if len(pos) > 1 else None
        whole = decoder.full(torch.cat([prompt, token], 1)) if cached is not None else None
    if cached is None:
        return
    err = rel_error([cached], [whole])
    tol = PARITY_TOL[compute_dtype(ctx.wl.model, ctx.cfg.bench.dtype)]
    if not err <= tol:
        raise RuntimeError(
            f"the KV cache path disagrees with a forward without a cache ({type(decoder).__name__}, "
            f"{side.name} side's {decoder.kind} cache): relative error {err:.3g} > {tol:g}"
        )


def peak_memory(
    ctx: JobContext, eager: Side, compiled: Side, decoder: Decoder, run: Callable[[Side], Any]
) -> Memory:
    """Each side's peak allocated and reserved memory over one request (`run`: weights, its KV cache,
    activations), less the bytes the other side's cache holds meanwhile (one process holds both). A
    CUDA-graph replay allocates nothing: its pool is reserved, so the allocated peak leaves it out."""
    peaks, reserved = {}, {}
    for side, other in ((eager, compiled), (compiled, eager)):
        synchronize(ctx.device)
        torch.cuda.reset_peak_memory_stats(ctx.device)
        run(side)
        held = decoder.bytes(other.cache)
        peaks[side.name] = (torch.cuda.max_memory_allocated(ctx.device) - held) / 2**30
        reserved[side.name] = (torch.cuda.max_memory_reserved(ctx.device) - held) / 2**30
    out = Memory(memory_basis="one process, one request per side, the other side's KV cache left out")
    out.eager.peak_gib, out.compiled.peak_gib = peaks["eager"], peaks["compiled"]
    out.eager.reserved_gib, out.compiled.reserved_gib = reserved["eager"], reserved["compiled"]
    if ctx.cfg.compile.mode in CUDAGRAPH_MODES:
        out.memory_note = "the CUDA-graph pool is reserved, not allocated: compiled_reserved_gib holds it"
    out.memory_ratio = peaks["compiled"] / peaks["eager"] if peaks["eager"] else None
    return out
