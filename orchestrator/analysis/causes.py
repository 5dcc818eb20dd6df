"""Why a compiled setting is slower or faster than eager, from what its job measured: the share of the
forward graph breaks leave eager, recompiles over the shape schedule and inside the timed steps,
recompiles over a generation request and a frame past dynamo's recompile limit, CUDA-graph skips,
and, from the profile pass (`verdict.profile`, or `bench.profile=true`), an eager step that leaves
the GPU idle (launch-bound) and a compiled step whose GPU waits between kernels (`idle.py`), the compiled
call's own host overhead (guards, the compiled region's wrapper) and the kernels a step runs on each
side (fusion). Each cause carries its number, the milliseconds of a step it accounts for where
those are measured, and the setting that addresses it where one is known. Nothing here is inferred
from the model's kind or size: a cause without its measurement is not named. A profile pass unlike the
timed steps is not quoted (`idle.representative`). One cause per measurement."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from orchestrator.analysis.answers import Cause
from orchestrator.analysis.idle import idle_causes, representative
from orchestrator.core.numbers import is_false, number
from orchestrator.core.result import COL, NO_REASON
from orchestrator.results.present import duration

LEFT_EAGER = 0.05  # a share of the forward left eager worth naming
FEWER_KERNELS = 1.5  # eager kernels over compiled worth naming as fusion
OVERHEAD_SHARE = 0.1  # the compiled call's own overhead, as a share of its step, worth naming
OPTIMIZER_SHARE = 0.1  # an eager optimizer step, as a share of the compiled training step, worth naming
SPLIT_SHARE = 0.05  # a kind of kernel whose time moved by this share of the compiled step is named
MOSTLY = 0.5  # a share of the forward left eager that makes graph breaks the first cause


def listed(row: pd.Series, key: str) -> list[Any]:
    """A list field of a table row ([] where the job has none)."""
    value = row.get(key)
    return value if isinstance(value, list) else []


def _dynamic(row: pd.Series) -> bool:
    """The job compiled with `compile.dynamic=true` (False: static, or automatic)."""
    dynamic = row.get(COL.dynamic)  # a bool, or numpy's in a column of bools only; None: automatic
    return dynamic is not None and not pd.isna(dynamic) and bool(dynamic)


def ran_on_cuda(row: pd.Series) -> bool:
    """The job ran on a GPU: its CUDA version is recorded (NaN, where a table's other rows lack the
    key, is truthy: never read as a GPU)."""
    return isinstance(row.get(COL.env_cuda), str) and bool(row.get(COL.env_cuda))


def top_break_reason(row: pd.Series) -> str:
    """The commonest graph-break reason's first line (60 characters); '' where no break is listed."""
    lines = (str(b.get("reason") or "no reason given").splitlines() for b in listed(row, COL.break_reasons))
    reasons = Counter(text[0][:60] for text in lines if text)
    return reasons.most_common(1)[0][0] if reasons else ""


def cudagraph_skips_text(row: pd.Series) -> str | None:
    """CUDA graphs skipped, how often and the first reason; None where they never were."""
    skips = number(row.get(COL.cudagraph_skips)) or 0
    if skips <= 0:
        return None
    why = (listed(row, COL.cudagraph_skip_reasons) or ["no reason recorded"])[0][:60]
    return f"CUDA graphs skipped {skips:.0f}x ({why})"


