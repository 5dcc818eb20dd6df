"""Stacked follow-ups: the best setting found by applying one measured lever after another.

From a model's named setting, each step applies the lever of the largest cause still slowing the best
job so far (its `still:`), on top of the levers that gained before it. A step gains when its speedup's
CI lies above the best so far: it joins the stack. A step that loses (its CI below) or fails is
reported and dropped, and the next cause's lever is tried from the same best. The walk stops when no
cause names a lever still untried, when a step's gain lies inside its CI, or after
`verdict.max_follow_ups` steps. A step's job holds every lever of its stack (`lever` reads
`A + B`), so that its id is stable: a resumed sweep replays the walk over the jobs it finds and runs
only the next step that has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from orchestrator.analysis.answers import Cause
from orchestrator.analysis.causes import causes, ran_on_cuda
from orchestrator.analysis.suite import passed_job
from orchestrator.config.schema import CUDAGRAPH_MODES
from orchestrator.core.numbers import number
from orchestrator.core.result import COL

SEPARATOR = " + "  # between the levers of a stack, in a follow-up's `lever`
# Levers that do nothing on a CPU: CUDA graphs, TF32, the math attention kernel's reduced precision,
# autotuning's GPU kernels, and a materialized mask (the CPU's fused attention takes an expanded one).
CUDA_ONLY = (
    "compile.mode=reduce-overhead",
    "compile.mode=max-autotune",
    "compile.mode=max-autotune-no-cudagraphs",
    "bench.matmul_precision=high",
    "bench.sdp_reduced_math=true",
    "workload.attention_mask=true",
)


def stacked(stack: list[str], lever: str) -> list[str]:
    """`stack` with `lever` on top. Autotuning without CUDA graphs on a stack that holds them is
    `max-autotune` (both); a later value of a key replaces an earlier one when applied."""
    if lever == "compile.mode=max-autotune-no-cudagraphs" and any(
        lv.startswith("compile.mode=") and lv.partition("=")[2] in CUDAGRAPH_MODES for lv in stack
    ):
        lever = "compile.mode=max-autotune"
    return [*stack, lever]


@dataclass
class Step:
    """One step of the walk: the job with `levers` applied, and what it did against the best before it."""

    levers: list[str]
    cause: str  # the kind of cause of the best before it whose lever this step added
    row: pd.Series
    outcome: str  # gain (joins the stack), within_ci (the walk stops), loses or failed (dropped)
    before: pd.Series  # the best job before this step (the named setting's for the first)


def _judge(best: pd.Series, row: pd.Series) -> str:
    if not passed_job(row):
        return "failed"
    base = number(best.get(COL.speedup)) or 0.0
    low, high = number(row.get(COL.speedup_ci_low)), number(row.get(COL.speedup_ci_high))
    if low is not None and low > base:
        return "gain"
    if high is not None and high < base:
        return "loses"
    return "within_ci"


def _measured_already(rows: pd.DataFrame, lever: str) -> bool:
    """Whether a job of the model's own sweep already runs with the lever's value."""
    key, _, value = lever.partition("=")
    column = {
        "compile.dynamic": COL.dynamic,
        "compile.mode": COL.mode,
        "bench.matmul_precision": COL.num_matmul_precision,
        "bench.sdp_reduced_math": COL.num_sdp_reduced_math,
        "generate.cache": COL.kv_cache,
        "workload.attention_mask": COL.attention_mask,
    }.get(key)
    if column is None or column not in rows:
        return False
    return any(str(v).lower() == value.lower() for v in rows[column])


def next_cause(best: pd.Series, stack: list[str], tried: set[str], model: pd.DataFrame) -> Cause | None:
    """The largest cause slowing `best` whose lever is not in the stack, not tried and dropped, acts on
    the device, and (for the first step) is not measured by the sweep's own jobs already."""
    on_cpu = not ran_on_cuda(best)
    for cause in causes(best):
        lever = cause.lever
        if lever is None or lever in stack or lever in tried or (on_cpu and lever in CUDA_ONLY):
            continue
        if not stack and _measured_already(model, lever):
            continue
        return cause
    return None


def walk(
    named: pd.Series, follow_ups: pd.DataFrame, model: pd.DataFrame, budget: int
) -> tuple[list[Step], list[str] | None]:
    """Replay the walk from the named setting's job over the follow-ups that ran (`follow_ups`: the
    model's, any order): the steps so far, and the stack of the next step to run (None: the walk
    ended). `model`: the model's own jobs, `budget`: `verdict.max_follow_ups`."""
    ran = {row[COL.lever]: row for _, row in follow_ups.iterrows() if isinstance(row.get(COL.lever), str)}
    best = named
    stack: list[str] = []
    tried: set[str] = set()
    steps: list[Step] = []
    while len(steps) < budget:
        cause = next_cause(best, stack, tried, model)
        if cause is None or cause.lever is None:
            return steps, None
        levers = stacked(stack, cause.lever)
        row = ran.get(SEPARATOR.join(levers))
        if row is None:
            return steps, levers
        outcome = _judge(best, row)
        steps.append(Step(levers, cause.kind, row, outcome, best))
        if outcome == "gain":
            best, stack = row, levers
        elif outcome == "within_ci":
            return steps, None
        else:
            tried.add(cause.lever)
    return steps, None


def best_of(steps: list[Step]) -> Step | None:
    """The last step that gained: the best setting found (None: no step gained)."""
    gained = [s for s in steps if s.outcome == "gain"]
    return gained[-1] if gained else None
