"""The measurement protocol (DESIGN.md section 3): eager and compiled, one process, same inputs.

Order matters: FLOP count (an eager step) -> explain (it resets dynamo) -> first eager and first compiled
forward/backward from identical weights (compile cost, graphs captured, parity) -> warm-up ->
interleaved timed repetitions -> memory -> dynamic-shape schedule.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from orchestrator.config import Config
from orchestrator.environment import peak_flops
from orchestrator.parallelize import prepare
from orchestrator.stats import median_ratio_ci, rel_error
from workloads import Workload

# Parity tolerance on the relative error norm, per compute dtype.
PARITY_TOL = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 5e-3}
GIB = 2**30


class ParityError(RuntimeError):
    """Compiled results differ from eager beyond tolerance (the figures travel in the result)."""


class NoGraphError(RuntimeError):
    """The compiled model captured no graph: it ran eager, so any speedup is noise."""


class CompileError(RuntimeError):
    """The first compiled call failed."""


@dataclass
class Side:
    """One side of the comparison: a prepared model and its optimizer."""

    model: nn.Module
    optimizer: torch.optim.Optimizer | None = None


def autocast(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if dtype == "bf16" else torch.float16)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _short_reason(text: str) -> str:
    """A graph-break reason in one line: its headline and dynamo's explanation."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    keep = lines[:1] + [ln for ln in lines[1:] if ln.startswith("Explanation:")]
    return " ".join(keep)[:400]


def _flat(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flat(o)]
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


def state_bytes(side: Side) -> int:
    """Bytes a side keeps between steps: parameters, gradients, optimizer state (local shards)."""
    total = 0
    for p in side.model.parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        total += local.nbytes * (2 if p.grad is not None else 1)
    if side.optimizer is not None:
        for state in side.optimizer.state.values():
            for t in state.values():
                if isinstance(t, torch.Tensor):
                    local = t.to_local() if hasattr(t, "to_local") else t
                    total += local.nbytes
    return total


