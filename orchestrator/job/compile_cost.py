"""Compile cost that does not depend on job order: where the seconds went, and the caches' part.

Torch records every frame it compiles (`torch._dynamo.utils.get_compilation_metrics()`): nested
cumulative times for dynamo, AOT autograd, inductor and its code generation, kernel compile and
autotune times, cache hits and misses, guard counts, recompile and CUDA-graph-skip reasons. The
phases below are the differences of the nested times, so they add up to no more than the wall
time of the call that compiled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
import torch._dynamo
import torch._inductor.config

from orchestrator.config.schema import Config
from orchestrator.core.env_scope import scoped_environ
from orchestrator.job.inductor_options import flatten
from orchestrator.job.result import COMPILE_PHASES, CompileMetrics

US = 1e-6
ARTIFACTS_FILE = "compile_artifacts.bin"
# Exclusive phases, from the nested cumulative times (microseconds) of each compiled frame; the
# `backward` phase is the AOT part of a backward graph compiled at its first call (its inductor and
# code-generation seconds count in those phases).
# Counts summed over frames: result field -> torch's compilation-metrics field.
COUNTED = {
    "fx_cache_hits": "inductor_fx_local_cache_hit_count",
    "fx_cache_misses": "inductor_fx_local_cache_miss_count",
    "aot_cache_hits": "aotautograd_local_cache_hit_count",
    "aot_cache_misses": "aotautograd_local_cache_miss_count",
    "guard_count": "guard_count",
    "graph_ops": "graph_op_count",  # ops in the captured graphs: what the scope compiled
}


def _us(metric: object, name: str) -> float:
    return float(getattr(metric, name, None) or 0) * US


def summarize(metrics: list) -> CompileMetrics:
    """Phases (s), cache hits and misses, guards and reasons, summed over compiled frames."""
    phases = dict.fromkeys(COMPILE_PHASES, 0.0)
    out = CompileMetrics(compile_frames=len(metrics))
    counts = dict.fromkeys(COUNTED, 0)
    for m in metrics:
        inductor = _us(m, "inductor_cumulative_compile_time_us")
        codegen = _us(m, "inductor_code_gen_cumulative_compile_time_us")
        if getattr(m, "is_forward", True) is False:
            # A backward compiled at its first call: its own entry, nested backward > inductor > codegen.
            phases["backward"] += max(_us(m, "backward_cumulative_compile_time_us") - inductor, 0.0)
        else:
            dynamo = _us(m, "dynamo_cumulative_compile_time_us")
            aot = _us(m, "aot_autograd_cumulative_compile_time_us")
            phases["dynamo"] += max(dynamo - aot, 0.0)
            phases["aot_autograd"] += max(aot - inductor, 0.0)
        phases["inductor"] += max(inductor - codegen, 0.0)
        phases["codegen"] += codegen
        out.compile_kernel_s += _us(m, "triton_compile_time_us")
        out.compile_autotune_s += _us(m, "compile_time_autotune_time_us") + _us(
            m, "runtime_triton_autotune_time_us"
        )
        for key, name in COUNTED.items():
            counts[key] += int(getattr(m, name, None) or 0)
        if getattr(m, "recompile_reason", None):
            out.recompile_reasons.append(str(m.recompile_reason)[:300])
        if getattr(m, "cudagraph_skip_reason", None):
            out.cudagraph_skip_reasons.append(str(m.cudagraph_skip_reason)[:300])
    out = dataclasses.replace(out, **counts, **{f"phase_{k}_s": v for k, v in phases.items()})
    out.compile_cache_hits = out.fx_cache_hits + out.aot_cache_hits
    return out


def compilation_metrics() -> list:
    from torch._dynamo.utils import get_compilation_metrics

    return list(get_compilation_metrics())


def clear_compilation_metrics() -> None:
    from torch._dynamo.utils import clear_compilation_metrics as clear

    clear()


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


def save_artifacts(job_dir: Path) -> Path | None:
    """The compile's portable cache artifacts (`torch.compiler.save_cache_artifacts`), to a file."""
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return None
    path = job_dir / ARTIFACTS_FILE
    path.write_bytes(saved[0])
    return path


