"""Output without a terminal (CI logs, Slurm logs, `| tee`): plain lines, a compact table, no line
past 160 characters, numbers to 3 significant digits; through the real CLI with stdout piped."""

from __future__ import annotations

import json
import re
import shutil

from conftest import run_cli

BOX = re.compile("[\u2500-\u257f]")  # box-drawing characters


def significant(cell: str) -> int:
    return len(cell.replace(".", "").lstrip("0"))


def test_a_piped_sweep_prints_plain_lines(initargs_sweep):
    lines = (initargs_sweep.parent.parent / "cli_stdout.txt").read_text().splitlines()
    assert max(map(len, lines)) <= 160, max(lines, key=len)
    assert not any(BOX.search(line) or "\x1b[" in line for line in lines), "no boxes, no colour codes"
    (start,) = [line for line in lines if line.startswith("sweep initargs: 4 job(s), 0 already finished")]
    assert start.endswith(f"dir {initargs_sweep}"), "the path stays on its line"
    assert sum(line.startswith("ok ") for line in lines) == 4, "one progress line per job"
    assert any(line.startswith("done 4  failed 0") for line in lines), "the last status line, on its own"

    shared = "workload=module size=user_models:MLP task=infer dtype=fp32 numerics=matmul highest"
    (title,) = [i for i, line in enumerate(lines) if line.startswith(f"sweep initargs: 4 job(s); {shared}")]
    at = next(i for i in range(title, len(lines)) if lines[i].startswith("mode "))  # the caption wraps
    caption = " ".join(lines[title:at])
    assert caption.endswith("SDP math fp32 parallel=none"), caption
    header, *rows = lines[at : at + 5]
    columns = header.split()
    assert columns[:2] == ["mode", "init_args"] and "speedup" in columns
    cells = [row.split() for row in rows]
    # Both axes are columns, so no two rows look alike; modes in canonical order within each model.
    assert [(c[0], c[1]) for c in cells] == [
        ("eager", "hidden=64"),
        ("default", "hidden=64"),
        ("eager", "hidden=32"),
        ("default", "hidden=32"),
    ]
    speedups = [c[columns.index("speedup")] for c in cells]
    assert all(significant(s) <= 3 for s in speedups), speedups


def test_gather_narrows_a_wide_table_to_160_columns(initargs_sweep, tmp_path):
    """Long axis values and many axes: cells are cut and the least needed figures left out, said so."""
    sweep = tmp_path / "wide"
    shutil.copytree(initargs_sweep, sweep)
    plan = json.loads((sweep / "plan.json").read_text())
    for n, job in enumerate(plan["jobs"].values()):
        job["axes"].update({f"workload.extra_{i}": "a-rather-long-value-" * 3 + str(n) for i in range(4)})
    (sweep / "plan.json").write_text(json.dumps(plan))
    proc = run_cli(["gather", str(sweep)], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 160, max(lines, key=len)
    header = next(line for line in lines if line.startswith("mode "))
    assert "extra_3" in header and "speedup" in header and "status" in header
    (note,) = [line for line in lines if line.startswith("(left out to fit 160 columns:")]
    assert "recompiles" not in header and "breaks" in note


def test_plain_flag_and_status(initargs_sweep, tmp_path):
    proc = run_cli(["status", str(initargs_sweep), "--plain"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "ok=4" and len(lines) == 5 and max(map(len, lines)) <= 160