def causes(row: pd.Series) -> list[Cause]:
    """The measured causes of one compiled job's speedup, the largest first: those with milliseconds
    attributed by them, then the others as measured (graph breaks, recompiles, skips)."""
    row, unrepresentative = representative(row)  # a profile pass unlike the timed steps: not quoted
    found: list[Cause] = []
    fraction, breaks = number(row.get(COL.compiled_fraction)), number(row.get(COL.graph_breaks)) or 0
    if breaks > 0 and fraction is not None and 1 - fraction >= LEFT_EAGER:
        top = top_break_reason(row)
        text = f"graph breaks leave {1 - fraction:.0%} of the forward eager ({breaks:.0f} breaks" + (
            f"; top: {top})" if top else ")"
        )
        found.append(Cause("graph_breaks", 1 - fraction, None, text, None))  # the model's to change
    recompiles = number(row.get(COL.dyn_recompiles)) or 0
    if recompiles > 0:
        seconds = number(row.get(COL.dyn_compile_s))
        lever = None if _dynamic(row) else "compile.dynamic=true"
        text = f"{recompiles:.0f} recompile(s) over the shape schedule (+{duration(seconds)} of compiling)"
        found.append(Cause("recompiles", recompiles, None, text, lever, affects="compile"))
    found += _generation_causes(row)
    again = number(row.get(COL.step_recompiles)) or 0
    unguarded = all(r == NO_REASON for r in listed(row, COL.step_recompile_reasons))
    if again > 0:
        why = (listed(row, COL.step_recompile_reasons) or [NO_REASON])[0]
        guard = " ".join(why.split("#")[0].split())[:80]  # the failed guard, without its source line
        lever = "compile.dynamic=true" if "size mismatch" in why and not _dynamic(row) else None
        text = f"{again:.0f} recompile(s) inside the warm-up and timed steps (guard that failed: {guard})"
        if unguarded:  # a frame compiled there with no guard failing: not a recompile to name a guard of
            text = f"{again:.0f} frame(s) compiled inside the warm-up and timed steps (no failed guard)"
        found.append(Cause("step_recompiles", again, None, text, lever))
    skipped = cudagraph_skips_text(row)
    if skipped is not None:
        found.append(Cause("cudagraph_skips", number(row.get(COL.cudagraph_skips)), None, skipped, None))
    found += idle_causes(row)
    overhead = number(row.get(COL.compiled_overhead_ms_per_step))
    compiled_ms = number(row.get(COL.compiled_ms))
    if overhead and compiled_ms and overhead / compiled_ms >= OVERHEAD_SHARE:
        text = (
            f"the compiled call's own overhead (guards, the compiled region's wrapper) takes "
            f"{overhead:.3g} ms of its {compiled_ms:.3g} ms step"
        )
        found.append(Cause("overhead", overhead / compiled_ms, overhead, text, None))
    found += _optimizer_cause(row, compiled_ms)
    kernels = number(row.get(COL.eager_kernels_per_step)), number(row.get(COL.compiled_kernels_per_step))
    if kernels[0] and kernels[1] and kernels[0] / kernels[1] >= FEWER_KERNELS:
        said = row.get(COL.profile_unit)  # absent, None or NaN in a table where not recorded
        unit = said.split(" (")[0] if isinstance(said, str) and said else "kernels"
        text = f"fusion: {kernels[1]:.0f} {unit} a step compiled against {kernels[0]:.0f} eager"
        found.append(Cause("fusion", kernels[0] / kernels[1], None, text, None))
    found += _split_causes(row)
    fp32, matmuls = number(row.get(COL.graph_fp32_matmuls)), number(row.get(COL.graph_matmuls))
    if fp32 and matmuls and ran_on_cuda(row) and row.get(COL.num_matmul_precision) == "highest":
        text = f"{fp32:.0f} of the compiled graph's {matmuls:.0f} matmuls a forward run in float32, TF32 off"
        found.append(Cause("fp32_matmuls", fp32, None, text, "bench.matmul_precision=high"))
    # What keeps most of the forward from running compiled comes first: the compiled step's other
    # figures then describe mostly eager code. A frame compiled with no failed guard is not known to
    # recompile the timed code (results before 2026-12-06 counted a CUDA graph's recording as one):
    # it goes with the causes that have no milliseconds.
    first = [
        c
        for c in found
        if c.kind == "recompile_limit"
        or (c.kind == "step_recompiles" and not unguarded)
        or (c.kind == "graph_breaks" and c.value is not None and c.value >= MOSTLY)
    ]
    rest = [c for c in found if c not in first]
    timed = [c for c in rest if c.ms_per_step is not None]
    untimed = [c for c in rest if c.ms_per_step is None]
    untimed.sort(key=lambda c: c.kind == "matmul_bound")  # autotuning last: after precision levers
    note = [unrepresentative] if unrepresentative else []  # last: a note, never the answer's cause
    return first + sorted(timed, key=lambda c: -(c.ms_per_step or 0.0)) + untimed + note


