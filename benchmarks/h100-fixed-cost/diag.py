"""Why a fork of the fork server runs eager slower on the GPU hosts, and what the primer and the
start-up pay (issue 58, item 3). One JSON line a measurement on stdout.

run7-diag (h200-time-to-answer) found forks slower (Python loop 1.1-1.9x, BERT's eager forward
7.1-11.2 ms against 4.6-7.9 ms) on CPUs 0, 2, 3, while every interpreter ran on CPU 15, and an
interpreter pinned to CPU 0 was slow too. So the CPU a process lands on may be the cause, not the
fork. This settles it:
  cpumap   each CPU's speed: this process pinned to it, the pure-Python loop, median of 5
  pairs    a fork and an interpreter each pinned to the same CPU (the map's fastest, median and
           slowest), order alternating, three rounds: loop, kernel launches, BERT-base eager forward,
           and AnonHugePages (a fork's pages are its server's, shared copy-on-write)
  primer   in a fresh interpreter: import torch, the CUDA context, inductor's imports, the primer,
           the primer again (what is left is not a one-off), the build of BERT-base
  startup  `-X importtime` of the worker's imports: the 15 slowest packages, and the whole wall

    PYTHONPATH=benchmarks/h100-fixed-cost:benchmarks/h200-time-to-answer:. \
        python benchmarks/h100-fixed-cost/diag.py [cpu] [PARTS...]
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def emit(**line: object) -> None:
    print(json.dumps(line), flush=True)


def loop_ms() -> float:
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def cpumap() -> list[tuple[int, float]]:
    every = os.sched_getaffinity(0)
    speeds = []
    try:
        for cpu in sorted(every):
            os.sched_setaffinity(0, {cpu})
            speeds.append((cpu, loop_ms()))
            emit(part="cpumap", cpu=cpu, loop_ms=round(speeds[-1][1], 2))
    finally:
        os.sched_setaffinity(0, every)
    return speeds


def pinned_answer(spec: object, req: dict) -> dict:
    """In the fresh process (a fork or an interpreter): pinned to the asked CPU first, then
    fork_diag's measurements."""
    import fork_diag

    os.sched_setaffinity(0, {req["cpu"]})
    return fork_diag.answer(spec, req)


KEEP = ("py_loop_ms", "launch_us", "bert_ms", "anon_huge_kb", "anon_kb", "cpu_end", "forked")


def pairs(where: str, speeds: list[tuple[int, float]]) -> None:
    from orchestrator.job.processes import fork_server
    from orchestrator.job.processes.fresh import run_module
    from orchestrator.job.processes.supervisor import PYTHON

    ranked = sorted(speeds, key=lambda s: s[1])
    cpus = sorted({ranked[0][0], ranked[len(ranked) // 2][0], ranked[-1][0]})
    work = Path(os.environ.get("DIAG_DIR", "/tmp/fixed-cost-diag"))
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        emit(part="thp", enabled=Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip())
    extra = ("transformers.modeling_utils", "transformers:BertModel")
    with fork_server.serving(PYTHON, extra) as forks:
        for r in range(3):
            for cpu in cpus:
                order = ("fork", "interpreter") if r % 2 == 0 else ("interpreter", "fork")
                for how in order:
                    if how == "fork":
                        os.environ.update(forks)
                    else:
                        os.environ.pop(fork_server.ADDRESS_ENV, None)
                    t0 = time.perf_counter()
                    req = {"where": where, "cpu": cpu}
                    got, why = run_module(work, 300, "diag:pinned_answer", f"{how}{r}-{cpu}", req)
                    keep = (
                        "py_loop_ms",
                        "launch_us",
                        "bert_ms",
                        "anon_huge_kb",
                        "anon_kb",
                        "cpu_end",
                        "forked",
                    )
                    figures = {k: got.get(k) for k in keep} if got else {"why": why}
                    emit(
                        part="pairs",
                        round=r,
                        cpu=cpu,
                        how=how,
                        process_s=round(time.perf_counter() - t0, 2),
                        **figures,
                    )


PRIMER = r"""
import json, sys, time
t = {}
t0 = time.perf_counter(); import torch; t["import_torch_s"] = time.perf_counter() - t0
device = torch.device(sys.argv[1])
t0 = time.perf_counter()
torch.empty(1, device=device); torch.cuda.synchronize() if device.type == "cuda" else None
t["device_context_s"] = time.perf_counter() - t0
t0 = time.perf_counter(); import torch._inductor.compile_fx; t["import_inductor_s"] = time.perf_counter() - t0
from orchestrator.job.setup.primer import prime
for name in ("primer_s", "primer_again_s"):
    t0 = time.perf_counter(); prime(device, False, False); t[name] = time.perf_counter() - t0
t0 = time.perf_counter(); import transformers.modeling_utils
t["import_transformers_s"] = time.perf_counter() - t0
t0 = time.perf_counter()
model = transformers.BertForMaskedLM(transformers.BertConfig()).to(device)
torch.cuda.synchronize() if device.type == "cuda" else None
t["build_bert_base_s"] = time.perf_counter() - t0
print(json.dumps({k: round(v, 3) for k, v in t.items()}))
"""


def primer(where: str) -> None:
    for r in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", PRIMER, where], capture_output=True, text=True, timeout=300
        )
        line = proc.stdout.strip().splitlines()[-1:] or ["{}"]
        emit(
            part="primer",
            round=r,
            rc=proc.returncode,
            **json.loads(line[0]),
            err=proc.stderr[-300:] if proc.returncode else "",
        )


def startup() -> None:
    for r in range(2):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import orchestrator.job.worker"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        tops: dict[str, int] = {}
        for line in proc.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].strip().isdigit():
                name = parts[2].strip()
                if "." not in name:  # a top-level package: its cumulative microseconds
                    tops[name] = max(tops.get(name, 0), int(parts[1]))
        slowest = sorted(tops.items(), key=lambda kv: -kv[1])[:15]
        emit(part="startup", round=r, wall_s=round(wall, 2), top_s={k: round(v / 1e6, 2) for k, v in slowest})


def main() -> None:
    args = sys.argv[1:]
    where = "cpu" if "cpu" in args else "cuda"
    parts = [a for a in args if a != "cpu"] or ["startup", "primer", "cpumap", "pairs"]
    speeds: list[tuple[int, float]] = []
    for part in parts:
        if part == "cpumap" or (part == "pairs" and not speeds):
            speeds = cpumap()
        if part == "pairs":
            pairs(where, speeds)
        elif part == "primer":
            primer(where)
        elif part == "startup":
            startup()


if __name__ == "__main__":
    main()
