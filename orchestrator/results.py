"""Result files: one JSON per job written atomically; the sweep table gathered from them.

One job (the sweep table: write, read back, gather, format its cells), a little over 250 lines
because the plain-text table's layout (cell formats, width, columns dropped to fit) lives with it."""

from __future__ import annotations

import json
import math
import os
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

RESULT_FILE = "result.json"
PLAN_FILE = "plan.json"

# Columns of the printed table: (result key, header). Settings first, then the figures.
SETTING_COLUMNS = [
    ("workload", "workload"),
    ("size", "size"),
    ("task", "task"),
    ("dtype", "dtype"),
    ("mode", "mode"),
    ("dynamic", "dynamic"),
    ("strategy", "parallel"),
]
FIGURE_COLUMNS = [
    ("compile_s", "compile s"),
    ("eager_ms", "eager ms"),
    ("compiled_ms", "compiled ms"),
    ("speedup", "speedup"),
    ("speedup_ci", "95% CI"),
    ("parity_ok", "parity"),
    ("graph_breaks", "breaks"),
    ("dyn_recompiles", "recompiles"),
    ("iso_ok", "isolation"),
    ("status", "status"),
]
# Plain output: no line longer than this; the figures least needed go first when it would be.
PLAIN_WIDTH = 160
DROP_ORDER = ("dyn_recompiles", "graph_breaks", "parity_ok", "eager_ms", "compiled_ms", "compile_s")
CELL_WIDTH = 36


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


NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _number(value: Any) -> Any:
    """NaN and infinities, which result files hold as strings (JSON has none), back as floats, so a
    column of figures stays numeric (parquet, plots, sorting)."""
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


def gather(sweep_dir: Path) -> pd.DataFrame:
    """All job results of a sweep directory as one table."""
    rows = []
    # The sweep's own order (axes as declared), where known.
    rank = {job_id: i for i, job_id in enumerate(read_plan(sweep_dir))}
    job_dirs = sorted((sweep_dir / "jobs").glob("*"), key=lambda d: (rank.get(d.name, len(rank)), d.name))
    for job_dir in job_dirs:
        result = read_result(job_dir)
        if result is not None:
            rows.append({k: _number(v) for k, v in result.items() if not isinstance(v, dict | list)})
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


def isolation_flag(iso_ok: Any) -> str:
    """'!' for a job measured next to a foreign process, throttled, or on a busy host (job/isolation.py)."""
    from orchestrator.present import present

    return "!" if present(iso_ok) and not bool(iso_ok) else ""


def format_cell(row: pd.Series, key: str) -> str:
    """A table cell: numbers to 3 significant digits, counts as integers, '-' when absent."""
    from orchestrator.present import axis_text, ci_text, present, sig

    if key == "speedup_ci":
        text = ci_text(row.get("speedup_ci_low"), row.get("speedup_ci_high"))
        apart = present(row.get("interleaved")) and not bool(row.get("interleaved"))
        return text + " apart" if apart else text  # the sides ran one after the other
    if key == "iso_ok":
        return isolation_flag(row.get(key)) or "-"  # the column shows only where a job is flagged
    value = row.get(key)
    if not present(value):
        return "-"
    if key in ("graph_breaks", "dyn_recompiles"):
        return f"{value:.0f}"
    return sig(value) if isinstance(value, int | float) and not isinstance(value, bool) else axis_text(value)


