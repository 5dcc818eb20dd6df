"""The sweep's table: the `Sweep` holds the plan and each job's `JobResult` (each result.json read
once per command; a job this command ran comes from the runner), and its `frame()` is one DataFrame,
with the scaling efficiency of distributed rows; written as results.jsonl (every field), results.csv
and (with pyarrow) results.parquet (their scalar fields).

The DataFrame keeps each result whole, lists and mappings included (break reasons, loss curves,
timings, top kernels), so that nothing downstream (verdict, dashboard, compare) reads a result file
again."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from orchestrator.config.plan import PlannedJob
from orchestrator.core.files import json_safe, read_result
from orchestrator.core.numbers import present
from orchestrator.core.result import COL, JobResult
from orchestrator.results.recipe import reproduce_command

# Columns the table adds to the results' own fields.
TABLE_COLUMNS = ("scaling_efficiency",)
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _number(value: Any) -> Any:
    """NaN and infinities, which result files hold as strings (JSON has none), back as floats, so a
    column of figures stays numeric (parquet, plots, sorting)."""
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


@dataclass
class Sweep:
    """A sweep directory as one command reads it: its plan and each job's result, typed, every
    result.json read once (a job this command ran hands its result over as it ends: `add`). The
    table (`frame`) is what the verdict, the suite, compare, the upgrade A/B, the dashboard and wandb
    read."""

    dir: Path
    plan: dict[str, PlannedJob]
    """The sweep's jobs by id, as plan.json holds them (label, axes; a follow-up's lever)."""
    results: dict[str, JobResult] = field(default_factory=dict)
    """Each job's result read so far, by job id."""

    def add(self, job_id: str, result: JobResult) -> None:
        """A result this command already holds (the runner read it as its job ended)."""
        self.results[job_id] = result

    def forget(self, job_id: str) -> None:
        """A result removed from disk (a job to retry)."""
        self.results.pop(job_id, None)

    def result(self, job_id: str) -> JobResult | None:
        """The job's result: held, else read from its folder (once); None where it has none."""
        if job_id not in self.results:
            row = read_result(self.dir / "jobs" / job_id)
            if row is None:
                return None
            self.results[job_id] = JobResult.from_dict(row)
        return self.results[job_id]

    def frame(self, wanted: set[str] | None = None) -> pd.DataFrame:
        """One row a job with a result (of `wanted` only, where given), in plan order, then by id."""
        rank = {job_id: i for i, job_id in enumerate(self.plan)}
        ids = sorted(
            (d.name for d in (self.dir / "jobs").glob("*")), key=lambda i: (rank.get(i, len(rank)), i)
        )
        rows = []
        for job_id in ids:
            if wanted is not None and job_id not in wanted:
                continue
            result = self.result(job_id)
            if result is not None:
                rows.append({k: _number(v) for k, v in result.to_dict().items()})
        df = pd.DataFrame(rows)
        return add_scaling(df) if not df.empty else df


def gather(sweep_dir: Path, plan: dict[str, Any]) -> pd.DataFrame:
    """All job results of a sweep directory as one table, in the order of the sweep's `plan` (its
    jobs by id, as `read_plan` gives them) where known."""
    return Sweep(sweep_dir, plan).frame()


def scalar_columns(df: pd.DataFrame) -> list[str]:
    """The columns whose cells are plain values (no list or mapping): what CSV and parquet hold."""
    return [c for c in df.columns if not df[c].map(lambda v: isinstance(v, list | dict)).any()]


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Each row as its result had it: the fields it has a value for (NaN and None left out)."""
    rows = cast(list[dict[str, Any]], df.to_dict("records"))  # the columns are the result's field names
    return [{k: v for k, v in row.items() if present(v)} for row in rows]


# What makes a distributed row and its single-process `none` row the same model and settings.
SCALING_KEYS = (
    COL.workload,
    COL.model,
    COL.size,
    COL.task,
    COL.dtype,
    COL.mode,
    COL.dynamic,
    COL.batch_size,
    COL.seq_len,
)


def add_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """Scaling efficiency of each distributed row against the `none` row of the same model and settings
    (none where that row is missing or not unique). One pass over plain tuples: linear in rows."""
    if COL.strategy not in df or COL.compiled_tokens_per_s not in df:
        return df
    keys = [k for k in SCALING_KEYS if k in df]
    cells = df[keys].astype(object)
    rows = list(cells.where(cells.notna(), None).itertuples(index=False, name=None))
    strategies, samples = df[COL.strategy].tolist(), df[COL.compiled_samples_per_s].tolist()
    worlds = df[COL.world_size].tolist() if COL.world_size in df else [1] * len(df)
    single: dict[tuple[Any, ...], Any] = {}
    for key, strategy, value in zip(rows, strategies, samples, strict=True):
        if strategy == "none":
            single[key] = None if key in single else value  # two `none` rows: no single baseline
    effs = []
    for key, strategy, value, world in zip(rows, strategies, samples, worlds, strict=True):
        base = single.get(key)
        effs.append(value / ((world or 1) * base) if strategy != "none" and base else None)
    df["scaling_efficiency"] = effs
    return df


def write_table(sweep_dir: Path, df: pd.DataFrame) -> Path:
    """results.jsonl, results.csv (and results.parquet where pyarrow is installed) beside the job folders."""
    jsonl = sweep_dir / "results.jsonl"  # every field, per-repeat timings and break reasons included
    tmp = jsonl.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(json_safe(r), default=str) + "\n" for r in records(df)))
    os.replace(tmp, jsonl)
    flat = df[scalar_columns(df)]
    if COL.config in df:  # the command that measures each row again (results/recipe.py)
        commands = df[COL.config].map(lambda c: reproduce_command(c) if isinstance(c, dict) and c else None)
        flat = flat.assign(reproduce=commands)
    csv = sweep_dir / "results.csv"
    tmp = csv.with_suffix(".csv.tmp")
    flat.to_csv(tmp, index=False)
    os.replace(tmp, csv)
    try:
        flat.to_parquet(sweep_dir / "results.parquet", index=False)
    except ImportError:
        pass  # parquet is optional (pip install .[parquet]); the CSV is the canonical table
    return csv
