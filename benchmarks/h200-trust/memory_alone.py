"""Independent check of the orchestrator's per-side memory: one side, alone in this process.

Plain torch, none of the orchestrator's job code: build the GPT workload, optionally compile it with
MODE, train (or infer) a few steps under bf16 autocast with fused AdamW, and print the peak of
`torch.cuda.max_memory_allocated` since the process started (weights, gradients, optimizer state,
activations, and for CUDA-graph modes the graph pool).

    python benchmarks/h200-trust/memory_alone.py --size gpt2 --mode eager|default|reduce-overhead|...
"""

from __future__ import annotations

import argparse
import json

import torch

from orchestrator.config.schema import WorkloadConfig
from workloads import build_workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="gpt2")
    ap.add_argument("--mode", default="eager")
    ap.add_argument("--task", default="train")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    device = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats(device)
    wl = build_workload(WorkloadConfig(size=args.size), args.task, device, 0)
    model = wl.model
    if args.mode != "eager":
        model = torch.compile(model, **({} if args.mode == "default" else {"mode": args.mode}))
    inputs = wl.make_inputs(None)
    opt = torch.optim.AdamW(wl.model.parameters(), lr=1e-4, fused=True) if args.task == "train" else None
    for _ in range(args.steps):
        if args.mode in ("reduce-overhead", "max-autotune"):
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if opt is None:
                with torch.no_grad():
                    model(*inputs)
                continue
            loss = model(*inputs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    print(json.dumps({"size": args.size, "mode": args.mode, "task": args.task, "peak_gib": peak}))


if __name__ == "__main__":
    main()
