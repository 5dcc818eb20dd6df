"""Parity: compiled against eager, and against an fp64 reference where affordable, by the rule of
PyTorch's own accuracy checker, with its tolerance by the dtype a model computes in; models with random
ops: random_parity.py. Eager itself non-finite is
its own failure (no parity to judge). The whole rule, its failure's words, and the sampled check of sides run
apart, in one place."""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn
from torch.nn.modules.batchnorm import _NormBase

from orchestrator.core.failures import EagerNotFiniteError, ParityError
from orchestrator.core.result import Parity
from orchestrator.core.stats import rel_error
from orchestrator.job.context import JobContext, Side, first_line
from orchestrator.job.phases.compared import (
    Reference,
    buffers,
    eager_not_finite,
    flat_tensors,
    gradients,
    load_buffers,
    not_finite,
    sampled_wrapped,
    updated_buffers,
    worst_sampled,
    worst_tensors,
)
from orchestrator.job.setup.compile_settings import matmul_precision
from workloads.inputs import call, map_inputs

# The tolerance on the relative error norm, by the dtype a model computes in (not always `bench.dtype`).
PARITY_TOL = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 5e-3}
_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp32"}
_COARSER = ("fp32", "fp16", "bf16")  # each less precise than the one before it


def compute_dtype(model: nn.Module, bench_dtype: str) -> str:
    """The dtype the model's arithmetic runs in: the least precise of its floating parameters' dtypes
    and the autocast dtype (`bench.dtype`); a model built in bf16 computes in bf16 under fp32."""
    found = {_NAMES.get(p.dtype, "fp32") for p in model.parameters() if p.is_floating_point()}
    found.add(bench_dtype)
    return max(found, key=_COARSER.index)


def _buffer_error(bufs: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]) -> float | None:
    """Relative error of the floating buffers against the reference's; an integer buffer (a step
    counter) that differs at all is an infinite error. None for a model without buffers."""
    if not ref:
        return None
    for name, r in ref.items():
        if not r.is_floating_point() and not torch.equal(bufs[name].cpu(), r.cpu()):
            return math.inf
    floats = [n for n in sorted(ref) if ref[n].is_floating_point()]
    return rel_error([bufs[n] for n in floats], [ref[n] for n in floats]) if floats else 0.0


@contextlib.contextmanager
def full_fp32() -> Iterator[None]:
    """fp32 matmuls and cuDNN convolutions at full precision (no TF32) for the scope: a reference."""
    cudnn_before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        with matmul_precision("highest"):
            yield
    finally:
        torch.backends.cudnn.allow_tf32 = cudnn_before


def reference_step(ctx: JobContext, upcast: torch.dtype | None, random_off: bool = False) -> Reference:
    """Outputs (or loss), gradients and buffers of the unwrapped single-process model after one call
    from the sides' common start: upcast to `upcast` (`full_fp32`), or under the job's autocast where
    None; with its random ops off where `random_off` (eval mode, but normalization layers with running
    statistics kept training: random_parity.py). A copy, freed on return (the eager side is the
    workload's own model and must stay as it is)."""
    ref_model, ref_inputs = copy.deepcopy(ctx.wl.model), ctx.inputs
    ref_model.zero_grad(set_to_none=True)
    load_buffers(ref_model, ctx.start_buffers or {})  # where the compared calls started
    if random_off:
        ref_model.eval()
        for m in ref_model.modules():  # eval would swap batch statistics for running ones
            if isinstance(m, _NormBase) and m.track_running_stats:
                m.train()
    if upcast is not None:
        ref_model = ref_model.to(upcast)
        ref_inputs = map_inputs(ctx.inputs, lambda t: t.to(upcast) if t.is_floating_point() else t)
    with ctx.amp() if upcast is None else full_fp32():
        if ctx.train:
            loss = call(ref_model, ref_inputs)
            loss.backward()
            return [loss.detach()], gradients(ref_model), buffers(ref_model)
        with torch.no_grad():
            return flat_tensors(call(ref_model, ref_inputs)), {}, buffers(ref_model)


def upcast_fits(ctx: JobContext, dtype: torch.dtype) -> bool:
    """An upcast copy of the model (with its gradients) takes at most half the device's free memory."""
    if ctx.device.type != "cuda":
        return True
    need = ctx.wl.n_params * dtype.itemsize * (2 if ctx.train else 1)
    return need <= torch.cuda.mem_get_info(ctx.device)[0] / 2


def _worst(*errors: float | None) -> float:
    return max((e for e in errors if e is not None), key=lambda x: (math.isnan(x), x), default=0.0)