def _optimizer_cause(row: pd.Series, compiled_ms: float | None) -> list[Cause]:
    """Training: the optimizer step, run eager, takes a large share of the compiled step (compiling it
    too is `compile.optimizer=true`)."""
    ms = number(row.get(COL.compiled_optimizer_ms_per_step))
    compiled_already = number(row.get(COL.compile_optimizer_s)) is not None  # compile.optimizer=true
    if not ms or not compiled_ms or compiled_already or ms / compiled_ms < OPTIMIZER_SHARE:
        return []
    text = f"the optimizer step runs eager: {ms:.3g} ms of the {compiled_ms:.3g} ms compiled step"
    return [Cause("optimizer", ms / compiled_ms, ms, text, "compile.optimizer=true")]


def _generation_causes(row: pd.Series) -> list[Cause]:
    """`bench.task=generate`: a frame past dynamo's recompile limit (it then ran eager, counted as
    compiled), and the recompiles over one request (a dynamic cache's key length grows every token)."""
    found = []
    count = number(row.get(COL.gen_recompiles)) or 0
    static = row.get(COL.kv_cache) == "static"
    lever = "generate.cache=static" if not static else None if _dynamic(row) else "compile.dynamic=true"
    limit = row.get(COL.gen_recompile_limit)
    if isinstance(limit, str) and limit:
        text = (
            f"dynamo hit its recompile limit within a request: that frame ran eager after it ({limit[:90]})"
        )
        found.append(Cause("recompile_limit", count, None, text, lever))
    elif count > 0:
        seconds = number(row.get(COL.gen_recompile_s))
        text = f"{count:.0f} recompile(s) over one request (+{duration(seconds)} of compiling)"
        found.append(Cause("recompiles", count, None, text, lever, affects="compile"))
    return found


def _kind_lever(row: pd.Series, kind: str, attention_as_matmuls: bool) -> str | None:
    """The setting that speeds a kind of kernel up where the job ran without it (a GPU's numerics).
    Matmuls that replace eager's fused attention kernel are the math attention path's: where the
    graph's masks are expanded (no fused kernel takes one), an attention mask of the model's own;
    else the math path's reduced precision. A slower fused attention kernel has none: the math path's
    precision does not move it (Llama on an H100: 2.05 ms, 2.09 with it), and on a GPU the math path
    runs no attention kernel of its own (it is matmuls and a softmax, the first case)."""
    if not ran_on_cuda(row):
        return None
    as_math = kind == "matmul" and attention_as_matmuls
    if as_math and _expanded_masks(row) and is_false(row.get(COL.attention_mask)):
        return "workload.attention_mask=true"  # a materialized mask: the fused kernel takes it
    if as_math and is_false(row.get(COL.num_sdp_reduced_math)):
        return "bench.sdp_reduced_math=true"
    fp32 = number(row.get(COL.graph_fp32_matmuls))  # None: an older result, not counted
    if kind == "matmul" and row.get(COL.num_matmul_precision) == "highest" and fp32 != 0:
        return "bench.matmul_precision=high"  # float32 matmuls on TF32 tensor cores; none: it does nothing
    return None


def _pointwise(split: dict[str, Any]) -> dict[str, Any]:
    """Inductor's generated kernels do what eager's elementwise kernels did (fused): one kind."""
    out = {k: v for k, v in split.items() if k not in ("fused", "elementwise")}
    both = (number(split.get("fused")) or 0.0) + (number(split.get("elementwise")) or 0.0)
    return out | ({"elementwise": both} if "fused" in split or "elementwise" in split else {})


def kind_split(row: pd.Series, side: str) -> dict[str, Any]:
    """A side's milliseconds a step by kind of kernel, inductor's fused kernels counted as
    elementwise; {} where the profile measured none."""
    split = row.get(getattr(COL, f"{side}_time_split"))
    return _pointwise(split) if isinstance(split, dict) else {}


def _expanded_masks(row: pd.Series) -> int:
    """SDPA calls given an expanded mask in the graph (job/phases/graphs.py); 0: none, or not counted."""
    return int(number(row.get(COL.graph_expanded_masks)) or 0)


