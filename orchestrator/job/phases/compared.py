"""What parity compares, by name: a side's outputs (or loss), its parameters' gradients and its
buffers, unwrapped from DDP/FSDP/compile's prefixes; and the tensors furthest from a reference, so
that a parity failure names which one is off."""

from __future__ import annotations

import math

import torch
from torch import nn

from orchestrator.core.stats import rel_error
from orchestrator.job.context import JobContext, Side
from orchestrator.job.setup.parallelize import full_tensor
from workloads.inputs import TaskLoss

Reference = tuple[list[torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor]]
"""A reference's outputs (or loss), gradients by parameter and buffers by name."""


def flat_tensors(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, tuple | list):
        return [t for o in out for t in flat_tensors(o)]
    return []


def _param_name(name: str) -> str:
    """Parameter name without the wrappers' prefixes (DDP `module.`, compile `_orig_mod.`)."""
    return ".".join(p for p in name.split(".") if p not in ("module", "_orig_mod"))


def gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    """Full (unsharded) gradients by parameter name; every rank must call it (FSDP gathers)."""
    grads = {}
    for name, p in model.named_parameters():
        g = p.grad
        if g is None:
            continue
        grads[_param_name(name)] = full_tensor(g)  # FSDP2: a DTensor, gathered
    return grads


def buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every buffer by name (running statistics, step counters, caches), as the model holds it now."""
    return {_param_name(name): b for name, b in model.named_buffers()}


def snapshot_buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.detach().clone() for name, b in buffers(model).items()}


@torch.no_grad()
def load_buffers(model: nn.Module, saved: dict[str, torch.Tensor]) -> None:
    """Put saved buffers back (a warm-up call must not leave one side a step ahead of the other)."""
    for name, b in buffers(model).items():
        if name in saved:
            b.copy_(saved[name])


WORST_SHOWN = 3  # tensors a parity result names, the worst first


def _by_name(train: bool, tensors: Reference) -> dict[str, torch.Tensor]:
    """Compared tensors by name: `loss` (train) or `output[i]`, `grad <param>`, `buffer <name>`."""
    values, grads, bufs = tensors
    named = {("loss" if train and len(values) == 1 else f"output[{i}]"): t for i, t in enumerate(values)}
    named |= {f"grad {n}": g for n, g in grads.items()}
    return named | {f"buffer {n}": b for n, b in bufs.items()}


def tensor_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """One tensor's relative error against its reference; an integer tensor (a step counter) is exact or
    infinitely off, as the buffer check judges it (parity._buffer_error)."""
    if value.is_floating_point() or value.is_complex():
        return rel_error([value], [reference])
    return 0.0 if torch.equal(value.cpu(), reference.cpu()) else math.inf


def _named(ctx: JobContext, side: Side, out: object) -> dict[str, torch.Tensor]:
    """One side's compared tensors by name (`_by_name`)."""
    grads = gradients(side.model) if ctx.train else {}
    return _by_name(ctx.train, (flat_tensors(out), grads, buffers(side.model)))


def not_finite(train: bool, tensors: Reference, wrapped: bool) -> list[str]:
    """The compared tensors (`_by_name`) that hold NaN or Inf, as `grad fc.weight: NaN`, in compared order."""
    found = []
    for name, t in _by_name(train, tensors).items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            found.append(f"{_shown(name, wrapped)}: {'NaN' if bool(torch.isnan(t).any()) else 'Inf'}")
    return found


def eager_not_finite(ctx: JobContext, eager: Side, out: object) -> list[str]:
    """The eager side's outputs, gradients and buffers that hold NaN or Inf (`not_finite`)."""
    grads = gradients(eager.model) if ctx.train else {}
    wrapped = isinstance(ctx.wl.model, TaskLoss)
    return not_finite(ctx.train, (flat_tensors(out), grads, buffers(eager.model)), wrapped)


def _shown(name: str, wrapped: bool) -> str:
    """A tensor's name as the user's model has it: without the training wrapper's `inner.`."""
    if wrapped:
        kind, _, rest = name.partition(" ")
        return f"{kind} {rest.removeprefix('inner.')}" if rest else name
    return name


def sampled_wrapped(sample: dict) -> bool:
    """Whether a side's strided sample (side_process.sampled) is of the training wrapper's model: the
    workload is gone from the process that reads it, but every gradient under `inner.` says so."""
    return bool(sample["grads"]) and all(n.startswith("inner.") for n in sample["grads"])


