"""Result files: one JSON per job written atomically; the sweep table gathered from them."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

RESULT_FILE = "result.json"
PLAN_FILE = "plan.json"

# Columns of the printed table: (result key, header, format).
TABLE_COLUMNS = [
    ("workload", "workload", "{}"),
    ("size", "size", "{}"),
    ("task", "task", "{}"),
    ("dtype", "dtype", "{}"),
    ("mode", "mode", "{}"),
    ("dynamic", "dynamic", "{}"),
    ("strategy", "parallel", "{}"),
    ("compile_s", "compile s", "{:.2f}"),
    ("eager_ms", "eager ms", "{:.2f}"),
    ("compiled_ms", "compiled ms", "{:.2f}"),
    ("speedup", "speedup", "{:.3f}"),
    ("speedup_ci", "95% CI", "{}"),
    ("parity_ok", "parity", "{}"),
    ("graph_breaks", "breaks", "{:.0f}"),
    ("dyn_recompiles", "recompiles", "{:.0f}"),
    ("status", "status", "{}"),
]


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become strings so that the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json_atomic(path: Path, data: dict) -> None:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_clean(data), f, indent=2, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_result(job_dir: Path) -> dict | None:
    """The job's result, or None if there is none (or it is unreadable: never half-trusted)."""
    path = job_dir / RESULT_FILE
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def read_plan(sweep_dir: Path) -> dict[str, dict]:
    """The sweep's planned jobs (`plan.json`: id -> label and axes), in plan order; {} if absent."""
    path = sweep_dir / PLAN_FILE
    return json.loads(path.read_text())["jobs"] if path.exists() else {}


def gather(sweep_dir: Path) -> pd.DataFrame:
    """All job results of a sweep directory as one table."""
    rows = []
    # The sweep's own order (axes as declared), where known.
    rank = {job_id: i for i, job_id in enumerate(read_plan(sweep_dir))}
    job_dirs = sorted((sweep_dir / "jobs").glob("*"), key=lambda d: (rank.get(d.name, len(rank)), d.name))
    for job_dir in job_dirs:
        result = read_result(job_dir)
        if result is not None:
            rows.append({k: v for k, v in result.items() if not isinstance(v, dict | list)})
    df = pd.DataFrame(rows)
    if not df.empty:
        df = add_scaling(df)
    return df


# What makes a distributed row and its single-process `none` row the same model and settings.
SCALING_KEYS = ("workload", "size", "task", "dtype", "mode", "dynamic", "batch_size", "seq_len")


def add_scaling(df: pd.DataFrame) -> pd.DataFrame:
    """Scaling efficiency of each distributed row against the `none` row of the same model and settings
    (none where that row is missing or not unique). One pass over plain tuples: linear in rows."""
    if "strategy" not in df or "compiled_tokens_per_s" not in df:
        return df
    keys = [k for k in SCALING_KEYS if k in df]
    cells = df[keys].astype(object)
    rows = list(cells.where(cells.notna(), None).itertuples(index=False, name=None))
    strategies, samples = df["strategy"].tolist(), df["compiled_samples_per_s"].tolist()
    worlds = df["world_size"].tolist() if "world_size" in df else [1] * len(df)
    single: dict[tuple, Any] = {}
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
    """results.csv, results.jsonl (and results.parquet where pyarrow is installed) beside the job folders."""
    rows = [read_result(sweep_dir / "jobs" / job_id) for job_id in df["job_id"]]
    jsonl = sweep_dir / "results.jsonl"  # every field, per-repeat timings and break reasons included
    jsonl.with_suffix(".jsonl.tmp").write_text("".join(json.dumps(r, default=str) + "\n" for r in rows if r))
    os.replace(jsonl.with_suffix(".jsonl.tmp"), jsonl)
    csv = sweep_dir / "results.csv"
    tmp = csv.with_suffix(".csv.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, csv)
    try:
        df.to_parquet(sweep_dir / "results.parquet", index=False)
    except ImportError:
        pass  # parquet is optional (pip install .[parquet]); the CSV is the canonical table
    return csv


def format_cell(row: pd.Series, key: str, fmt: str) -> str:
    if key == "speedup_ci":
        low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
        return f"{low:.3f}-{high:.3f}" if _present(low) and _present(high) else "-"
    value = row.get(key)
    if not _present(value):
        return "-"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def print_table(df: pd.DataFrame, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if Console().is_terminal else Console(width=200)
    table = Table(title=title)
    columns = [(k, h, f) for k, h, f in TABLE_COLUMNS if k in df or k == "speedup_ci"]
    # Leave out columns with nothing to say in this sweep (e.g. recompiles without a shape schedule).
    columns = [c for c in columns if any(format_cell(row, c[0], c[2]) != "-" for _, row in df.iterrows())]
    for _, header, _ in columns:
        table.add_column(header, overflow="fold")
    for _, row in df.iterrows():
        cells = [format_cell(row, k, f) for k, _, f in columns]
        style = None if row.get("status") == "ok" else "red"
        table.add_row(*cells, style=style)
    console.print(table)
    failed = df[df["status"] != "ok"] if "status" in df else df.iloc[0:0]
    for _, row in failed.iterrows():
        console.print(f"[red]{row['job_id']} {row['status']}[/red]: {row.get('error')}")
