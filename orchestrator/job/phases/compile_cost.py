"""Compile cost that does not depend on job order: where the seconds went, and the caches' part
(with the compile's portable cache artifacts, which the portable probe loads).

Torch records every frame it compiles (`torch._dynamo.utils.get_compilation_metrics()`): nested
cumulative times for dynamo, AOT autograd, inductor and its code generation, kernel compile and
autotune times, cache hits and misses, guard counts, recompile and CUDA-graph-skip reasons. The
phases below are the differences of the nested times, so they add up to no more than the wall
time of the call that compiled.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
import torch._inductor.config

from orchestrator.core.result import COMPILE_PHASES, NO_REASON, CompileMetrics

US = 1e-6
ARTIFACTS_FILE = "compile_artifacts.bin"
# Exclusive phases, from the nested cumulative times (microseconds) of each compiled frame; the
# `backward` phase is the AOT part of a backward graph compiled at its first call (its inductor and
# code-generation seconds count in those phases).
# Counts summed over frames: result field -> torch's compilation-metrics field.
COUNTED = {
    "fx_cache_hits": "inductor_fx_local_cache_hit_count",
    "fx_cache_misses": "inductor_fx_local_cache_miss_count",
    "aot_cache_hits": "aotautograd_local_cache_hit_count",
    "aot_cache_misses": "aotautograd_local_cache_miss_count",
    "guard_count": "guard_count",
    "graph_ops": "graph_op_count",  # ops in the captured graphs: what the scope compiled
}


def _us(metric: object, name: str) -> float:
    return float(getattr(metric, name, None) or 0) * US


def summarize(metrics: list) -> CompileMetrics:
    """Phases (s), cache hits and misses, guards and reasons, summed over compiled frames (and the
    run-time entries, for the autotuning done at run time)."""
    phases = dict.fromkeys(COMPILE_PHASES, 0.0)
    out = CompileMetrics(compile_frames=len(compiled(metrics)))
    counts: dict[str, Any] = dict.fromkeys(COUNTED, 0)
    for m in metrics:
        inductor = _us(m, "inductor_cumulative_compile_time_us")
        codegen = _us(m, "inductor_code_gen_cumulative_compile_time_us")
        if getattr(m, "is_forward", True) is False:
            # A backward compiled at its first call: its own entry, nested backward > inductor > codegen.
            phases["backward"] += max(_us(m, "backward_cumulative_compile_time_us") - inductor, 0.0)
        else:
            dynamo = _us(m, "dynamo_cumulative_compile_time_us")
            aot = _us(m, "aot_autograd_cumulative_compile_time_us")
            phases["dynamo"] += max(dynamo - aot, 0.0)
            phases["aot_autograd"] += max(aot - inductor, 0.0)
        phases["inductor"] += max(inductor - codegen, 0.0)
        phases["codegen"] += codegen
        out.compile_kernel_s += _us(m, "triton_compile_time_us")
        out.compile_autotune_s += _us(m, "compile_time_autotune_time_us") + _us(
            m, "runtime_triton_autotune_time_us"
        )
        for key, name in COUNTED.items():
            counts[key] += int(getattr(m, name, None) or 0)
        if getattr(m, "recompile_reason", None):
            out.recompile_reasons.append(str(m.recompile_reason)[:300])
        if getattr(m, "cudagraph_skip_reason", None):
            out.cudagraph_skip_reasons.append(str(m.cudagraph_skip_reason)[:300])
    phase_s: dict[str, Any] = {f"phase_{k}_s": v for k, v in phases.items()}
    out = dataclasses.replace(out, **counts, **phase_s)
    out.compile_cache_hits = out.fx_cache_hits + out.aot_cache_hits
    return out


def compiled(metrics: list) -> list:
    """The entries of frames compiled: not those torch records at run time (`is_runtime`: the
    seconds a CUDA graph took to record on a reduce-overhead step's first runs, `cudagraphify`'s
    `dynamo_timed`), which compile nothing. On an H100 every reduce-overhead job had one in its
    warm-up, read as a frame compiled there (benchmarks/h200-harness-beside/README.md)."""
    return [m for m in metrics if getattr(m, "is_runtime", False) is not True]


def recompiles(metrics: list) -> list[str]:
    """The forward frames among `metrics` (a backward compiles with its forward), each by its
    recompile reason (the guard that failed), those with a failed guard first (the first three are
    kept)."""
    forward = [m for m in compiled(metrics) if getattr(m, "is_forward", True) is not False]
    reasons = [str(getattr(m, "recompile_reason", None) or NO_REASON)[:300] for m in forward]
    return sorted(reasons, key=lambda r: r == NO_REASON)


def recompile_seconds(metrics: list) -> float:
    """Seconds dynamo spent on the frames it compiled again (a guard failed), whole frames."""
    again = [m for m in metrics if getattr(m, "recompile_reason", None)]
    return sum(float(getattr(m, "entire_frame_compile_time_s", None) or 0.0) for m in again)


def compilation_metrics() -> list:
    from torch._dynamo.utils import get_compilation_metrics

    return list(get_compilation_metrics())


def clear_compilation_metrics() -> None:
    from torch._dynamo.utils import clear_compilation_metrics as clear

    clear()


def save_artifacts(job_dir: Path) -> Path | None:
    """The compile's portable cache artifacts (`torch.compiler.save_cache_artifacts`), to a file."""
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return None
    path = job_dir / ARTIFACTS_FILE
    path.write_bytes(saved[0])
    return path


@contextmanager
def frames_compiled() -> Iterator[list]:
    """The compilation metrics of the frames compiled inside the block: counted from empty (torch
    keeps its last 64 entries, so a slice by an earlier count can miss frames)."""
    clear_compilation_metrics()
    frames: list = []
    try:
        yield frames
    finally:
        frames.extend(compilation_metrics())


@contextmanager
def recompile_limit_lines() -> Iterator[list[str]]:
    """Dynamo's warnings that a frame hit its recompile limit (that frame then runs eager), as said."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if "hit config." in text:
                said.append(" ".join(text.splitlines()[:2]).strip()[:300])

    log, handler = logging.getLogger("torch._dynamo.convert_frame"), Keep(logging.WARNING)
    log.addHandler(handler)
    try:
        yield said
    finally:
        log.removeHandler(handler)
