"""Is a fork of the fork server slower at launching work than a new interpreter? The same
measurements (a pure-Python loop, small-kernel launches, BERT-base eager forward) in a fork and in
an interpreter, interleaved, three rounds; one JSON line per process on stdout. (run4-ab ran it
with the server's gc.freeze() of commit 5fccda8, since taken out; run5-ab2's three-way version, with
that commit's spares, was cut before it ran.)

    PYTHONPATH=benchmarks/h200-time-to-answer:. python benchmarks/h200-time-to-answer/fork_diag.py [cpu]
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import threading
import time


def answer(spec: object, req: dict) -> dict:
    """In the fresh process (a fork or an interpreter): the measurements and the conditions."""
    import torch
    from transformers import BertConfig, BertModel

    from orchestrator.job import fork_server

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
    loop = []
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        loop.append((time.perf_counter() - t0) * 1e3)
    out["py_loop_ms"] = statistics.median(loop)
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
    out["gc_collections"] = [s["collections"] for s in gc.get_stats()]
    return out


def main() -> None:
    from orchestrator.job import fork_server
    from orchestrator.job.fresh import run_module
    from orchestrator.job.supervisor import PYTHON

    where = "cpu" if sys.argv[1:] == ["cpu"] else "cuda"
    work = os.path.abspath(os.environ.get("DIAG_DIR", "/tmp/fork-diag"))
    os.makedirs(work, exist_ok=True)
    from pathlib import Path

    extra = ("transformers.modeling_utils", "transformers:BertModel")
    with fork_server.serving(PYTHON, extra) as forks:
        for r in range(3):
            for how in ("fork", "interpreter"):
                # the server named in this process's environment hands out the process (start)
                if how == "fork":
                    os.environ.update(forks)
                else:
                    os.environ.pop(fork_server.ADDRESS_ENV, None)
                t0 = time.perf_counter()
                got, why = run_module(Path(work), 300, "fork_diag:answer", f"{how}{r}", {"where": where})
                process_s = round(time.perf_counter() - t0, 2)
                line = {"round": r, "how": how, "process_s": process_s, **(got or {"why": why})}
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
