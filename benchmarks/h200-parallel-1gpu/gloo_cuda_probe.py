"""Which collectives gloo runs on CUDA tensors when two ranks share one GPU (issue 18).

NCCL refuses two ranks on one device, so the shared-GPU DDP/FSDP2 path uses gloo; on the H200 the
FSDP2 jobs died by SIGSEGV. Each collective that DDP and FSDP2 use runs here in its own pair of
fresh processes (a segfault ends only that pair), on float32 and bf16 CUDA tensors (CPU tensors
where no GPU is), with the result checked; then FSDP2 itself (`fully_shard` of two linear layers,
one training step) in float32 and with bf16 mixed precision. One JSON line per case; with
LD_PRELOAD=native_trace.so (benchmarks/h200-crashes/) a crash prints its native stack.

    python benchmarks/h200-parallel-1gpu/gloo_cuda_probe.py [WORD ...]   (only cases whose name
                                                                   or dtype holds a WORD)
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CASES = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor", "all_gather")
FSDP_CASES = ("fsdp2-float32", "fsdp2-bf16-mixed-precision")


def _fsdp_step(case: str, dev: torch.device) -> bool:
    """One FSDP2 training step; both ranks must end with the same (all-gathered) weights."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).to(dev)
    bf16 = case.endswith("mixed-precision")
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32)
    for layer in (model[0], model[2]):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(8, 64, device=dev)).float().square().mean().backward()
    opt.step()
    weight = model[0].weight.full_tensor()
    outs = [torch.empty_like(weight) for _ in range(2)]
    dist.all_gather(outs, weight)
    return bool(torch.isfinite(weight).all()) and torch.equal(outs[0], outs[1])


def _rank(rank: int, case: str, device: str, dtype: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    dev = torch.device("cuda:0" if device == "cuda" else "cpu")
    x = torch.full((4,), float(rank + 1), device=dev, dtype=getattr(torch, dtype))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if case in FSDP_CASES:
        ok = _fsdp_step(case, dev)
    elif case == "all_reduce":
        dist.all_reduce(x)
        ok = bool((x == 3).all())
    elif case == "broadcast":
        dist.broadcast(x, src=0)
        ok = bool((x == 1).all())
    elif case == "all_gather_into_tensor":
        out = torch.empty(8, device=dev, dtype=x.dtype)
        dist.all_gather_into_tensor(out, x)
        ok = out.tolist() == [1.0] * 4 + [2.0] * 4
    elif case == "reduce_scatter_tensor":
        out = torch.empty(2, device=dev, dtype=x.dtype)
        dist.reduce_scatter_tensor(out, x)
        ok = out.tolist() == [3.0, 3.0]
    else:
        outs = [torch.empty(4, device=dev, dtype=x.dtype) for _ in range(2)]
        dist.all_gather(outs, x)
        ok = [o.tolist() for o in outs] == [[1.0] * 4, [2.0] * 4]
    if not ok:
        raise SystemExit(3)
    dist.destroy_process_group()


def main() -> None:
    port = 29700
    device = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the probe checked where no GPU is
    # FSDP2 all-gathers bf16 parameters (its mixed precision); its own cases set their dtypes.
    runs = [(dtype, case) for dtype in ("float32", "bfloat16") for case in CASES]
    runs += [("float32", case) for case in FSDP_CASES]
    words = sys.argv[1:]
    for dtype, case in [r for r in runs if not words or any(w in f"{r[0]} {r[1]}" for w in words)]:
        port += 1
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_rank, args=(r, case, device, dtype, port)) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
        codes = [p.exitcode for p in procs]
        ok = all(c == 0 for c in codes)
        line = {"torch": torch.__version__, "device": device, "dtype": dtype, "collective": case}
        print(json.dumps(line | {"ok": ok, "exit_codes": codes}), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