class Protocol:
    """Runs the protocol for one job on one rank and returns the result fields."""

    def __init__(self, cfg: Config, workload: Workload, device: torch.device, rank: int, world: int) -> None:
        self.cfg = cfg
        self.wl = workload
        self.device = device
        self.rank = rank
        self.world = world
        self.train = cfg.bench.task == "train"
        self.compiled_mode = cfg.compile.mode != "eager"
        self.amp = lambda: autocast(device, cfg.bench.dtype)
        self.inputs = workload.make_inputs(None)
        self.result: dict = {}
        self.timings: dict[str, list[float]] = {"eager_ms": [], "compiled_ms": []}

    # --- one step of each kind -------------------------------------------------------------
    def forward_backward(self, model: nn.Module, inputs: tuple) -> object:
        """Forward (and backward for train): no optimizer step, so weights stay as they were."""
        self._mark_cudagraph_step(model)
        if self.train:
            with self.amp():
                loss = model(*inputs)
            loss.backward()
            return loss.detach()
        with torch.no_grad(), self.amp():
            return model(*inputs)

    def step(self, side: Side) -> None:
        self._mark_cudagraph_step(side.model)
        if not self.train:
            with torch.no_grad(), self.amp():
                side.model(*self.inputs)
            return
        assert side.optimizer is not None
        side.optimizer.zero_grad(set_to_none=True)
        with self.amp():
            loss = side.model(*self.inputs)
        loss.backward()
        side.optimizer.step()

    def _mark_cudagraph_step(self, model: nn.Module) -> None:
        # reduce-overhead replays CUDA graphs; a new step must be marked before it may overwrite outputs.
        if self.device.type == "cuda" and "reduce-overhead" == self.cfg.compile.mode:
            torch.compiler.cudagraph_mark_step_begin()

    def timed(self, fn: Callable[[], object], repeat: int = 1) -> float:
        """Seconds per call: CUDA events on GPU, perf_counter on CPU."""
        synchronize(self.device)
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeat):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000 / repeat
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - t0) / repeat

    # --- the protocol ----------------------------------------------------------------------------
    def run(self) -> dict:
        cfg, wl = self.cfg, self.wl
        r = self.result
        r["params"] = wl.n_params
        r["batch_size"] = wl.batch_size
        r["seq_len"] = wl.seq_len
        # An eager step first: a model that fails eagerly is a crash, not a compile error.
        r["flops_per_step"] = self.count_flops()
        if self.compiled_mode and cfg.bench.explain:
            r.update(self.explain())
        eager = Side(prepare(wl, cfg.parallel.strategy, None, self.device, cfg.bench.dtype))
        compiled = Side(
            prepare(
                wl,
                cfg.parallel.strategy,
                cfg.compile if self.compiled_mode else None,
                self.device,
                cfg.bench.dtype,
            )
        )
        self.first_calls(eager, compiled)
        for side in (eager, compiled):
            side.model.zero_grad(set_to_none=True)
            if self.train:
                side.optimizer = self.optimizer(side.model)
        self.speed(eager, compiled)
        if self.device.type == "cuda":
            self.memory(eager, compiled)
        if cfg.workload.shapes:
            self.dynamic_schedule(eager, compiled)
        return r

    def explain(self) -> dict:
        """Graph count and breaks with reasons, from torch._dynamo.explain (run before the timed compile)."""
        import torch._dynamo

        model = self.wl.model
        try:
            with self.amp(), contextlib.nullcontext() if self.train else torch.no_grad():
                ex = torch._dynamo.explain(model)(*self.inputs)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # dynamo could not trace the model: a compile error, not a crash
            raise CompileError(f"explain: {type(e).__name__}: {_first_line(e)}") from e
        reasons = []
        for br in ex.break_reasons:
            frame = br.user_stack[-1] if br.user_stack else None
            where = f"{frame.filename}:{frame.lineno}" if frame else None
            reasons.append({"reason": _short_reason(str(br.reason)), "where": where})
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        return {
            "explain_graphs": ex.graph_count,
            "graph_breaks": ex.graph_break_count,
            "break_reasons": reasons,
            "explain_ops": sum(len(o) for o in ex.ops_per_graph or []),
        }

    def count_flops(self) -> int | None:
        """FLOPs of one forward(+backward) step, counted by torch's FlopCounterMode on the unwrapped model."""
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        try:
            with counter:
                self.forward_backward(self.wl.model, self.inputs)
        finally:
            self.wl.model.zero_grad(set_to_none=True)
        return int(counter.get_total_flops()) or None

    def first_calls(self, eager: Side, compiled: Side) -> None:
        """Compile cost, graphs captured and parity, from identical weights and inputs."""
        from torch._dynamo.utils import counters

        r = self.result
        self.forward_backward(eager.model, self.inputs)  # lazy init, allocator warm
        eager.model.zero_grad(set_to_none=True)
        out: dict[str, object] = {}
        eager_s = self.timed(
            lambda: out.__setitem__("eager", self.forward_backward(eager.model, self.inputs))
        )
        counters.clear()
        t0 = time.perf_counter()
        try:
            out["compiled"] = self.forward_backward(compiled.model, self.inputs)
            synchronize(self.device)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:
            raise CompileError(f"{type(e).__name__}: {_first_line(e)}") from e
        first_s = time.perf_counter() - t0
        r["first_call_s"] = first_s
        r["compile_s"] = max(first_s - eager_s, 0.0) if self.compiled_mode else 0.0
        if self.compiled_mode:
            r["graphs"] = int(counters["stats"]["unique_graphs"])
            r["frames_ok"] = int(counters["frames"]["ok"])
            r["graph_breaks_compile"] = int(sum(counters["graph_break"].values()))
        if self.cfg.bench.parity:
            self.parity(eager, compiled, out)
        if self.compiled_mode and r.get("graphs", 0) == 0:
            raise NoGraphError(
                "compiled model captured no graph (it ran eager); check the compile/wrap order"
            )

    def parity(self, eager: Side, compiled: Side, out: dict) -> None:
        """Relative error of compiled (and eager) against a reference; the fp64 rule where affordable."""
        cfg, r = self.cfg, self.result
        tol = PARITY_TOL[cfg.bench.dtype]
        use_fp64 = self.wl.n_params <= cfg.bench.fp64_max_params
        ref_needed = use_fp64 or cfg.parallel.strategy != "none"
        if ref_needed:
            ref_model = self.wl.model  # the unwrapped single-process model, same weights
            ref_inputs = self.inputs
            if use_fp64:
                ref_model = ref_model.double()
                ref_inputs = tuple(t.double() if t.is_floating_point() else t for t in self.inputs)
            with contextlib.ExitStack() as stack:
                if not use_fp64:
                    stack.enter_context(self.amp())
                if self.train:
                    loss = ref_model(*ref_inputs)
                    loss.backward()
                    ref_vals = [loss.detach()]
                    ref_grads = gradients(ref_model)
                else:
                    with torch.no_grad():
                        ref_vals = _flat(ref_model(*ref_inputs))
        else:
            ref_vals = _flat(out["eager"])
            ref_grads = gradients(eager.model) if self.train else {}
        e_vals, c_vals = _flat(out["eager"]), _flat(out["compiled"])
        errs = {"eager": rel_error(e_vals, ref_vals), "compiled": rel_error(c_vals, ref_vals)}
        if self.train:
            e_grads, c_grads = gradients(eager.model), gradients(compiled.model)
            names = sorted(ref_grads)
            ref_list = [ref_grads[n] for n in names]
            errs["eager_grad"] = rel_error([e_grads[n] for n in names], ref_list)
            errs["compiled_grad"] = rel_error([c_grads[n] for n in names], ref_list)
        if ref_needed:
            self.wl.model.zero_grad(set_to_none=True)
        err_c = max(errs["compiled"], errs.get("compiled_grad", 0.0), key=lambda x: (math.isnan(x), x))
        err_e = max(errs["eager"], errs.get("eager_grad", 0.0), key=lambda x: (math.isnan(x), x))
        limit = cfg.bench.parity_multiplier * err_e + tol / 10 if use_fp64 else tol
        err_c, limit = self._all_reduce_max(err_c), self._all_reduce_max(-limit) * -1
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

    def _all_reduce_max(self, x: float) -> float:
        """Max over ranks (NaN counted as +inf), so any failing rank fails the job."""
        if self.world == 1:
            return x
        t = torch.tensor([math.inf if math.isnan(x) else x], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def _all_gather(self, x: float) -> list[float]:
        """One figure from every rank, in rank order."""
        if self.world == 1:
            return [x]
        out = [None] * self.world
        dist.all_gather_object(out, x)
        return [float(v) for v in out]  # type: ignore[arg-type]

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        fused = self.device.type == "cuda" and self.cfg.parallel.strategy != "fsdp"
        return torch.optim.AdamW(model.parameters(), lr=self.cfg.bench.lr, fused=fused or None)

    def speed(self, eager: Side, compiled: Side) -> None:
        """Warm-up, then R repetitions of k-step blocks, alternating which side goes first."""
        b, r = self.cfg.bench, self.result
        for _ in range(b.warmup + 1):
            self.step(eager)
            self.step(compiled)
        synchronize(self.device)
        for i in range(b.repeats):
            order = (eager, compiled) if i % 2 == 0 else (compiled, eager)
            t = {id(s): self.timed(lambda s=s: self.step(s), b.steps_per_repeat) for s in order}
            self.timings["eager_ms"].append(t[id(eager)] * 1000)
            self.timings["compiled_ms"].append(t[id(compiled)] * 1000)
        e_ms, c_ms = self.timings["eager_ms"], self.timings["compiled_ms"]
        speedup, low, high = median_ratio_ci(e_ms, c_ms, b.bootstrap, b.seed)
        eager_med = sorted(e_ms)[len(e_ms) // 2]
        comp_med = sorted(c_ms)[len(c_ms) // 2]
        r.update(
            eager_ms=eager_med,
            compiled_ms=comp_med,
            speedup=speedup,
            speedup_ci_low=low,
            speedup_ci_high=high,
        )
        for name, ms in (("eager", eager_med), ("compiled", comp_med)):
            r[f"{name}_samples_per_s_by_rank"] = self._all_gather(self.wl.batch_size / (ms / 1000))
            r[f"{name}_samples_per_s"] = sum(r[f"{name}_samples_per_s_by_rank"])
            r[f"{name}_tokens_per_s"] = (
                r[f"{name}_samples_per_s"] * self.wl.seq_len if self.wl.seq_len else None
            )
            r[f"{name}_tokens_per_s_per_device"] = (
                r[f"{name}_tokens_per_s"] / self.world if r[f"{name}_tokens_per_s"] else None
            )
            peak = peak_flops(self.device, self.cfg.bench.dtype)
            flops = r.get("flops_per_step")
            r[f"{name}_mfu"] = flops / (ms / 1000) / peak if peak and flops else None
        saved_s = (eager_med - comp_med) / 1000
        r["break_even_steps"] = r["compile_s"] / saved_s if saved_s > 0 and self.compiled_mode else None

    def memory(self, eager: Side, compiled: Side) -> None:
        """Peak CUDA memory of a few steps of each side, as if that side were alone on the device.

        Both sides live on the device at once, so the peak is taken relative to the memory in use
        before the side's steps, plus the bytes the side itself keeps (weights, grads, optimizer).
        """
        r = self.result
        for name, side in (("eager", eager), ("compiled", compiled)):
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            before = torch.cuda.memory_allocated(self.device)
            for _ in range(2):
                self.step(side)
            synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device) - before + state_bytes(side)
            r[f"{name}_peak_gib"] = self._all_reduce_max(peak / GIB)
            r[f"{name}_reserved_gib"] = self._all_reduce_max(
                torch.cuda.max_memory_reserved(self.device) / GIB
            )
        r["memory_ratio"] = r["compiled_peak_gib"] / r["eager_peak_gib"] if r["eager_peak_gib"] else None
        if self.cfg.compile.mode in ("reduce-overhead", "max-autotune"):
            r["memory_note"] = (
                "CUDA graph pool allocated at capture, before this phase: compiled peak leaves it out"
            )

    def dynamic_schedule(self, eager: Side, compiled: Side) -> None:
        """Run the shape schedule: recompiles, the compile seconds they cost, and speed across shapes."""
        from torch._dynamo.utils import counters

        r = self.result
        recompiles, recompile_s, eager_s, compiled_s = 0, 0.0, 0.0, 0.0
        for seq in self.cfg.workload.shapes:
            inputs = self.wl.make_inputs(seq)
            graphs_before = counters["stats"]["unique_graphs"]
            first = self.timed(lambda i=inputs: self.forward_backward(compiled.model, i))
            second = self.timed(lambda i=inputs: self.forward_backward(compiled.model, i))
            new = counters["stats"]["unique_graphs"] - graphs_before
            if new:
                recompiles += new
                recompile_s += max(first - second, 0.0)
            self.forward_backward(eager.model, inputs)
            eager_s += self.timed(lambda i=inputs: self.forward_backward(eager.model, i))
            compiled_s += second
            for side in (eager, compiled):
                side.model.zero_grad(set_to_none=True)
        r.update(
            dyn_shapes=len(self.cfg.workload.shapes),
            dyn_recompiles=recompiles if self.compiled_mode else 0,
            dyn_compile_s=recompile_s if self.compiled_mode else 0.0,
            dyn_total_compile_s=(r["compile_s"] + recompile_s) if self.compiled_mode else 0.0,
            dyn_speedup=eager_s / compiled_s if compiled_s else None,
        )
