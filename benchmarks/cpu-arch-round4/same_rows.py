"""Whether two sweeps of one config wrote the same rows: per job id, the same keys, the same type and
null-ness of each value, and the same value wherever it is not a measurement (a float figure, a
process id, a time stamp) once each sweep's own directory is taken out of its paths.

    python same_rows.py BEFORE_DIR AFTER_DIR      (exit 1 and the differences where they differ)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NON_FINITE = ("inf", "-inf", "nan", "Infinity", "-Infinity", "NaN")  # how JSON files hold them
VARYING = {"pid", "wall_written_at", "error_log", "log_stdout", "log_stderr", "timings", "env_git"}


def rows(sweep: Path) -> dict[str, dict]:
    out = {}
    for line in (sweep / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["job_id"]] = json.loads(json.dumps(row).replace(str(sweep), "<sweep>"))
    return out


def measured(key: str, value: object) -> bool:
    """A figure (a float, or a list or mapping holding one: per-rank throughput, top kernels) or a
    value that differs from run to run by nature."""
    if key in VARYING or key.endswith("_pid") or isinstance(value, float) or value in NON_FINITE:
        return True
    if isinstance(value, list):
        return any(measured(key, v) for v in value)
    if isinstance(value, dict):
        return any(measured(key, v) for v in value.values())
    return False


def compare(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    out = [] if set(before) == set(after) else [f"job ids differ: {sorted(set(before) ^ set(after))}"]
    for job_id in sorted(set(before) & set(after)):
        b, a = before[job_id], after[job_id]
        # results.jsonl leaves nulls out: a figure measured in one run and null in the other (a
        # break-even where one speedup fell below 1) is a measurement's, not the schema's, difference
        only_b = sorted(k for k in set(b) - set(a) if not measured(k, b[k]))
        only_a = sorted(k for k in set(a) - set(b) if not measured(k, a[k]))
        if only_b or only_a:
            out.append(f"{job_id} keys: only before {only_b}, only after {only_a}")
        for key in sorted(set(b) & set(a)):
            vb, va = b[key], a[key]
            if type(vb) is not type(va) and not {type(vb), type(va)} <= {int, float}:
                out.append(f"{job_id} {key}: type {type(vb).__name__} -> {type(va).__name__}")
            elif not (measured(key, vb) or measured(key, va)) and vb != va:
                out.append(f"{job_id} {key}: {str(vb)[:80]!r} -> {str(va)[:80]!r}")
    return out


if __name__ == "__main__":
    before, after = (rows(Path(p)) for p in sys.argv[1:3])
    found = compare(before, after)
    print(f"{len(before)} job(s) before, {len(after)} after; {len(found)} difference(s)")
    print("\n".join(found))
    sys.exit(1 if found else 0)
