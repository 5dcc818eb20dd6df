"""A job's compile settings, scoped to it: its own cache directory (inductor's and triton's, with
inductor's in-process caches cleared on the way in and out), freezing, `compile.options`, the
recompile limit, and the numerics both sides run at (the fp32 matmul precision, the math attention
kernel's reduction). Nothing here outlives the scope that set it.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
import torch._dynamo
import torch._inductor.config

from orchestrator.config.schema import Config
from orchestrator.core.env_scope import scoped_environ
from orchestrator.core.result import Numerics
from orchestrator.job.setup.inductor_options import flatten


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


def numerics_now() -> Numerics:
    """The numerics in effect here (inside a job's scope: the job's), read back from torch."""
    cuda = torch.backends.cuda
    precision = torch.get_float32_matmul_precision()
    reduced = cuda.fp16_bf16_reduction_math_sdp_allowed()
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    words = f"matmul {precision}" + (" (TF32)" if precision != "highest" else "")
    words += f", cuDNN TF32 {'on' if cudnn_tf32 else 'off'}, SDP math {'reduced' if reduced else 'fp32'}"
    return Numerics(
        num_matmul_precision=precision,
        num_cuda_matmul_tf32=cuda.matmul.allow_tf32,
        num_cudnn_tf32=cudnn_tf32,
        num_cudnn_benchmark=torch.backends.cudnn.benchmark,
        num_sdp_reduced_math=reduced,
        numerics=words,
    )