def _errors(ctx: JobContext, eager: Side, compiled: Side, out: dict, ref: Reference) -> dict:
    """Relative errors of the eager and compiled outputs, gradients and buffers against a reference."""
    ref_vals, ref_grads, ref_bufs = ref
    errs = {
        "eager": rel_error(flat_tensors(out["eager"]), ref_vals),
        "compiled": rel_error(flat_tensors(out["compiled"]), ref_vals),
        "eager_buf": _buffer_error(buffers(eager.model), ref_bufs),
        "compiled_buf": _buffer_error(buffers(compiled.model), ref_bufs),
    }
    if ctx.train:
        e_grads, c_grads = gradients(eager.model), gradients(compiled.model)
        names = sorted(ref_grads)
        ref_list = [ref_grads[n] for n in names]
        errs["eager_grad"] = rel_error([e_grads[n] for n in names], ref_list)
        errs["compiled_grad"] = rel_error([c_grads[n] for n in names], ref_list)
    return errs


def reference_error(values: Reference, ref: Reference) -> float:
    """One call's tensors against a reference's, as `_errors` judges a side: the worst of the outputs'
    (or loss's), the gradients' (all at once) and the buffers' (`_buffer_error`)."""
    names = sorted(ref[1])
    grads = rel_error([values[1][n] for n in names], [ref[1][n] for n in names]) if names else None
    return _worst(rel_error(values[0], ref[0]), grads, _buffer_error(values[2], ref[2]))


def upcast_for(ctx: JobContext, computes: str) -> torch.dtype | None:
    """The reference copy's dtype: fp64 up to `bench.fp64_max_params`; beyond, fp32 where the model
    computes below it (`computes`: compute_dtype's name); None where no copy is more precise."""
    if ctx.wl.n_params <= ctx.cfg.bench.fp64_max_params:
        return torch.float64
    return torch.float32 if computes != "fp32" else None


NOT_FINITE_SHOWN = 3  # non-finite eager tensors a message names


def eager_not_finite_parity(found: list[str], tol: float) -> Parity:
    """The parity of a job whose eager side is not finite: failed, and saying that eager is at fault."""
    more = f" and {len(found) - NOT_FINITE_SHOWN} more tensor(s)" if len(found) > NOT_FINITE_SHOWN else ""
    return Parity(
        parity_ok=False,
        parity_tol=tol,
        parity_rule="not judged: eager itself is not finite",
        parity_eager_not_finite=found,
        parity_error=(
            f"eager itself is not finite: {', '.join(found[:NOT_FINITE_SHOWN])}{more}; the model or its "
            "inputs, not compile (compiled was not judged)"
        ),
    )


def raise_if_failed(parity: Parity | None) -> None:
    """After the timings (a failure keeps them): the job's parity failure, as the class it is."""
    if parity is not None and parity.parity_ok is False:
        failure = EagerNotFiniteError if parity.parity_eager_not_finite else ParityError
        raise failure(parity.parity_error)


