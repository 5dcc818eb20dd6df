"""Parity's tolerance: by the dtype a model computes in, which is not always `bench.dtype`."""

from __future__ import annotations

import torch
from torch import nn

# Parity tolerance on the relative error norm, per compute dtype.
PARITY_TOL = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 5e-3}
_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp32"}


def compute_dtype(model: nn.Module, bench_dtype: str) -> str:
    """The dtype the model's arithmetic runs in: the least precise of its floating parameters' dtypes
    and the autocast dtype (`bench.dtype`); a model built in bf16 computes in bf16 under fp32."""
    found = {_NAMES.get(p.dtype, "fp32") for p in model.parameters() if p.is_floating_point()}
    found.add(bench_dtype)
    return max(found, key=lambda d: PARITY_TOL[d])
