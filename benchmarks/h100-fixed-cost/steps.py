"""Did a way of starting a job's processes bend its figures? Per model and side, each sweep's median
step with its 95% CI (over its repetitions, two-level over processes), and the change from the first
sweep to each other one with its CI (orchestrator.core.stats). Prints a markdown table.

    .venv/bin/python benchmarks/h100-fixed-cost/steps.py BASE/results.jsonl OTHER/results.jsonl ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator.core.stats import change_ci, hierarchical_ci


def sides(path: str) -> dict[tuple[str, str], dict[str, tuple[list[float], list[int]]]]:
    """(model, task) -> side -> (per-repetition step ms, process of each)."""
    out: dict[tuple[str, str], dict[str, tuple[list[float], list[int]]]] = {}
    for line in open(path):
        row = json.loads(line)
        reps = row.get("timings") or {}  # per repetition: eager_ms, compiled_ms, process
        if row.get("status") != "ok" or not reps.get("eager_ms"):
            continue
        key = (str(row.get("model")), str(row.get("task")))
        process = reps.get("process") or [0] * len(reps["eager_ms"])
        out[key] = {side: (reps[f"{side}_ms"], process) for side in ("eager", "compiled")}
    return out


def main(paths: list[str]) -> None:
    runs = [(Path(p).parent.name, sides(p)) for p in paths]
    base_name, base = runs[0]
    print("| model | task | side | " + " | ".join(f"{n} ms [95% CI]" for n, _ in runs), end="")
    print(" | " + " | ".join(f"{n} vs {base_name} [95% CI]" for n, _ in runs[1:]) + " |")
    print("|---" * (3 + 2 * len(runs) - 1) + "|")
    for key in sorted(base):
        for side in ("eager", "compiled"):
            cells = []
            for _, run in runs:
                if key not in run:
                    cells.append("-")
                    continue
                mid, low, high = hierarchical_ci(*run[key][side])
                cells.append(f"{mid:.2f} [{low:.2f}-{high:.2f}]")
            for _, run in runs[1:]:
                if key not in run:
                    cells.append("-")
                    continue
                (b, bp), (c, cp) = base[key][side], run[key][side]
                change, low, high = change_ci(b, c, bp, cp)
                cells.append(f"{change:+.1%} [{low:+.1%} to {high:+.1%}]")
            print(f"| {key[0]} | {key[1]} | {side} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