def check_parity(ctx: JobContext, eager: Side, compiled: Side, out: dict, fp64: bool = True) -> Parity:
    """Compiled against eager, the way PyTorch's accuracy checker judges it: it passes when it is
    within the dtype's tolerance of eager (normal reduction-order differences), or else when its
    error against an upcast reference is within a small multiple of eager's own error: fp64 up to
    `bench.fp64_max_params`; beyond, fp32, measured only past the tolerance and where the sides
    compute below fp32 (bf16's rounding alone reads 0.03 on T5-base: benchmarks/h200-reasons/).
    Outputs (or the loss), gradients and buffers count alike; NaN never passes. Returns the figures
    (the job keeps measuring either way)."""
    cfg = ctx.cfg
    computes = compute_dtype(eager.model, cfg.bench.dtype)
    tol = PARITY_TOL[computes]
    found = eager_not_finite(ctx, eager, out["eager"])
    if ctx.all_reduce_max(float(bool(found))):  # every rank returns here, or none
        return eager_not_finite_parity(found, tol)
    eager_grads = gradients(eager.model) if ctx.train else {}
    vs_eager = _errors(
        ctx, eager, compiled, out, (flat_tensors(out["eager"]), eager_grads, buffers(eager.model))
    )
    close = _worst(vs_eager["compiled"], vs_eager.get("compiled_grad"), vs_eager["compiled_buf"])
    upcast, note = upcast_for(ctx, computes) if fp64 else None, None
    if upcast == torch.float32:  # measured only past the tolerance, in one process, where it fits
        if not (ctx.world == 1 and close > tol):  # NaN compares False
            upcast = None
        elif not upcast_fits(ctx, upcast):
            upcast, note = None, "the fp32 reference exceeds half the GPU's free memory; judged against eager"
    upcast_name = "fp64" if upcast == torch.float64 else "fp32"
    distributed = cfg.parallel.strategy != "none"
    errs = vs_eager
    against: Reference = (flat_tensors(out["eager"]), eager_grads, buffers(eager.model))
    if upcast is not None or distributed:  # the unwrapped single-process model (upcast where affordable)
        try:
            upcast_ref = reference_step(ctx, upcast)
            errs = _errors(ctx, eager, compiled, out, upcast_ref)
            against = upcast_ref
        except torch.OutOfMemoryError:
            if upcast != torch.float32:
                raise  # the sides with an fp64 copy: the sides do not fit (job/protocol.py: run apart)
            note = "the fp32 reference ran out of GPU memory; judged against eager"
            upcast = None
        except Exception as e:  # noqa: BLE001 (the reference is a check's aid: it never sinks the job)
            if distributed and upcast is None:
                raise  # the single-process reference is the only one a distributed job has
            why = f"{type(e).__name__}: {first_line(e)}"
            note = f"the {upcast_name} reference could not run ({why}); judged against eager"
            upcast = None
    err_c = _worst(errs["compiled"], errs.get("compiled_grad"), errs["compiled_buf"])
    err_e = _worst(errs["eager"], errs.get("eager_grad"), errs["eager_buf"])
    if upcast is not None:
        limit = cfg.bench.parity_multiplier * err_e + tol / 10
    else:
        limit = tol
    close, err_c, limit = ctx.all_reduce_max(close), ctx.all_reduce_max(err_c), -ctx.all_reduce_max(-limit)
    passed = bool(close <= tol or err_c <= limit)  # NaN compares False: NaN never passes
    reference = upcast_name if upcast is not None else ("single_process" if distributed else "eager")
    worst_part = max(
        (
            ("outputs", errs["compiled"]),
            ("gradients", errs.get("compiled_grad")),
            ("buffers", errs["compiled_buf"]),
        ),
        key=lambda kv: -1.0 if kv[1] is None else (math.inf if math.isnan(kv[1]) else kv[1]),
    )[0]
    rule = {"multiplier": cfg.bench.parity_multiplier} if upcast is not None else None
    worst = worst_tensors(ctx, eager, compiled, out, against, rule, tol) if ctx.world == 1 else []
    named = "; ".join(f"{w['tensor']} {w['err']:.3g} (limit {w['limit']:.3g})" for w in worst)
    return Parity(
        parity_worst=worst,
        parity_reference=reference,
        parity_err=err_c,
        parity_vs_eager=close,
        parity_eager_err=err_e if upcast is not None else None,
        parity_out_err=errs["compiled"],
        parity_grad_err=errs.get("compiled_grad"),
        parity_buffer_err=errs["compiled_buf"],
        parity_buffers=len(buffers(compiled.model)),
        parity_buffers_updated=updated_buffers(ctx, eager, ctx.start_buffers or {}),
        parity_limit=limit,
        parity_tol=tol,
        parity_rule="within tol of eager" if close <= tol else (f"{upcast_name} rule" if rule else "tol"),
        parity_ok=passed,
        parity_error=None
        if passed
        else (
            f"compiled relative error {err_c:.3g} > limit {limit:.3g} ({reference}; worst: {worst_part}) "
            f"and {close:.3g} from eager > tol {tol:.3g}" + (f"; worst tensors: {named}" if named else "")
        ),
        parity_note=note,
    )


def check_sampled_parity(ctx: JobContext, eager_file: Path, compiled_file: Path) -> Parity:
    """Parity of sides that ran in separate processes: the same strided sample of each side's first
    outputs and gradients (side_process.sampled), against the dtype's tolerance; no fp64 reference."""
    computes = ctx.result.model.compute_dtype if ctx.result.model else None
    tol = PARITY_TOL[computes or ctx.cfg.bench.dtype]
    if ctx.random_ops:
        return Parity(
            parity_ok=None, parity_rule="not checked: random ops draw differently in separate processes"
        )
    e, c = torch.load(eager_file), torch.load(compiled_file)
    eager_file.unlink()
    compiled_file.unlink()
    if found := not_finite(ctx.train, (e["out"], e["grads"], {}), sampled_wrapped(e)):
        return eager_not_finite_parity(found, tol)
    out_err = rel_error(c["out"], e["out"])
    names = sorted(e["grads"])
    grad_err = rel_error([c["grads"][n] for n in names], [e["grads"][n] for n in names]) if names else None
    err = _worst(out_err, grad_err if grad_err is not None else 0.0)
    passed = bool(err <= tol)  # NaN compares False
    worst = worst_sampled(ctx, e, c, tol)  # sampled tensors by name, the worst first
    named = "; ".join(f"{w['tensor']} {w['err']:.3g}" for w in worst)
    return Parity(
        parity_worst=worst,
        parity_reference="eager (strided sample; sides in separate processes)",
        parity_err=err,
        parity_vs_eager=err,
        parity_out_err=out_err,
        parity_grad_err=grad_err,
        parity_limit=tol,
        parity_tol=tol,
        parity_rule="within tol of eager (sampled)",
        parity_ok=passed,
        parity_error=None
        if passed
        else f"compiled relative error {err:.3g} from eager (sampled) > tol {tol:.3g}; worst: {named}",
    )
