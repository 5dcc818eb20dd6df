"""Is a fork of the fork server slower at launching work than a new interpreter? The same
measurements (a pure-Python loop, small-kernel launches, BERT-base eager forward) in a fork and in
an interpreter, interleaved, three rounds; one JSON line per process on stdout. (run4-ab ran it
with the server's gc.freeze() of commit 5fccda8, since taken out; run5-ab2's three-way version, with
that commit's spares, was cut before it ran.)

run4-ab: two forks of three ran the loop 1.6x slower, launched kernels 1.5x slower; no interpreter
did. Each line now also says where the process ran and how the loop's time was spent, to tell the
causes apart: `cpu_*` (the CPU it ran on, from /proc/self/stat) against `server_cpu` (a fork starts
on its parent's CPU, and the server may sit on the CPU that takes the GPU's interrupts:
`interrupts.txt`); `loop_cpu_share` (process time over wall: under 1, preempted; near 1 and still
slow, a slower CPU: its SMT sibling busy, a lower clock, a busier cache) and the context switches
during it. A third process a round, `pinned`, is an interpreter pinned to the CPU that round's fork
ran on: slow too, and the CPU is the cause, not the fork. run7-diag (an H100 host): not the CPU, not
preemption; so each process now also gives its huge pages (`anon_huge_kb` of `anon_kb`, from
/proc/self/smaps_rollup) and the host its THP setting: a fork's pages, the server's shared
copy-on-write, lose their huge mappings where written, which costs TLB walks (nested, in a VM).

    PYTHONPATH=benchmarks/h200-time-to-answer:. python benchmarks/h200-time-to-answer/fork_diag.py [cpu]
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path


def this_cpu(pid: int | str = "self") -> int:
    """The CPU a process last ran on (/proc/PID/stat's 39th field)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def status(key: str) -> str | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


def rollup(key: str) -> int | None:
    """A /proc/self/smaps_rollup figure, in kB."""
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def answer(spec: object, req: dict) -> dict:
    """In the fresh process (a fork or an interpreter): the measurements and the conditions."""
    import torch
    from transformers import BertConfig, BertModel

    from orchestrator.job.processes import fork_server

    device = torch.device(req["where"])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    out: dict = {
        "forked": fork_server.forked,
        "threads": threading.active_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "nice": os.nice(0),
        "switch_interval": sys.getswitchinterval(),
        "gc_counts": gc.get_count(),
        "gc_objects": len(gc.get_objects()),
        "torch_threads": torch.get_num_threads(),
    }
    out["cpu_start"] = this_cpu()
    out["server_cpu"] = this_cpu(os.getppid()) if fork_server.forked else None
    out["cpus_allowed"] = status("Cpus_allowed_list")
    out["timerslack_ns"] = Path("/proc/self/timerslack_ns").read_text().strip()
    switches = int(status("nonvoluntary_ctxt_switches") or 0)
    loop, cpu_s = [], []
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        total = 0
        for i in range(1_000_000):
            total += i
        loop.append((time.perf_counter() - t0) * 1e3)
        cpu_s.append((time.process_time() - c0) * 1e3)
    out["py_loop_ms"] = statistics.median(loop)
    out["loop_cpu_share"] = round(sum(cpu_s) / sum(loop), 3)
    out["loop_preempted"] = int(status("nonvoluntary_ctxt_switches") or 0) - switches
    out["cpu_loop"] = this_cpu()
    x = torch.zeros(1024, device=device)
    launches = []
    for _ in range(6):
        sync()
        t0 = time.perf_counter()
        for _ in range(3000):
            x.add_(1)
        sync()
        launches.append((time.perf_counter() - t0) / 3000 * 1e6)
    out["launch_us"] = statistics.median(launches[1:])
    gpu = device.type == "cuda"
    cfg = BertConfig(num_hidden_layers=12 if gpu else 2)
    model = BertModel(cfg).to(device, torch.bfloat16 if gpu else torch.float32).eval()
    ids = torch.randint(0, cfg.vocab_size, (8, 128 if gpu else 16), device=device)
    steps = []
    with torch.no_grad():
        for i in range(40):
            sync()
            t0 = time.perf_counter()
            model(input_ids=ids)
            sync()
            if i >= 10:
                steps.append((time.perf_counter() - t0) * 1e3)
    out["bert_ms"] = statistics.median(steps)
    out["cpu_end"] = this_cpu()
    out["anon_huge_kb"] = rollup("AnonHugePages")  # huge pages mapped here (a fork: split by writes?)
    out["anon_kb"] = rollup("Anonymous")
    out["gc_collections"] = [s["collections"] for s in gc.get_stats()]
    return out


def main() -> None:
    from orchestrator.job.processes import fork_server
    from orchestrator.job.processes.fresh import run_module
    from orchestrator.job.processes.supervisor import PYTHON

    where = "cpu" if sys.argv[1:] == ["cpu"] else "cuda"
    work = os.path.abspath(os.environ.get("DIAG_DIR", "/tmp/fork-diag"))
    os.makedirs(work, exist_ok=True)
    extra = ("transformers.modeling_utils", "transformers:BertModel")
    every_cpu = os.sched_getaffinity(0)
    with contextlib.suppress(OSError):  # whether anonymous memory may be backed by huge pages
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
        print(json.dumps({"transparent_hugepage": thp}), flush=True)
    with contextlib.suppress(OSError):  # which CPU takes the GPU's interrupts
        lines = Path("/proc/interrupts").read_text().splitlines()
        Path(work, "interrupts.txt").write_text("\n".join([lines[0], *(x for x in lines if "nvidia" in x)]))
    with fork_server.serving(PYTHON, extra) as forks:
        for r in range(3):
            fork_cpu = None
            for how in ("fork", "interpreter", "pinned"):
                # the server named in this process's environment hands out the process (start)
                if how == "fork":
                    os.environ.update(forks)
                else:
                    os.environ.pop(fork_server.ADDRESS_ENV, None)
                if how == "pinned" and fork_cpu is not None:  # the interpreter inherits this affinity
                    os.sched_setaffinity(0, {fork_cpu})
                t0 = time.perf_counter()
                got, why = run_module(Path(work), 300, "fork_diag:answer", f"{how}{r}", {"where": where})
                process_s = round(time.perf_counter() - t0, 2)
                os.sched_setaffinity(0, every_cpu)
                if how == "fork" and got:
                    fork_cpu = got["cpu_loop"]
                line = {"round": r, "how": how, "process_s": process_s, **(got or {"why": why})}
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