def table_cells(
    df: pd.DataFrame, plan: dict[str, dict]
) -> tuple[list[tuple[str, str]], list[list[str]], str]:
    """(columns, rows of cells, caption): swept axes as columns; settings all rows share go in the caption."""
    from orchestrator.present import in_mode_order, join_values, with_axes

    df, swept = with_axes(df, plan)
    df = in_mode_order(df, join_values(df, [c for c in swept if c != "mode"]))
    settings = SETTING_COLUMNS + [(c, c) for c in swept if c not in {k for k, _ in SETTING_COLUMNS}]
    cells = {k: [format_cell(row, k) for _, row in df.iterrows()] for k, _ in settings + FIGURE_COLUMNS}
    shared = [(k, h) for k, h in settings if len(df) > 1 and len(set(cells[k])) == 1]
    columns = [c for c in settings + FIGURE_COLUMNS if c not in shared]
    # Leave out figures with nothing to say in this sweep (e.g. recompiles without a shape schedule).
    columns = [(k, h) for k, h in columns if any(c != "-" for c in cells[k]) or k == "status"]
    rows = [[cells[k][i] for k, _ in columns] for i in range(len(df))]
    caption = " ".join(f"{h}={cells[k][0]}" for k, h in shared if cells[k][0] != "-")
    return columns, rows, caption


def _cut(cell: str, cap: int) -> str:
    return cell if len(cell) <= cap else cell[: cap - 3] + "..."


def plain_table(columns: list[tuple[str, str]], rows: list[list[str]], width: int = PLAIN_WIDTH) -> list[str]:
    """Columns apart by two spaces, narrowed to `width`: figures left out (least needed first),
    then long cells cut shorter, until it fits."""
    keep, cap = list(range(len(columns))), CELL_WIDTH

    def render() -> list[str]:
        cut = [[_cut(c, cap) for c in r] for r in rows]
        widths = [max([len(columns[i][1]), *(len(r[i]) for r in cut)]) for i in keep]
        numeric = [all(r[i][:1].isdigit() or r[i] == "-" for r in cut) for i in keep]
        lines = []
        for cells in [[h for _, h in columns], *cut]:
            parts = [
                c.rjust(w) if num else c.ljust(w)
                for c, w, num in zip([cells[i] for i in keep], widths, numeric, strict=True)
            ]
            lines.append("  ".join(parts).rstrip())
        return lines

    lines = render()
    drop = [k for k in DROP_ORDER if k in {c[0] for c in columns}]
    while max(map(len, lines)) > width and (drop or cap > 8):
        if drop:
            key = drop.pop(0)
            keep = [i for i in keep if columns[i][0] != key]
        else:
            cap -= 4
        lines = render()
    left_out = [h for i, (_, h) in enumerate(columns) if i not in keep]
    return lines + (
        [f"(left out to fit {width} columns: {', '.join(left_out)}; see results.csv)"] if left_out else []
    )


def print_table(
    df: pd.DataFrame, title: str, console: Any = None, plan: dict[str, dict] | None = None
) -> None:
    """The results table: rich on a terminal, plain lines (at most PLAIN_WIDTH wide) otherwise."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    columns, rows, caption = table_cells(df, plan or {})
    failed = df[df["status"] != "ok"] if "status" in df else df.iloc[0:0]
    notes = [
        f"{row['job_id']} {row['status']}: {str(row.get('error')).splitlines()[0]}"
        for _, row in failed.iterrows()
    ]
    if "iso_ok" in df:
        flagged = df[[isolation_flag(v) == "!" for v in df["iso_ok"]]]
        notes += [f"{row['job_id']} isolation: {row.get('iso_note')}" for _, row in flagged.iterrows()]
    if not console.is_terminal:
        head = textwrap.wrap(f"{title}: {len(df)} job(s)" + (f"; {caption}" if caption else ""), PLAIN_WIDTH)
        for line in [*head, *plain_table(columns, rows), *notes]:
            console.print(line[:PLAIN_WIDTH], markup=False, highlight=False)
        return
    table = Table(title=title, caption=caption or None)
    for _, header in columns:
        table.add_column(header, overflow="fold")
    status_at = [k for k, _ in columns].index("status")
    for cells in rows:
        table.add_row(*cells, style=None if cells[status_at] == "ok" else "red")
    console.print(table)
    for note in notes:
        console.print(note, style="red", markup=False)
