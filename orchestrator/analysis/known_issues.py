"""Failures that match a known bug of torch.compile, each reproduced outside this tool by a standalone
script under `benchmarks/upstream/` (written as PyTorch's bug template asks: versions, the few lines,
expected against seen). A failed job that matches one says so beside its status in the verdict."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from orchestrator.core.numbers import number
from orchestrator.core.result import COL

UPSTREAM = "benchmarks/upstream"


def _grads_off(row: pd.Series) -> bool:
    """A training job's parity failed on its gradients."""
    return (
        row.get(COL.status) == "parity_fail"
        and row.get(COL.task) == "train"
        and (number(row.get(COL.parity_grad_err)) or 0.0) > (number(row.get(COL.parity_tol)) or 0.0)
    )


def _counter_updated(row: pd.Series) -> bool:
    """The forward increments an integer buffer of its own (a step counter)."""
    updated = row.get(COL.parity_buffers_updated)
    return isinstance(updated, list) and any("(int" in str(b) for b in updated)


def _regions(row: pd.Series) -> bool:
    return _grads_off(row) and row.get(COL.scope) == "regions" and row.get(COL.backend) == "inductor"


def _counter(row: pd.Series) -> bool:
    return _grads_off(row) and _counter_updated(row)


KNOWN: list[tuple[Callable[[pd.Series], bool], str]] = [
    (
        _regions,
        "inductor's gradients under a nested_compile_region followed by a LayerNorm "
        f"({UPSTREAM}/regions_grad.py)",
    ),
    (
        _counter,
        "AOT autograd's gradient of a forward that increments and reads an integer buffer "
        f"({UPSTREAM}/counter_buffer_grad.py)",
    ),
]


def known_issue(row: pd.Series) -> str | None:
    """The known bug a failed job matches, in words with its repro's path; None where none does."""
    for matches, text in KNOWN:
        if matches(row):
            return f"known issue: {text}"
    return None
