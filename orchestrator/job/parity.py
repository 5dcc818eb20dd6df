"""Parity: compiled against eager, or against an fp64 reference where affordable (PyTorch's harness
rule: the compiled error must be within a small multiple of eager's own error)."""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from orchestrator.failures import ParityError
from orchestrator.job.context import JobContext, Side
from orchestrator.stats import rel_error

# Parity tolerance on the relative error norm, per compute dtype.
PARITY_TOL = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 5e-3}


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
        if hasattr(g, "full_tensor"):  # FSDP2 DTensor
            g = g.full_tensor()
        grads[_param_name(name)] = g
    return grads


def _reference(ctx: JobContext, use_fp64: bool) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Outputs (or loss) and gradients of the unwrapped single-process model, in fp64 if asked."""
    ref_model, ref_inputs = ctx.wl.model, ctx.inputs
    if use_fp64:
        ref_model = ref_model.double()
        ref_inputs = tuple(t.double() if t.is_floating_point() else t for t in ctx.inputs)
    with contextlib.ExitStack() as stack:
        if not use_fp64:
            stack.enter_context(ctx.amp())
        if ctx.train:
            loss = ref_model(*ref_inputs)
            loss.backward()
            return [loss.detach()], gradients(ref_model)
        with torch.no_grad():
            return flat_tensors(ref_model(*ref_inputs)), {}


def _worst(*errors: float) -> float:
    return max(errors, key=lambda x: (math.isnan(x), x))


def check_parity(ctx: JobContext, eager: Side, compiled: Side, out: dict) -> None:
    """Relative error of compiled (and eager) against the reference; raises ParityError past the limit."""
    cfg, r = ctx.cfg, ctx.result
    tol = PARITY_TOL[cfg.bench.dtype]
    use_fp64 = ctx.wl.n_params <= cfg.bench.fp64_max_params
    ref_needed = use_fp64 or cfg.parallel.strategy != "none"
    if ref_needed:
        ref_vals, ref_grads = _reference(ctx, use_fp64)
    else:
        ref_vals = flat_tensors(out["eager"])
        ref_grads = gradients(eager.model) if ctx.train else {}
    errs = {
        "eager": rel_error(flat_tensors(out["eager"]), ref_vals),
        "compiled": rel_error(flat_tensors(out["compiled"]), ref_vals),
    }
    if ctx.train:
        e_grads, c_grads = gradients(eager.model), gradients(compiled.model)
        names = sorted(ref_grads)
        ref_list = [ref_grads[n] for n in names]
        errs["eager_grad"] = rel_error([e_grads[n] for n in names], ref_list)
        errs["compiled_grad"] = rel_error([c_grads[n] for n in names], ref_list)
    if ref_needed:
        ctx.wl.model.zero_grad(set_to_none=True)
    err_c = _worst(errs["compiled"], errs.get("compiled_grad", 0.0))
    err_e = _worst(errs["eager"], errs.get("eager_grad", 0.0))
    limit = cfg.bench.parity_multiplier * err_e + tol / 10 if use_fp64 else tol
    err_c, limit = ctx.all_reduce_max(err_c), -ctx.all_reduce_max(-limit)
    r.update(
        parity_reference="fp64" if use_fp64 else ("single_process" if ref_needed else "eager"),
        parity_err=err_c,
        parity_eager_err=err_e if use_fp64 else None,
        parity_out_err=errs["compiled"],
        parity_grad_err=errs.get("compiled_grad"),
        parity_limit=limit,
        parity_tol=tol,
    )
    r["parity_ok"] = bool(err_c <= limit)  # NaN compares False: NaN never passes
    if not r["parity_ok"]:
        raise ParityError(
            f"compiled relative error {err_c:.3g} > limit {limit:.3g} ({r['parity_reference']})"
        )
