"""Slurm job arrays no larger than the cluster allows, with `array_parallelism` held over all of them.

A sweep goes in as arrays of at most `MaxArraySize` tasks (read once from `scontrol show config`;
`launcher.max_array_size` can only lower it), near-equal in size, one set per job shape (ranks,
nodes, GPUs, time limit). To keep at most `array_parallelism` tasks running over all arrays, they
are dealt round-robin into `lanes = min(arrays, parallelism)`; each lane's arrays get an equal share
of the parallelism as their `%N`, and each array waits for the one before it in its lane
(`--dependency=afterany`). Slurm then enforces the limit itself: it holds while the orchestrator is
detached or gone, and no per-poll work is added (polling stays one `squeue` for the whole sweep).
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import math
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import submitit
from submitit.core.utils import FailedJobError, FailedSubmissionError

from orchestrator.config.schema import LauncherConfig
from orchestrator.core.failures import ConfigError

T = TypeVar("T")
SLURM_DEFAULT_MAX_ARRAY_SIZE = 1001
# Launcher settings that become #SBATCH lines: what a refused sbatch may be about.
SBATCH_KEYS: tuple[str, ...] = ("partition", "account", "qos", "time_min", "gpus_per_node", "cpus_per_task")
SBATCH_KEYS += ("mem_gb", "constraint", "exclude", "additional_parameters")


@dataclass
class Array(Generic[T]):
    """One sbatch --array: its jobs, their shared parameters, its %N and what it waits for."""

    specs: list[T]
    """The jobs, in sweep order (task i runs specs[i])."""
    params: dict[str, Any]
    """Per-job executor parameters shared by every job of the array."""
    parallelism: int
    """Its `%N`: this array's share of launcher.array_parallelism."""
    after: int | None
    """Index of the array it starts after (the previous one in its lane), or None."""


@functools.cache
def cluster_max_array_size() -> int | None:
    """MaxArraySize of the cluster `scontrol` talks to; None if it cannot be read."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out.stdout, re.MULTILINE)
    return int(match.group(1)) if match else None


def max_array_size(configured: int | None) -> int:
    """Most tasks per array: the smaller of the setting and the cluster's (Slurm's default if neither)."""
    known = [n for n in (configured, cluster_max_array_size()) if n]
    return max(1, min(known)) if known else SLURM_DEFAULT_MAX_ARRAY_SIZE


def plan_arrays(
    groups: list[tuple[dict[str, Any], list[T]]], max_size: int, parallelism: int
) -> list[Array[T]]:
    """Arrays of at most max_size jobs per group of one shape; at most `parallelism` tasks at once."""
    chunks: list[tuple[dict[str, Any], list[T]]] = []
    for params, specs in groups:
        parts = math.ceil(len(specs) / max_size)
        bounds = [round(i * len(specs) / parts) for i in range(parts + 1)]  # near-equal sizes
        chunks += [(params, specs[lo:hi]) for lo, hi in itertools.pairwise(bounds) if hi > lo]
    lanes = min(len(chunks), parallelism)
    return [
        Array(
            specs,
            params,
            parallelism // lanes + (1 if i % lanes < parallelism % lanes else 0),
            i - lanes if i >= lanes else None,
        )
        for i, (params, specs) in enumerate(chunks)
    ]


def submit_arrays(
    executor: submitit.Executor,  # a SlurmExecutor: the arrays are sbatch's
    launcher: LauncherConfig,
    specs: list[T],
    parameters_of: Callable[[T], dict[str, Any]],
    fn: Callable[..., Any],
) -> Iterator[tuple[list[T], list[submitit.Job]]]:
    """Submit `fn(spec)` for every spec; yields each array's specs and jobs as soon as it is queued
    (so the caller records it before the next sbatch). A refused sbatch is one ConfigError line."""
    groups: dict[str, list[T]] = {}
    for spec in specs:
        groups.setdefault(json.dumps(parameters_of(spec), sort_keys=True), []).append(spec)
    size = max_array_size(launcher.max_array_size)
    arrays = plan_arrays([(json.loads(k), g) for k, g in groups.items()], size, launcher.array_parallelism)
    slurm_ids: list[str] = []
    for n, array in enumerate(arrays):
        after = f"afterany:{slurm_ids[array.after]}" if array.after is not None else None
        executor.update_parameters(**array.params, array_parallelism=array.parallelism, dependency=after)
        try:
            # submitit prints sbatch's stderr before raising it: keep the error to one line.
            with contextlib.redirect_stderr(io.StringIO()), executor.batch():
                jobs = [executor.submit(fn, spec) for spec in array.specs]
        except (FailedJobError, FailedSubmissionError) as e:
            raise ConfigError(_refused(e, launcher, n, arrays, len(specs))) from None
        slurm_ids.append(str(jobs[0].job_id).split("_")[0])
        yield array.specs, jobs


def _refused(e: Exception, launcher: LauncherConfig, n: int, arrays: list[Array], total: int) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    reason = lines[-1] if lines else type(e).__name__
    settings = [f"launcher.{k}={getattr(launcher, k)}" for k in SBATCH_KEYS if getattr(launcher, k)]
    queued = sum(len(a.specs) for a in arrays[:n])
    return (
        f"Slurm refused array {n + 1} of {len(arrays)} ({len(arrays[n].specs)} job(s)): {reason}; "
        f"check {', '.join(settings) or 'the launcher.* settings'}. {queued} of {total} job(s) were queued "
        "and keep running; fix the setting and re-run the same command to resume"
    )
