"""Where the primer's seconds go on this host: each part of `prime` timed, twice in one process.
python3 benchmarks/h200-gate/prime_parts.py cuda|cpu   (one JSON line per part)"""

import json
import os
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
marks = {"import_torch": time.perf_counter() - t0}


def part(name, fn):
    t = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    marks[name] = time.perf_counter() - t


def compile_tiny(backward: bool):
    from torch._inductor.utils import fresh_cache

    x = torch.randn(8, device=device, requires_grad=backward)
    with fresh_cache():
        y = torch.compile(lambda t: (t.sin() * 2).sum())(x)
        if backward:
            y.backward()
    torch._dynamo.reset()


def isa():
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list

    valid_vec_isa_list()


part("cuda_init", lambda: torch.zeros(1, device=device))
part("vec_isa", isa)
part("compile_fwd_1", lambda: compile_tiny(False))
part("compile_fwd_2", lambda: compile_tiny(False))
part("compile_train_1", lambda: compile_tiny(True))
part("compile_train_2", lambda: compile_tiny(True))
from torch._inductor import config  # noqa: E402

marks["compile_threads"] = config.compile_threads
marks["worker_start_method"] = config.worker_start_method
marks["cpus"] = os.cpu_count()
print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in marks.items()}))