def _masks_text(row: pd.Series) -> str:
    """Where the compiled graph passes its attention calls a mask (or bias) more often than eager's
    forward does (transformers builds the causal mask while dynamo traces, before torch 2.14), how
    often each side does; '' where as often, or not counted."""
    graph, masked = number(row.get(COL.graph_attention)), number(row.get(COL.graph_masked_attention))
    eager = number(row.get(COL.forward_attention))
    eager_masked = number(row.get(COL.forward_masked_attention))
    if not graph or masked is None or eager_masked is None or masked <= eager_masked:
        return ""
    return (
        f"; the compiled graph passes a mask to {masked:.0f} of its {graph:.0f} attention calls, "
        f"eager to {eager_masked:.0f} of {eager or 0:.0f}"
    )


def _split_causes(row: pd.Series) -> list[Cause]:
    """Where the step's time moved between the sides, by kind of kernel (the profile's time split):
    a kind that takes longer compiled is a cause of slowness, one that takes less a cause of a gain."""
    eager, compiled = kind_split(row, "eager"), kind_split(row, "compiled")
    compiled_ms = number(row.get(COL.compiled_ms))
    if not eager or not compiled or not compiled_ms:
        return []
    # Eager ran a fused attention kernel and the compiled step none: its attention runs as matmuls.
    as_matmuls = (number(eager.get("attention")) or 0.0) > 0 and not number(compiled.get("attention"))
    out = []
    for kind in dict.fromkeys([*compiled, *eager]):
        if kind == "host":  # the compiled call's own overhead: the `overhead` cause names it
            continue
        e, c = number(eager.get(kind)) or 0.0, number(compiled.get(kind)) or 0.0
        if abs(c - e) < SPLIT_SHARE * compiled_ms:
            continue
        slower = c > e
        named = "elementwise (fused or not)" if kind == "elementwise" else kind
        text = f"{named} kernels take {c:.3g} ms a compiled step against {e:.3g} ms eager"
        ran = [row.get(k) for k in (COL.eager_attention_backend, COL.compiled_attention_backend)]
        ran = [b if isinstance(b, str) else "" for b in ran]  # older results: absent, or NaN in a table
        if kind == "attention" and ran[0] and ran[0] != ran[1]:  # which attention kernel each side ran
            text += f" ({ran[0]} eager, {ran[1]} compiled)"
        if kind == "attention" and slower:
            text += _masks_text(row)
        if kind == "matmul" and slower and as_matmuls:
            eagers = f"eager's {ran[0]}" if ran[0] else "eager's"
            text += (
                f", and no fused attention kernel ran compiled ({eagers} took {eager['attention']:.3g} ms)"
            )
            if expanded := _expanded_masks(row):
                text += (
                    f": the compiled graph passes {expanded} attention call(s) an expanded mask (stride 0 "
                    "along its last dimension), which no fused GPU kernel takes"
                )
        lever = _kind_lever(row, kind, as_matmuls) if slower else None
        out.append(Cause(f"{kind}_{'slower' if slower else 'faster'}", c - e, abs(c - e), text, lever))
    return out


def slowing(found: list[Cause], affects: str = "step") -> list[Cause]:
    """The causes that slow a setting (fusion and what runs faster left out) by what they cost."""
    faster = [c for c in found if c.kind == "fusion" or c.kind.endswith("_faster")]
    return [c for c in found if c.affects == affects and c not in faster]


def cause_line(found: list[Cause], speedup: float | None, ci: list[float | None], outcome: str) -> str | None:
    """The sentence the answer carries: why slower (or no gain) where the setting is slower than eager,
    gains under 10% or its CI includes 1, from what costs the step time (for a gain never paid back,
    then compile time, where the step shows none); where the gain is there but its compile is never
    paid back, from what costs compile time; why faster where it gains, and what holds the gain back
    (the largest cause that slows its step), where one is measured."""
    low = ci[0]
    gains = speedup is not None and speedup >= 1.1 and low is not None and low > 1
    if gains and outcome != "eager_cost":
        faster = [c for c in found if c.kind in ("fusion", "launch_bound") or c.kind.endswith("_faster")]
        if not faster:
            return None
        held = slowing(found)
        return f"why faster: {faster[0].text}" + (f"; held back by: {held[0].text}" if held else "")
    wanted_first = ("step", "compile") if outcome == "eager_cost" else ("step",)
    for wanted in ("compile",) if gains else wanted_first:
        slower = slowing(found, wanted)
        if slower:
            return f"why: {slower[0].text}"
    return None
