"""Where a GPU job's wall time goes, from the `wall_*` phases of committed results (issue 58, item 3):
per job, its fixed cost (what a job pays whatever it measures) against its measurement phases; then
the median per model and task. Reads results.jsonl files; prints a markdown table.

    .venv/bin/python benchmarks/h100-fixed-cost/phases.py benchmarks/h200-answers/sweep/results.jsonl ...
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict

# What a job pays before and after it measures: the interpreter and imports, set-up, the device lock,
# the primer, the build, the FLOP-counted step, explain, the result file, what no phase claims, the exit.
FIXED = ("startup", "setup", "wait", "primer", "build", "flops", "explain", "finish", "other", "teardown")
MEASURED = (
    "first_calls", "parity", "timed", "profile", "memory", "shapes", "convergence", "random_parity",
    "processes", "sides_alone", "probes",
)  # fmt: skip


def phases(row: dict) -> dict[str, float]:
    return {p: row.get(f"wall_{p}_s") or 0.0 for p in (*FIXED, *MEASURED)}


def main(paths: list[str]) -> None:
    groups: dict[tuple[str, str, str], list[dict[str, float]]] = defaultdict(list)
    for path in paths:
        for line in open(path):
            row = json.loads(line)
            if row.get("wall_startup_s") is None or row.get("status") != "ok":
                continue
            model = str(row.get("model") or row.get("workload"))
            groups[(model, str(row.get("task")), str(row.get("mode")))].append(phases(row))
    of_it = "of it: startup, primer, build, explain, flops"
    print(f"| model | task | mode | jobs | fixed s (median) | {of_it} | measured s | random parity s |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, task, mode), jobs in sorted(groups.items()):
        med = {p: statistics.median(j[p] for j in jobs) for p in (*FIXED, *MEASURED)}
        fixed = statistics.median(sum(j[p] for p in FIXED) for j in jobs)
        measured = statistics.median(sum(j[p] for p in MEASURED) for j in jobs)
        parts = ", ".join(f"{med[p]:.1f}" for p in ("startup", "primer", "build", "explain", "flops"))
        cells = [model, task, mode, len(jobs), f"{fixed:.1f}", parts, f"{measured:.1f}"]
        print("| " + " | ".join(map(str, [*cells, f"{med['random_parity']:.1f}"])) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
