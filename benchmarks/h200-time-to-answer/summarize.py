"""Per sweep and per job: the wall by phase and the figures, before (87d98ac) and after (this change).

python benchmarks/h200-time-to-answer/summarize.py > benchmarks/h200-time-to-answer/summary.txt
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HERE = Path(__file__).parent
PHASES = ["startup", "setup", "primer", "build", "flops", "explain", "first_calls", "parity", "timed"]
PHASES += ["random_parity", "processes", "sides_alone", "probes", "memory", "other", "teardown"]
# the fixed part: outside the compile, the timing, the checks and the fresh measuring processes
FIXED = ["startup", "setup", "primer", "build", "flops", "explain", "other", "teardown"]


def rows(folder: Path) -> list[dict]:
    path = folder / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def started(r: dict) -> str | None:
    """How the worker started: `forked` (this tree) or `started` (run5-ab2, commit 5fccda8)."""
    return r.get("started") or {True: "fork", False: "interpreter"}.get(r.get("forked"))


def sweep_wall(log: Path) -> str:
    found = re.search(r"wall_s ([\d.]+)", log.read_text())
    return found.group(1) if found else "?"


def main() -> None:
    print("sweep | jobs done | sweep wall s | sum of job_wall_s")
    jobs = []
    for log in sorted(HERE.glob("run*/*.log")):
        got = rows(log.with_suffix(""))
        total = sum(r.get("job_wall_s") or 0 for r in got)
        print(f"{log.parent.name}/{log.stem} | {len(got)} | {sweep_wall(log)} | {total:.1f}")
        jobs += [(log.parent.name, log.stem, r) for r in got]
    print("\nsweep | model | status | started | job_wall_s | fixed s | " + " | ".join(PHASES))
    for run, sweep, r in jobs:
        phase = {p: r.get(f"wall_{p}_s") or 0.0 for p in PHASES}
        fixed = sum(phase[p] for p in FIXED)
        cells = " | ".join(f"{phase[p]:.1f}" for p in PHASES)
        head = f"{run}/{sweep} | {r['model']} | {r['status']} | {started(r)}"
        print(f"{head} | {r['job_wall_s']:.1f} | {fixed:.1f} | {cells}")
    print("\nsweep | model | compile_s | eager ms | compiled ms | speedup [95% CI] | parity_ok | parity_err")
    for run, sweep, r in jobs:
        ci = f"[{r['speedup_ci_low']:.3f}-{r['speedup_ci_high']:.3f}]"
        times = f"{r['compile_s']:.1f} | {r['eager_ms']:.2f} | {r['compiled_ms']:.2f}"
        figures = f"{times} | {r['speedup']:.3f} {ci}"
        print(f"{run}/{sweep} | {r['model']} | {figures} | {r.get('parity_ok')} | {r.get('parity_err')}")

    print("\nsweep | model | eager / compiled peak GiB | reserved GiB | alone ms | warm, portable probe s")
    pairs = [
        ("eager_peak_gib", "compiled_peak_gib", ".3f"),
        ("eager_reserved_gib", "compiled_reserved_gib", ".3f"),
        ("eager_alone_ms", "compiled_alone_ms", ".2f"),
        ("compile_warm_s", "compile_portable_s", ".1f"),
    ]
    for run, sweep, r in jobs:
        if r.get("eager_peak_gib") is None and r.get("compile_warm_s") is None:
            continue  # bench=quick: no memory, no probes
        cells = [" / ".join("-" if r.get(k) is None else format(r[k], f) for k in ab) for *ab, f in pairs]
        print(f"{run}/{sweep} | {r['model']} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
