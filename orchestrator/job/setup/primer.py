"""The primer: a throwaway compile that pays a process's and a machine's one-off costs before the
job's timed cold compile, so that `compile_s` holds only the model's own compile.
"""

from __future__ import annotations

import torch
import torch._dynamo

from orchestrator.core.env_scope import scoped_environ


def prime(device: torch.device, backward: bool, aoti: bool) -> None:
    """Pay this process's and machine's one-offs (inductor's imports, the C++ precompiled header,
    the kernel compiler's start) on a throwaway function in a throwaway cache, so that the job's
    cold figure holds only its own model's compile; `backward` for a job that trains, `aoti` for
    one compiled ahead of time (its C++ wrapper is built for this CPU whatever the device)."""
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    from torch._inductor.utils import fresh_cache

    # Which vector instructions the CPU's kernels may use: inductor builds a test library per ISA
    # into the current cache (about 10 s on 2 cores) and remembers the answer for the process. In a
    # node-wide cache of its own the libraries are built once per machine, not once per job. A GPU
    # job's kernels are Triton's and never ask (AOTInductor's C++ wrapper does); there the check
    # only costs: torch 2.11 loads each test library in a Python that imports torch, 51-59 s a
    # process on the H200 host (benchmarks/h200-gate/), paid by the job and again by each probe.
    if device.type == "cpu" or aoti:
        with scoped_environ({"TORCHINDUCTOR_CACHE_DIR": default_cache_dir() + "-isa"}):
            valid_vec_isa_list()
    x = torch.randn(8, device=device, requires_grad=backward)
    with fresh_cache():
        y = torch.compile(lambda t: (t.sin() * 2).sum())(x)
        if backward:
            y.backward()
    torch._dynamo.reset()
