"""Which collectives gloo runs on CUDA tensors when two ranks share one GPU (issue 18).

NCCL refuses two ranks on one device, so the shared-GPU DDP/FSDP2 path uses gloo; on the H200 the
FSDP2 jobs died by SIGSEGV. Each collective that DDP and FSDP2 use runs here in its own pair of
fresh processes (a segfault ends only that pair), on float32 and bf16 CUDA tensors (CPU tensors
where no GPU is), with the result checked; one JSON line per case.

    python benchmarks/h200-parallel-1gpu/gloo_cuda_probe.py
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CASES = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor", "all_gather")


def _rank(rank: int, case: str, device: str, dtype: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    dev = torch.device("cuda:0" if device == "cuda" else "cpu")
    x = torch.full((4,), float(rank + 1), device=dev, dtype=getattr(torch, dtype))
    if case == "all_reduce":
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
    for dtype in ("float32", "bfloat16"):  # FSDP2 all-gathers bf16 parameters (its mixed precision)
        for case in CASES:
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
