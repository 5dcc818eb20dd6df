"""Whether two sweeps of one config wrote the same rows: per job id, the same keys, the same type and
null-ness of each value, and the same value wherever it is not a measurement (a float figure, a
process id, a time stamp) once each sweep's own directory is taken out of its paths.

    python same_rows.py BEFORE_DIR AFTER_DIR      (exit 1 and the differences where they differ)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VARYING = {"pid", "wall_written_at", "error_log", "log_stdout", "log_stderr", "timings", "env_git"}


def rows(sweep: Path) -> dict[str, dict]:
    out = {}
    for line in (sweep / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["job_id"]] = json.loads(json.dumps(row).replace(str(sweep), "<sweep>"))
    return out


def measured(key: str, value: object) -> bool:
    return isinstance(value, float) or key in VARYING or key.endswith("_pid")


def compare(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    out = [] if set(before) == set(after) else [f"job ids differ: {sorted(set(before) ^ set(after))}"]
    for job_id in sorted(set(before) & set(after)):
        b, a = before[job_id], after[job_id]
        if set(b) != set(a):
            out.append(
                f"{job_id} keys: only before {sorted(set(b) - set(a))}, only after {sorted(set(a) - set(b))}"
            )
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
