"""Where a compiled BERT inference step's time goes, on one host in one process: the same compiled
model called the orchestrator's way (autocast and no_grad entered around a compiled module each step)
and PyTorch's harness's way (one compiled function with autocast inside), with and without an
attention mask; each timed as a block of steps with one synchronize (GPU-bound or host-bound alike)
and as host time per call (no synchronize: how long Python and the guards take to launch a step).

    python3 benchmarks/h200-real/call_overhead.py [--size default] [--steps 50]   (one JSON line per case)
"""

# ruff: noqa: B023 (each case's closures are called within its own iteration)
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402


def blocks(fn, steps: int, repeats: int = 5) -> tuple[float, float]:
    """(ms per step over a synchronized block: median of repeats, host ms per call without a sync)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    per_block = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        per_block.append((time.perf_counter() - t0) / steps * 1000)
    host = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - t0) * 1000)
    torch.cuda.synchronize()
    return statistics.median(per_block), statistics.median(host)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="default")
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    torch.manual_seed(0)
    config = transformers.BertConfig()
    config.use_cache = False
    model = transformers.BertForMaskedLM(config).cuda().eval()
    ids = torch.randint(0, config.vocab_size, (16, 512), device="cuda")
    for mask in (False, True):
        inputs = {"input_ids": ids, "labels": ids.clone()}
        if mask:
            inputs["attention_mask"] = torch.ones_like(ids)
        amp = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731

        def eager() -> None:
            with torch.no_grad(), amp():
                model(**inputs)

        compiled_model = torch.compile(model)

        def ours() -> None:  # the orchestrator's step: contexts around a compiled module
            with torch.no_grad(), amp():
                compiled_model(**inputs)

        def forward_pass(mod, inp):  # the harness's: autocast inside the compiled function
            with amp():
                return mod(**inp)

        compiled_fn = torch.compile(forward_pass)

        def harness() -> None:
            with torch.no_grad():
                compiled_fn(model, inputs)

        for name, fn in (("eager", eager), ("ours", ours), ("harness", harness)):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t0
            block_ms, host_ms = blocks(fn, args.steps)
            print(json.dumps({"mask": mask, "call": name, "block_ms": block_ms, "host_ms": host_ms,
                              "first_call_s": first_s}), flush=True)  # fmt: skip
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
