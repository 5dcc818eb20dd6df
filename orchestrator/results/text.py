"""The results table as text: one cell format (3 significant digits), swept axes as columns,
settings every row shares in the caption, and no line wider than PLAIN_WIDTH off a terminal."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from orchestrator.core.failures import failure_lines, failure_message
from orchestrator.core.numbers import number, present
from orchestrator.core.result import COL, header
from orchestrator.results.present import (
    PLAIN_WIDTH,
    axis_text,
    ci_text,
    in_mode_order,
    join_values,
    percent,
    sig,
    with_axes,
)

# Columns of the printed table: (result key, header), each header the one its result field
# declares (core/result.py). Settings first, then the figures; `speedup_ci` is the CI's two ends.
SETTING_COLUMNS = [
    (k, header(k))
    for k in (COL.workload, COL.model, COL.size, COL.task, COL.dtype, COL.numerics, COL.mode, COL.dynamic)
] + [(COL.strategy, header(COL.strategy)), (COL.lever, "follow-up lever")]
# The figures: speed first, the compiled step's MFU and (bench.profile) MBU; then (bench.task=generate)
# the time to first token's speedup, decode tokens/s and the share of the card's bandwidth they reach
# (MBU), recompiles over a request; then parity, graphs and the job's status. `speedup_ci` is the CI's
# two ends.
FIGURE_KEYS: tuple[str, ...] = (COL.compile_s, COL.eager_ms, COL.compiled_ms, COL.speedup, "speedup_ci")
FIGURE_KEYS += (COL.compiled_mfu, COL.compiled_mbu)  # the compiled step against the peaks (docs/limits.md)
FIGURE_KEYS += (COL.gen_ttft_speedup, COL.compiled_decode_tokens_per_s, COL.compiled_decode_mbu)
FIGURE_KEYS += (COL.gen_recompiles, COL.parity_ok, COL.graph_breaks, COL.compiled_fraction)
FIGURE_KEYS += (COL.dyn_recompiles, COL.iso_ok, COL.status)
FIGURE_COLUMNS = [(k, "95% CI" if k == "speedup_ci" else header(k)) for k in FIGURE_KEYS]
# Plain output: the figures least needed go first when a line would be wider than PLAIN_WIDTH.
DROP_ORDER = (
    COL.compiled_mbu,
    COL.compiled_mfu,
    COL.compiled_fraction,
    COL.compiled_decode_mbu,
    COL.gen_recompiles,
    COL.dyn_recompiles,
    COL.graph_breaks,
    COL.parity_ok,
    COL.eager_ms,
    COL.compiled_ms,
    COL.compile_s,
)
CELL_WIDTH = 36
UTILIZATIONS = (COL.compiled_mfu, COL.compiled_mbu, COL.compiled_decode_mbu)  # shares of a peak, in percent


def isolation_flag(iso_ok: Any) -> str:
    """'!' for a job measured beside a foreign process, throttled, or on a busy host (phases/isolation.py)."""
    return "!" if present(iso_ok) and not bool(iso_ok) else ""


def format_cell(row: pd.Series, key: str) -> str:
    """A table cell: numbers to 3 significant digits, counts as integers, '-' when absent."""
    if key == "speedup_ci":
        text = ci_text(row.get(COL.speedup_ci_low), row.get(COL.speedup_ci_high))
        apart = present(row.get(COL.interleaved)) and not bool(row.get(COL.interleaved))
        return text + " apart" if apart else text  # the sides ran one after the other
    if key == COL.iso_ok:
        return isolation_flag(row.get(key)) or "-"  # the column shows only where a job is flagged
    value = row.get(key)
    if not present(value):
        return "-"
    computes = row.get(COL.compute_dtype)
    if key == COL.dtype and present(computes) and computes != value:
        return f"{value} (computes {computes})"  # a model built in bf16 under bench.dtype=fp32
    if key in (COL.graph_breaks, COL.dyn_recompiles, COL.gen_recompiles):
        return f"{value:.0f}"
    if key == COL.compiled_fraction:
        return f"{value:.0%}"
    if key in UTILIZATIONS:  # as the verdict's limits line prints them
        return percent(number(value))
    return sig(value) if isinstance(value, int | float) and not isinstance(value, bool) else axis_text(value)


def table_cells(
    df: pd.DataFrame, plan: Mapping[str, Mapping[str, Any]]
) -> tuple[list[tuple[str, str]], list[list[str]], str]:
    """(columns, rows of cells, caption): swept axes as columns; settings all rows share go in the caption."""
    df, swept = with_axes(df, plan)
    df = in_mode_order(df, join_values(df, [c for c in swept if c != COL.mode]))
    settings = SETTING_COLUMNS + [(c, c) for c in swept if c not in {k for k, _ in SETTING_COLUMNS}]
    cells = {k: [format_cell(row, k) for _, row in df.iterrows()] for k, _ in settings + FIGURE_COLUMNS}
    shared = [(k, h) for k, h in settings if len(df) > 1 and len(set(cells[k])) == 1]
    columns = [c for c in settings + FIGURE_COLUMNS if c not in shared]
    # Leave out figures with nothing to say in this sweep (e.g. recompiles without a shape schedule).
    columns = [(k, h) for k, h in columns if any(c != "-" for c in cells[k]) or k == COL.status]
    # ... and the compiled fraction where every graph holds the whole model.
    columns = [(k, h) for k, h in columns if k != COL.compiled_fraction or set(cells[k]) - {"100%", "-"}]
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
    df: pd.DataFrame, title: str, console: Any = None, plan: Mapping[str, Mapping[str, Any]] | None = None
) -> None:
    """The results table: rich on a terminal, plain lines (at most PLAIN_WIDTH wide) otherwise."""
    console = console or Console()
    columns, rows, caption = table_cells(df, plan or {})
    failed = df[df[COL.status] != "ok"] if COL.status in df else df.iloc[0:0]
    notes = [
        line
        for _, row in failed.iterrows()
        for line in [f"{row[COL.job_id]} {row[COL.status]}: {failure_message(row)}", *failure_lines(row)]
    ]
    if COL.iso_ok in df:
        flagged = df[[isolation_flag(v) == "!" for v in df[COL.iso_ok]]]
        notes += [f"{row[COL.job_id]} isolation: {row.get(COL.iso_note)}" for _, row in flagged.iterrows()]
    if not console.is_terminal:
        head = textwrap.wrap(f"{title}: {len(df)} job(s)" + (f"; {caption}" if caption else ""), PLAIN_WIDTH)
        for line in [*head, *plain_table(columns, rows), *notes]:
            console.print(line[:PLAIN_WIDTH], markup=False, highlight=False)
        return
    table = Table(title=title, caption=caption or None)
    for _, heading in columns:
        table.add_column(heading, overflow="fold")
    status_at = [k for k, _ in columns].index(COL.status)
    for cells in rows:
        table.add_row(*cells, style=None if cells[status_at] == "ok" else "red")
    console.print(table)
    for note in notes:
        console.print(note, style="red", markup=False)
