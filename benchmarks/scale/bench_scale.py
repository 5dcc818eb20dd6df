"""The orchestrator's own cost as sweeps grow: planning (`--dry-run` through the real CLI), gathering
(`gather` + `write_table`) and `status` at 1k and 10k points, with the cost per job.

    .venv/bin/python benchmarks/scale/bench_scale.py                  # 1000 and 10000, this checkout
    .venv/bin/python benchmarks/scale/bench_scale.py --sizes 200 1000 --repo /tmp/old --out before.json

`--repo` times another checkout of the orchestrator (e.g. an older commit, `git archive`d) on the
same result files. Result files are written with the real schema (make_results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from make_results import make_results, sweep_args  # noqa: E402

GATHER = """
import sys, time
from pathlib import Path
from orchestrator.results.table import gather, write_table
d = Path(sys.argv[1]); t = time.perf_counter(); df = gather(d); t1 = time.perf_counter()
write_table(d, df); t2 = time.perf_counter()
print(len(df), t1 - t, t2 - t1)
"""


def timed(cmd: list[str], repo: Path, cwd: Path) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(repo), COLUMNS="200")
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=7200)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])}... failed: {proc.stderr[-2000:]}")
    return wall, proc.stdout


def measure(n: int, repo: Path, work: Path, plan: bool) -> dict:
    cli = [sys.executable, "-m", "orchestrator"]
    plan_s = None
    if plan:
        plan_s, out = timed([*cli, *sweep_args(n), "--dry-run"], repo, work)
        assert f"{n} job(s)" in out.splitlines()[0], out[:300]
    sweep_dir = work / f"sweep-{n}"
    make_results(n, sweep_dir)
    _, out = timed([sys.executable, "-c", GATHER, str(sweep_dir)], repo, work)
    rows, gather_s, write_s = out.split()
    assert int(rows) == n
    status_s, out = timed([*cli, "status", str(sweep_dir)], repo, work)
    assert out.count("\n") >= n
    return {
        "points": n,
        "plan_dry_run_s": round(plan_s, 2) if plan_s is not None else None,
        "gather_s": round(float(gather_s), 2),
        "write_table_s": round(float(write_s), 2),
        "status_s": round(status_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose orchestrator is timed")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument("--plan-up-to", type=int, default=None, help="skip planning above this size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_s, _ = timed(
            [sys.executable, "-m", "orchestrator", "compile.mode=eager", "--dry-run"], args.repo, Path(tmp)
        )
        limit = args.plan_up_to or max(args.sizes)
        rows = [measure(n, args.repo.resolve(), Path(tmp), n <= limit) for n in args.sizes]
    print(f"startup (a 1-point --dry-run): {base_s:.2f} s; per job: ms past that startup")
    head = ("points", "plan s", "ms/job", "gather s", "write s", "ms/job", "status s")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (7, 8, 7, 9, 8, 7, 9), strict=True)))
    for r in rows:
        n = r["points"]
        plan_s = r["plan_dry_run_s"] if r["plan_dry_run_s"] is not None else float("nan")
        plan_ms = 1000 * (plan_s - base_s) / n
        gather_ms = 1000 * (r["gather_s"] + r["write_table_s"]) / n
        r.update(plan_ms_per_job=round(plan_ms, 3) if plan_ms == plan_ms else None)
        r.update(gather_write_ms_per_job=round(gather_ms, 3))
        print(
            f"{n:>7} {plan_s:>8.2f} {plan_ms:>7.2f} {r['gather_s']:>9.2f} "
            f"{r['write_table_s']:>8.2f} {gather_ms:>7.2f} {r['status_s']:>9.2f}"
        )
    cpus = os.cpu_count()
    args.out.write_text(
        json.dumps(
            {"repo": str(args.repo), "cpus": cpus, "startup_s": round(base_s, 2), "rows": rows}, indent=2
        )
        + "\n"
    )
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