def updated_buffers(ctx: JobContext, side: Side, start: dict[str, torch.Tensor]) -> list[str]:
    """The buffers a side's call changed from `start`, as `name (dtype)` by the user's names."""
    wrapped = isinstance(ctx.wl.model, TaskLoss)
    return [
        f"{_shown(f'buffer {n}', wrapped).removeprefix('buffer ')} ({str(b.dtype).removeprefix('torch.')})"
        for n, b in buffers(side.model).items()
        if n in start and not torch.equal(b.detach().cpu(), start[n].cpu())
    ]


def _ranked(rows: list[dict]) -> list[dict]:
    """The WORST_SHOWN rows furthest past their limits, by error over limit (NaN worst)."""
    ratio = lambda row: math.inf if math.isnan(row["err"]) else row["err"] / max(row["limit"], 1e-30)  # noqa: E731
    return sorted(rows, key=ratio, reverse=True)[:WORST_SHOWN]


def worst_tensors(
    ctx: JobContext,
    eager: Side,
    compiled: Side,
    out: dict,
    ref: Reference,
    limit_of: dict[str, float] | None,
    tol: float,
) -> list[dict]:
    """The compiled tensors furthest from the reference, each with its error and its limit (`tol`,
    or under the fp64 rule the multiple of eager's own error on that tensor): the worst WORST_SHOWN
    by error over limit, so that a failure names which output, gradient or buffer is off."""  # fmt: skip
    reference = _by_name(ctx.train, ref)
    mine, theirs = _named(ctx, compiled, out["compiled"]), _named(ctx, eager, out["eager"])
    wrapped = isinstance(ctx.wl.model, TaskLoss)
    rows = []
    for name, r in reference.items():
        if name not in mine or mine[name].shape != r.shape:
            continue
        err = tensor_error(mine[name], r)
        limit = tol
        if limit_of is not None and name in theirs:  # the fp64 rule, tensor by tensor
            limit = limit_of["multiplier"] * tensor_error(theirs[name], r) + tol / 10
        rows.append({"tensor": _shown(name, wrapped), "err": err, "limit": limit})
    return _ranked(rows)


def twin_errors(ctx: JobContext, eager: Side, compiled: Side, out: dict) -> dict[str, float]:
    """Each compared tensor's error, compiled against its eager side, as plain numbers (the sides can
    then be freed before anything else takes the device)."""
    mine, theirs = _named(ctx, compiled, out["compiled"]), _named(ctx, eager, out["eager"])
    return {n: tensor_error(mine[n], t) for n, t in theirs.items() if n in mine and mine[n].shape == t.shape}


def worst_by_rounding(
    ctx: JobContext, errors: dict[str, float], off: tuple[Reference, Reference], multiplier: float, tol: float
) -> list[dict]:
    """`worst_tensors` for a model with random ops (random_parity.py): each compiled tensor's error
    against its eager-kernel twin (`twin_errors`), its limit `multiplier` times eager's own error on
    that tensor against an upcast copy, both with the random ops off (`off`: eager's, the copy's), plus
    a tenth of `tol` (`tol` where the copy lacks the tensor)."""
    rounded, truth = (_by_name(ctx.train, r) for r in off)
    wrapped = isinstance(ctx.wl.model, TaskLoss)
    rows = []
    for name, err in errors.items():
        limit = tol
        if name in rounded and name in truth and rounded[name].shape == truth[name].shape:
            limit = multiplier * tensor_error(rounded[name], truth[name]) + tol / 10
        rows.append({"tensor": _shown(name, wrapped), "err": err, "limit": limit})
    return _ranked(rows)


def worst_sampled(ctx: JobContext, eager: dict, compiled: dict, tol: float) -> list[dict]:
    """`worst_tensors` for sides run in separate processes: their strided samples (`out`, `grads`
    by name: side_process.sampled), each tensor's sample against eager's, limit `tol`."""
    mine = _by_name(ctx.train, (compiled["out"], compiled["grads"], {}))
    theirs = _by_name(ctx.train, (eager["out"], eager["grads"], {}))
    wrapped = sampled_wrapped(eager)
    rows = [
        {"tensor": _shown(name, wrapped), "err": tensor_error(mine[name], t), "limit": tol}
        for name, t in theirs.items()
        if name in mine
    ]
    return _ranked(rows)
