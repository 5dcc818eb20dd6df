"""Idle time, measured on both sides of a job on a GPU: a launch-bound eager step (its kernels fill
under half of it) and a compiled step whose GPU waits between its kernels. A side's kernel time is
what its profile pass measured, the union of its kernel intervals a step (`busy_fraction` of the
profiled step); its idle time is its timed step less that. The profiled step is longer than the
timed one (the profiler's own host cost), so its busy fraction alone reads idle time high: 28%
against 50% for BERT-base inference's eager step on an H100 (`benchmarks/h200-answers/`)."""

from __future__ import annotations

import pandas as pd

from orchestrator.analysis.answers import Cause
from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.numbers import number
from orchestrator.core.result import COL

PROFILE_STRETCH = 3.0  # the profiler's own host cost stretches a launch-bound step up to about 2x
PROFILE_SLACK_MS = 2.0  # and adds its own time per op: a tiny CPU step of 0.17 ms profiled at 1.3 ms
PROFILED = ("time_split", "busy_fraction", "profile_step_ms", "overhead_ms_per_step", "kernels_per_step")
BUSY = 0.9  # a compiled step whose kernels fill this share of it keeps the GPU busy
MATMUL_BOUND = 0.5  # ... and is matmul-bound where matmul (and convolution) kernels take this share
LAUNCH_BOUND = 0.5  # an eager step whose GPU is busy less than this share of it is launch-bound
IDLE_SHARE = 0.05  # a compiled step's idle time worth naming, as a share of the step


def representative(row: pd.Series) -> tuple[pd.Series, Cause | None]:
    """The row with the profile figures of any side whose profiled step is not its timed step (longer or
    shorter than the profiler's stretch or the timed steps' own spread allow: a host busy during the
    profile pass read a compiled step at 402 ms where the timed one was 3.10 ms) left out, so that no
    cause quotes their milliseconds; and the note that says so (None where every side is representative)."""
    off = []
    for side in ("eager", "compiled"):
        profiled = number(row.get(getattr(COL, f"{side}_profile_step_ms")))
        timed = number(row.get(getattr(COL, f"{side}_ms")))
        if not profiled or not timed:
            continue
        spread = max(PROFILE_STRETCH, (number(row.get(getattr(COL, f"{side}_p99_ms"))) or timed) / timed)
        if not 1 / spread <= profiled / timed <= spread and abs(profiled - timed) > PROFILE_SLACK_MS:
            off.append(f"its {side} step read {profiled:.3g} ms against {timed:.3g} ms timed")
    if not off:
        return row, None
    row = row.copy()
    for side in ("eager", "compiled"):
        for name in PROFILED:
            row[getattr(COL, f"{side}_{name}")] = None
    text = f"the profile pass was not representative ({'; '.join(off)}): no kernel time quoted from it"
    return row, Cause("profile_unrepresentative", len(off), None, text, None, affects="profile")


def kernel_ms(row: pd.Series, side: str) -> float | None:
    """A side's GPU kernel milliseconds a step, as its profile pass measured them; None where it
    measured none (a CPU, no pass, a failed one, an older result without the profiled step)."""
    busy = number(row.get(getattr(COL, f"{side}_busy_fraction")))
    step = number(row.get(getattr(COL, f"{side}_profile_step_ms")))
    return busy * step if busy and step else None


def _matmul_bound(row: pd.Series, compiled_ms: float | None, kernels: float | None) -> list[Cause]:
    """A compiled step that keeps the GPU busy, most of it in matmul (or convolution GEMM) kernels:
    autotuning them is the lever left (`max-autotune-no-cudagraphs`; stacked on CUDA graphs, it
    becomes `max-autotune`). No milliseconds: what autotuning saves is not measured until it runs,
    so it is tried after the causes whose time is."""
    split = row.get(COL.compiled_time_split)
    matmul = number(split.get("matmul")) if isinstance(split, dict) else None
    if not compiled_ms or kernels is None or not matmul or str(row.get(COL.mode)).startswith("max-autotune"):
        return []
    if kernels / compiled_ms < BUSY or matmul / compiled_ms < MATMUL_BOUND:
        return []
    text = (
        f"matmul kernels take {matmul:.3g} ms of a compiled step that keeps the GPU busy "
        f"({kernels / compiled_ms:.0%} of {compiled_ms:.3g} ms)"
    )
    return [
        Cause("matmul_bound", matmul / compiled_ms, None, text, "compile.mode=max-autotune-no-cudagraphs")
    ]


def idle_causes(row: pd.Series) -> list[Cause]:
    """A launch-bound eager step and a compiled step whose GPU waits between kernels. Eager's idle
    time is what compiling takes away: it explains a gain, not a slow compiled step; the compiled
    step's own idle time carries `reduce-overhead`, whose CUDA graphs remove it."""
    found: list[Cause] = []
    eager_ms, compiled_ms = number(row.get(COL.eager_ms)), number(row.get(COL.compiled_ms))
    eager_kernels, compiled_kernels = kernel_ms(row, "eager"), kernel_ms(row, "compiled")
    # CUDA graphs already on (max-autotune's too): reduce-overhead would remove nothing more
    lever = None if row.get(COL.mode) in CUDAGRAPH_MODES else "compile.mode=reduce-overhead"
    busy = number(row.get(COL.eager_busy_fraction))  # an older result's, of the profiled step
    if eager_kernels is not None and eager_ms:
        busy = min(eager_kernels / eager_ms, 1.0)  # the share of the timed step its kernels fill
    if busy is not None and eager_ms and busy < LAUNCH_BOUND:
        idle = eager_ms * (1 - busy)
        said = (
            f"eager's kernels fill {busy:.0%} of its {eager_ms:.3g} ms step"
            if eager_kernels is not None
            else f"eager keeps the GPU busy {busy:.0%} of its step"
        )
        text = f"{said}: launch-bound, {idle:.3g} ms a step idle"
        # where the compiled step's idle time is measured, `compiled_idle` carries the lever
        how = (None, "gain") if compiled_kernels is not None else (lever, "step")
        found.append(Cause("launch_bound", busy, idle, text, *how))
    found += _matmul_bound(row, compiled_ms, compiled_kernels)
    idle = compiled_ms - compiled_kernels if compiled_ms and compiled_kernels is not None else 0.0
    if compiled_ms and idle >= IDLE_SHARE * compiled_ms:
        text = (
            f"the compiled step leaves the GPU idle {idle:.3g} ms of its {compiled_ms:.3g} ms "
            f"(its kernels take {compiled_kernels:.3g} ms)"
        )
        found.append(Cause("compiled_idle", idle / compiled_ms, idle, text, lever))
    return found
