"""Parity: compiled against eager, and against an fp64 reference where affordable, by the rule of
PyTorch's own accuracy checker; random ops are checked with matching randomness."""

from __future__ import annotations

import contextlib
import copy
import math
from pathlib import Path

import torch
from torch import nn

from orchestrator.job.context import JobContext, Side
from orchestrator.job.parallelize import full_tensor, prepare
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
        grads[_param_name(name)] = full_tensor(g)  # FSDP2: a DTensor, gathered
    return grads


def _reference(ctx: JobContext, use_fp64: bool) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Outputs (or loss) and gradients of the unwrapped single-process model, in fp64 if asked: a
    copy, freed on return (the eager side is the workload's own model and must stay as it is)."""
    ref_model, ref_inputs = copy.deepcopy(ctx.wl.model), ctx.inputs
    ref_model.zero_grad(set_to_none=True)
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


def _errors(ctx: JobContext, eager: Side, compiled: Side, out: dict, ref_vals: list, ref_grads: dict) -> dict:
    """Relative errors of the eager and compiled outputs (and gradients) against a reference."""
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
    return errs


def check_parity(ctx: JobContext, eager: Side, compiled: Side, out: dict, fp64: bool = True) -> bool:
    """Compiled against eager, the way PyTorch's accuracy checker judges it: it passes when it is
    within the dtype's tolerance of eager (normal reduction-order differences), or else when its
    error against an fp64 reference is within a small multiple of eager's own error. NaN never
    passes. Records the figures; returns whether it passed (the job keeps measuring either way)."""
    cfg, r = ctx.cfg, ctx.result
    tol = PARITY_TOL[cfg.bench.dtype]
    eager_grads = gradients(eager.model) if ctx.train else {}
    vs_eager = _errors(ctx, eager, compiled, out, flat_tensors(out["eager"]), eager_grads)
    close = _worst(vs_eager["compiled"], vs_eager.get("compiled_grad", 0.0))
    use_fp64 = fp64 and ctx.wl.n_params <= cfg.bench.fp64_max_params
    distributed = cfg.parallel.strategy != "none"
    errs = vs_eager
    if use_fp64 or distributed:  # against the unwrapped single-process model (fp64 where affordable)
        errs = _errors(ctx, eager, compiled, out, *_reference(ctx, use_fp64))
    err_c = _worst(errs["compiled"], errs.get("compiled_grad", 0.0))
    err_e = _worst(errs["eager"], errs.get("eager_grad", 0.0))
    if use_fp64:
        limit = cfg.bench.parity_multiplier * err_e + tol / 10
    else:
        limit = tol
    close, err_c, limit = ctx.all_reduce_max(close), ctx.all_reduce_max(err_c), -ctx.all_reduce_max(-limit)
    passed = bool(close <= tol or err_c <= limit)  # NaN compares False: NaN never passes
    r.update(
        parity_reference="fp64" if use_fp64 else ("single_process" if distributed else "eager"),
        parity_err=err_c,
        parity_vs_eager=close,
        parity_eager_err=err_e if use_fp64 else None,
        parity_out_err=errs["compiled"],
        parity_grad_err=errs.get("compiled_grad"),
        parity_limit=limit,
        parity_tol=tol,
        parity_rule="within tol of eager" if close <= tol else ("fp64 rule" if use_fp64 else "tol"),
        parity_ok=passed,
    )
    if not passed:
        r["parity_error"] = (
            f"compiled relative error {err_c:.3g} > limit {limit:.3g} ({r['parity_reference']}) "
            f"and {close:.3g} from eager > tol {tol:.3g}"
        )
    return passed


def check_random_parity(ctx: JobContext) -> bool:
    """For a model with random ops (dropout...): eager kernels and inductor's must draw the same
    random numbers, so both run the same traced graph from the same seed: the reference through
    `aot_eager` (eager kernels), the checked copy through inductor with `fallback_random` (its random
    ops call eager's). The timed compiled side is untouched; both copies are dropped after."""
    import dataclasses

    import torch._inductor.config

    from orchestrator.config import CompileMode

    cfg = ctx.cfg
    strategy, dtype = cfg.parallel.strategy, cfg.bench.dtype
    as_eager = dataclasses.replace(cfg.compile, backend="aot_eager", mode=CompileMode["default"])
    with torch._inductor.config.patch(fallback_random=True):
        reference = Side(prepare(ctx.wl, strategy, as_eager, ctx.device, dtype))
        checked = Side(prepare(ctx.wl, strategy, cfg.compile, ctx.device, dtype))
        torch.manual_seed(cfg.bench.seed)
        out = {"eager": ctx.forward_backward(reference.model, ctx.inputs)}
        torch.manual_seed(cfg.bench.seed)
        out["compiled"] = ctx.forward_backward(checked.model, ctx.inputs)
        passed = check_parity(ctx, reference, checked, out, fp64=False)
    ctx.result["parity_rng"] = (
        "random ops: checked against the same graph on eager kernels (aot_eager), same seed, "
        "inductor's fallback_random"
    )
    return passed


def check_sampled_parity(ctx: JobContext, eager_file: Path, compiled_file: Path) -> bool:
    """Parity of sides that ran in separate processes: the same strided sample of each side's first
    outputs and gradients (side_process.sampled), against the dtype's tolerance; no fp64 reference."""
    r, tol = ctx.result, PARITY_TOL[ctx.cfg.bench.dtype]
    if r.get("random_ops"):
        r.update(parity_ok=None, parity_rule="not checked: random ops draw differently in separate processes")
        return True
    e, c = torch.load(eager_file), torch.load(compiled_file)
    eager_file.unlink()
    compiled_file.unlink()
    out_err = rel_error(c["out"], e["out"])
    names = sorted(e["grads"])
    grad_err = rel_error([c["grads"][n] for n in names], [e["grads"][n] for n in names]) if names else None
    err = _worst(out_err, grad_err if grad_err is not None else 0.0)
    passed = bool(err <= tol)  # NaN compares False
    r.update(
        parity_reference="eager (strided sample; sides in separate processes)",
        parity_err=err,
        parity_vs_eager=err,
        parity_out_err=out_err,
        parity_grad_err=grad_err,
        parity_limit=tol,
        parity_tol=tol,
        parity_rule="within tol of eager (sampled)",
        parity_ok=passed,
    )
    if not passed:
        r["parity_error"] = f"compiled relative error {err:.3g} from eager (sampled) > tol {tol:.3g}"
    return passed