@contextlib.contextmanager
def torch_trace(trace_dir: Path | None) -> Iterator[None]:
    """Structured compile logs into `trace_dir` (what TORCH_TRACE does, for this scope; tlparse reads it)."""
    if trace_dir is None:
        yield
        return
    from torch._logging._internal import LazyTraceHandler, TorchLogsFormatter, trace_log

    trace_dir.mkdir(parents=True, exist_ok=True)
    handler = LazyTraceHandler(str(trace_dir))
    handler.setFormatter(TorchLogsFormatter(trace=True))
    level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(level)
        handler.close()


def fresh_dir(parent: Path, prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


@contextlib.contextmanager
def inductor_cache(path: Path) -> Iterator[Path]:
    """Inductor and triton compile into `path` for the scope (torch reads these variables at
    compile time), with inductor's in-process caches cleared on the way in and out."""
    from torch._inductor.utils import clear_caches

    clear_caches()
    try:
        with scoped_environ({"TORCHINDUCTOR_CACHE_DIR": str(path), "TRITON_CACHE_DIR": str(path / "triton")}):
            yield path
    finally:
        clear_caches()


@contextlib.contextmanager
def compile_settings(cfg: Config, cache: Path) -> Iterator[None]:
    """A job's compile settings in scope: its cache directory, freezing, `compile.options`, the
    recompile limit, and the fp32 matmul precision both sides run at (`bench.matmul_precision`)."""
    compile_cfg, n_shapes = cfg.compile, len(cfg.workload.shapes)
    with (
        inductor_cache(cache),
        matmul_precision(str(cfg.bench.matmul_precision), cfg.bench.sdp_reduced_math),
        torch._inductor.config.patch(freezing=bool(compile_cfg.freezing)),
        torch._inductor.config.patch(flatten(compile_cfg.options or {})),
        # A shape schedule must not hit the recompile limit, or the count would stop there.
        torch._dynamo.config.patch(recompile_limit=max(8, n_shapes + 4)),
    ):
        yield


@contextlib.contextmanager
def matmul_precision(precision: str, sdp_reduced_math: bool = False) -> Iterator[None]:
    """torch.set_float32_matmul_precision for the scope (`high`: TF32 tensor cores), and whether the
    math attention kernel may reduce in bf16/fp16 instead of upcasting to fp32: PyTorch's harness
    sets both (common.py: `allow_tf32 = True`, `allow_fp16_bf16_reduction_math_sdp(True)`). Restored
    after."""
    before = torch.get_float32_matmul_precision()
    sdp = torch.backends.cuda
    sdp_before = sdp.fp16_bf16_reduction_math_sdp_allowed()
    torch.set_float32_matmul_precision(precision)
    sdp.allow_fp16_bf16_reduction_math_sdp(sdp_reduced_math)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
        sdp.allow_fp16_bf16_reduction_math_sdp(sdp_before)


def tlparse_report(trace_dir: Path, out: Path) -> Path | None:
    """tlparse's HTML report of the newest trace log, where tlparse is installed (beside this Python
    or on PATH); None otherwise or when it fails (the raw trace stays either way)."""
    import shutil
    import subprocess
    import sys

    exe = shutil.which("tlparse", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    logs = sorted(trace_dir.glob("*.log"), key=lambda p: p.stat().st_mtime)
    if exe is None or not logs:
        return None
    proc = subprocess.run(
        [exe, str(logs[-1]), "-o", str(out), "--overwrite", "--no-browser"], capture_output=True, timeout=300
    )
    index = out / "index.html"
    return index if proc.returncode == 0 and index.exists() else None
