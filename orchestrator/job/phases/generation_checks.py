"""What `bench.task=generate` checks beside its timings: teacher-forced parity, where greedy tokens
part, and each side's peak memory over a request (job/phases/generation.py runs them).

Random weights leave the top logits of a decoder near-tied, so greedy tokens of two correct sides can
part at any token for reasons that are not a miscompile. Parity therefore feeds both sides eager's
tokens (teacher forcing) and compares every token's logits by the rule parity.py applies to the
other tasks (PyTorch's accuracy checker's): within the dtype's tolerance of eager (job/phases/parity.py),
or else within `bench.parity_multiplier` times eager's own error against a reference of the same
weights upcast (fp64 up to `bench.fp64_max_params`, fp32 beyond) plus a tenth of the tolerance. The
reference is needed: with weights in bf16 (as served) a 16-layer 1B Llama's logits move 0.028-0.034
between two correct paths (H200, `benchmarks/h200-generate/run3-b1`), the tolerance itself. The first
token where free-running greedy tokens differ is reported beside it, never used to pass or fail.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.result import Memory, Parity
from orchestrator.core.stats import rel_error
from orchestrator.job.context import JobContext, synchronize
from orchestrator.job.phases.parity import PARITY_TOL, compute_dtype
from orchestrator.job.setup.compile_settings import matmul_precision
from workloads.decoding import Decoder, decoder_of


class ServedSide(Protocol):
    """A side as job/phases/generation.py makes it: its prefill and decode step, and its own cache."""

    @property
    def name(self) -> str: ...
    @property
    def prefill(self) -> Callable[..., torch.Tensor]: ...
    @property
    def decode(self) -> Callable[..., torch.Tensor]: ...

    cache: Any


@dataclass
class Reference:
    """The sides' weights upcast, with a cache of its own: what both sides' logits are measured
    against; `decoder` None where there is none (then the tolerance alone judges, `note` says why)."""

    decoder: Decoder | None
    name: str
    """`fp64` or `fp32`: the reference's dtype (`eager` where there is none)."""
    note: str | None = None

    def forward(self, ids: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor | None:
        if self.decoder is None:
            return None
        with matmul_precision("highest"):  # a true fp32 reference, whatever the job's numerics
            return self.decoder.forward(ids, cache, pos)

    def full(self, ids: torch.Tensor) -> torch.Tensor | None:
        if self.decoder is None:
            return None
        with matmul_precision("highest"):
            return self.decoder.full(ids)


def reference_of(ctx: JobContext, decoder: Decoder) -> Reference:
    """A copy of the model in fp64 (up to `bench.fp64_max_params`) or fp32 (its bf16/fp16 weights
    exactly, upcast), over a dynamic cache. None where the sides already compute in fp32 and fp64 is
    past the limit, or where the copy would not fit in half the GPU's free memory (a note says so).
    The caller drops it before the timed phases (a 1B model's fp32 copy is 5 GB)."""
    wide = ctx.wl.n_params <= ctx.cfg.bench.fp64_max_params
    if not wide and decoder.dtype == torch.float32:
        return Reference(None, "eager")
    dtype = torch.float64 if wide else torch.float32
    if ctx.device.type == "cuda":
        need, free = ctx.wl.n_params * dtype.itemsize, torch.cuda.mem_get_info(ctx.device)[0]
        if need > free / 2:
            why = f"the {dtype} reference ({need / 2**30:.1f} GiB) exceeds half the GPU's free memory"
            return Reference(None, "eager", f"{why}: judged by the dtype's tolerance of eager alone")
    model = copy.deepcopy(decoder.model).to(dtype)
    if ctx.device.type == "cuda":  # the bf16 copy's blocks, before the static caches are placed
        torch.cuda.empty_cache()
    ref = decoder_of(model, "dynamic", decoder.max_len, decoder.batch, dtype)
    return Reference(ref, "fp64" if wide else "fp32")


def judged(
    mine: torch.Tensor, eager: torch.Tensor, truth: torch.Tensor | None, tol: float, multiplier: float
) -> dict:
    """One token's logits by the rule: `close` (to eager) within `tol`, or `err` (to the reference
    `truth`) within `limit`: `multiplier` times eager's own error, plus a tenth of `tol`. `margin` is
    the better rule's error over its limit (at most 1: passed; NaN anywhere: infinite, never passes)
    and `by_tol` whether that rule is the tolerance's."""
    close = rel_error([mine], [eager])
    out: dict[str, Any] = {"close": close, "err": close, "eager_err": None, "limit": tol}
    by_tol = close / tol if close == close else math.inf
    by_ref = math.inf
    if truth is not None:
        err, eager_err = rel_error([mine], [truth]), rel_error([eager], [truth])
        limit = multiplier * eager_err + tol / 10
        out |= {"err": err, "eager_err": eager_err, "limit": limit}
        by_ref = err / limit if err == err and limit == limit else math.inf
    out |= {"margin": min(by_tol, by_ref), "by_tol": by_tol <= by_ref}
    out["ok"] = out["margin"] <= 1
    return out


def first_divergence(eager: torch.Tensor, compiled: torch.Tensor) -> int | None:
    """The first generated token (0: the prefill's) where any sequence's greedy tokens differ; None: none."""
    differs = (eager != compiled).any(dim=0).nonzero()
    return int(differs[0]) if len(differs) else None


def teacher_forced(
    ctx: JobContext,
    eager: ServedSide,
    compiled: ServedSide,
    decoder: Decoder,
    prompt: torch.Tensor,
    pos: list,
    ref: Reference,
) -> tuple[Parity, list[float]]:
    """Both sides (and the reference) step by step on eager's tokens, each with its own cache: each
    token's logits judged (`judged`); the per-token errors returned are the compiled side's to eager.
    The job's figures are its worst token's, under the rule that judged that token."""
    steps, tol = [], PARITY_TOL[compute_dtype(ctx.wl.model, ctx.cfg.bench.dtype)]
    eager.cache, compiled.cache = decoder.reset(eager.cache), decoder.reset(compiled.cache)
    ref_cache = ref.decoder.new_cache() if ref.decoder else None
    with torch.no_grad():  # weights in bench.dtype (generation.py)
        token = prompt
        for i, p in enumerate(pos):
            e = (eager.prefill if i == 0 else eager.decode)(token, eager.cache, p)
            ctx.mark_cudagraph_step()
            c = (compiled.prefill if i == 0 else compiled.decode)(token, compiled.cache, p)
            steps.append(judged(c, e, ref.forward(token, ref_cache, p), tol, ctx.cfg.bench.parity_multiplier))
            token = e.argmax(-1)[:, None]
    order = sorted(range(len(steps)), key=lambda i: steps[i]["margin"], reverse=True)
    worst, bad = steps[order[0]], [i for i, s in enumerate(steps) if not s["ok"]]
    parity = Parity(
        parity_ok=not bad,
        parity_err=worst["err"],
        parity_limit=worst["limit"],
        parity_tol=tol,
        parity_rule="within tol of eager" if worst["by_tol"] else f"{ref.name} rule",
        parity_reference=ref.name,
        parity_vs_eager=worst["close"],
        parity_eager_err=worst["eager_err"],
        parity_out_err=worst["err"],
        parity_note=ref.note,
        parity_worst=[
            {"tensor": f"logits of token {i}", "err": steps[i]["err"], "limit": steps[i]["limit"]}
            for i in order[:3]
        ],
    )
    if bad:
        b = steps[bad[0]]
        against = (
            f"{b['err']:.3g} from the {ref.name} reference > limit {b['limit']:.3g} and "
            if ref.decoder
            else ""
        )
        parity.parity_error = (
            f"generated token {bad[0]}: compiled logits {against}{b['close']:.3g} from eager > tolerance "
            f"{tol:g} ({len(bad)} of {len(steps)} tokens), both sides fed eager's tokens"
        )
    return parity, [s["close"] for s in steps]


def check_cache_path(
    ctx: JobContext, decoder: Decoder, side: ServedSide, prompt: torch.Tensor, pos: list, ref: Reference
) -> None:
    """The prefill and one decode step over the side's cache give the last logits a forward of the
    whole sequence without a cache gives (eager, judged by the rule against the reference's forward
    without a cache); else the cache is misused (a transformers version's keywords) and every figure
    after would be of a wrong model. The prefill runs whatever the length: it allocates the cache."""
    with torch.no_grad():  # weights in bench.dtype (generation.py)
        side.cache = decoder.reset(side.cache)
        token = decoder.forward(prompt, side.cache, pos[0]).argmax(-1)[:, None]
        if len(pos) < 2:
            return
        cached = decoder.forward(token, side.cache, pos[1])
        ids = torch.cat([prompt, token], 1)
        whole = decoder.full(ids)
        truth = ref.full(ids)
    tol = PARITY_TOL[compute_dtype(ctx.wl.model, ctx.cfg.bench.dtype)]
    step = judged(cached, whole, truth, tol, ctx.cfg.bench.parity_multiplier)
    if not step["ok"]:
        against = (
            f"; {step['err']:.3g} from the {ref.name} reference > {step['limit']:.3g}" if ref.decoder else ""
        )
        raise RuntimeError(
            f"the KV cache path disagrees with a forward without a cache ({type(decoder).__name__}, "
            f"{side.name} side's {decoder.kind} cache): relative error {step['close']:.3g} > {tol:g}{against}"
        )


def peak_memory(
    ctx: JobContext,
    eager: ServedSide,
    compiled: ServedSide,
    decoder: Decoder,
    run: Callable[[ServedSide], Any],
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
