"""What the protocol's phases share: the job's settings, one step of each kind, timing, collectives."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from orchestrator.config.schema import CUDAGRAPH_MODES, Config
from orchestrator.core.result import JobResult
from orchestrator.job.phases.wall import WallClock
from orchestrator.job.setup.parallelize import compile_kwargs
from workloads import Workload
from workloads.inputs import Inputs, call


@dataclass
class Side:
    """One side of the comparison: a prepared model, its optimizer, and how it steps it."""

    model: nn.Module
    optimizer: torch.optim.Optimizer | None = None
    compiled: bool = False
    """The compiled side (its optimizer step is compiled too under compile.optimizer=true)."""
    optimizer_step: Callable[[], object] | None = None
    """The optimizer's step as this side runs it: `optimizer.step`, or its torch.compile."""


def autocast(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if dtype == "bf16" else torch.float16)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_call(device: torch.device, fn: Callable[[], object], repeat: int = 1) -> float:
    """Seconds per call of `repeat` calls: CUDA events on GPU (after a sync), perf_counter on CPU."""
    synchronize(device)
    if device.type == "cuda":
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


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


@dataclass
class JobContext:
    """One job on one rank: settings, workload, device, and the result fields the phases fill in."""

    cfg: Config
    wl: Workload
    device: torch.device
    rank: int = 0
    world: int = 1
    artifacts_dir: Path | None = None
    """Where the first compile's portable cache artifacts are saved (None: not saved)."""
    peaks: dict | None = None
    """This node's measured peaks (`bench.measure_peaks`, job/phases/peaks.py); None: the spec sheet's."""
    job_dir: Path | None = None
    """The job's directory: AOTInductor packages and profiler traces are kept there."""
    start_state: dict | None = None
    """The model's weights before the first step, on the CPU (the convergence check starts there)."""
    start_buffers: dict | None = None
    """The eager side's buffers before its compared first call: where both sides and the parity
    reference start from (graphs.first_calls)."""
    result: JobResult = field(default_factory=JobResult)
    """The job's result, section by section as the phases return them."""
    clock: WallClock = field(default_factory=WallClock)
    """The job's wall clock: each phase's seconds (job/phases/wall.py)."""
    timings: dict[str, list] = field(default_factory=dict)
    """Per repetition: `<side>_ms`, `process`; per step: `<side>_step_ms` (speed.measure_speed)."""

    def __post_init__(self) -> None:
        self.train = self.cfg.bench.task == "train"
        self.compiled_mode = self.cfg.compile.mode != "eager"
        self.inputs = self.wl.make_inputs(None)

    @property
    def random_ops(self) -> bool:
        """Whether the model draws random numbers (dropout...): seen in its first eager step."""
        return bool(self.result.model and self.result.model.random_ops)

    def amp(self) -> contextlib.AbstractContextManager:
        return autocast(self.device, self.cfg.bench.dtype)

    # --- one step of each kind -------------------------------------------------------------
    def forward_backward(self, model: nn.Module, inputs: Inputs) -> object:
        """Forward (and backward for train): no optimizer step, so weights stay as they were."""
        self.mark_cudagraph_step()
        if self.train:
            with self.amp():
                loss = call(model, inputs)
            loss.backward()
            return loss.detach()
        with torch.no_grad(), self.amp():
            return call(model, inputs)

    def step(self, side: Side) -> None:
        self.mark_cudagraph_step()
        if not self.train:
            with torch.no_grad(), self.amp():
                call(side.model, self.inputs)
            return
        assert side.optimizer is not None
        side.optimizer.zero_grad(set_to_none=True)
        with self.amp():
            loss = call(side.model, self.inputs)
        loss.backward()
        (side.optimizer_step or side.optimizer.step)()

    def mark_cudagraph_step(self) -> None:
        # CUDA-graph modes replay graphs; a new step must be marked before it may overwrite outputs.
        if self.device.type == "cuda" and self.cfg.compile.mode in CUDAGRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """AdamW: fused on CUDA; with compile.optimizer, foreach (what torch.compile fuses itself),
        capturable on CUDA (its step can live in a CUDA graph), on both sides alike."""
        cuda = self.device.type == "cuda"
        if self.cfg.compile.optimizer:
            return torch.optim.AdamW(model.parameters(), lr=self.cfg.bench.lr, foreach=True, capturable=cuda)
        fused = cuda and self.cfg.parallel.strategy != "fsdp"
        return torch.optim.AdamW(model.parameters(), lr=self.cfg.bench.lr, fused=fused or None)

    def optimizer_text(self) -> str | None:
        """Which optimizer step the training figures hold, in words."""
        if not self.train:
            return None
        if self.cfg.compile.optimizer and self.compiled_mode:
            return "AdamW (foreach): eager on the eager side, compiled on the compiled side"
        fused = (
            self.device.type == "cuda"
            and self.cfg.parallel.strategy != "fsdp"
            and not self.cfg.compile.optimizer
        )
        return f"AdamW ({'fused' if fused else 'foreach'}), eager on both sides (outside the compile)"

    def end_first_call(self, side: Side) -> float:
        """After a side's first forward(+backward): its optimizer, stepped as a training loop steps
        after its first backward (CUDA graphs are then recorded with the optimizer state allocated),
        and its gradients cleared. Returns the seconds of that first step (a compiled one compiles)."""
        seconds = 0.0
        if self.train:
            self.new_optimizer(side)
            seconds = self.timed(side.optimizer_step)  # type: ignore[arg-type]
        side.model.zero_grad(set_to_none=True)
        return seconds

    def new_optimizer(self, side: Side) -> None:
        """A fresh optimizer for the side's weights, and the step it runs (compiled, where asked)."""
        side.optimizer = self.optimizer(side.model)
        compile_step = side.compiled and self.cfg.compile.optimizer and self.compiled_mode
        step = side.optimizer.step
        side.optimizer_step = (
            torch.compile(step, **compile_kwargs(self.cfg.compile)) if compile_step else step
        )

    def timed(self, fn: Callable[[], object], repeat: int = 1) -> float:
        """Seconds per call: CUDA events on GPU, perf_counter on CPU."""
        return seconds_per_call(self.device, fn, repeat)

    def timed_steps(self, fn: Callable[[], object], steps: int, sync_each: bool = False) -> list[float]:
        """Seconds of each of `steps` calls: CUDA events between steps (one sync at the end) on GPU,
        perf_counter on CPU; `sync_each`: each call alone between two syncs, by perf_counter (what a
        loop pays that waits on every step's output: its host time no longer overlaps the device's)."""
        synchronize(self.device)
        if sync_each:
            seconds = []
            for _ in range(steps):
                t0 = time.perf_counter()
                fn()
                synchronize(self.device)
                seconds.append(time.perf_counter() - t0)
            return seconds
        if self.device.type == "cuda":
            events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
            events[0].record()
            for e in events[1:]:
                fn()
                e.record()
            events[-1].synchronize()
            return [a.elapsed_time(b) / 1000 for a, b in zip(events, events[1:], strict=False)]
        marks = [time.perf_counter()]
        for _ in range(steps):
            fn()
            marks.append(time.perf_counter())
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]

    # --- across ranks ----------------------------------------------------------------------
    def all_reduce_max(self, x: float) -> float:
        """Max over ranks (NaN counted as +inf), so any failing rank fails the job."""
        if self.world == 1:
            return x
        t = torch.tensor([math.inf if math.isnan(x) else x], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def all_gather(self, x: float) -> list[float]:
        """One figure from every rank, in rank order."""
        if self.world == 1:
            return [x]
        out = [None] * self.world
        dist.all_gather_object(out, x)
        return [float(v) for v in out]  # type: ignore[arg-type]


@contextlib.contextmanager
def job_model(cfg: Config, device: torch.device, cache: Path) -> Iterator[JobContext]:
    """The job's model and inputs built in a fresh process (a side process, a compile probe), in the
    scope the job's own process measures in: the user's code on the path, the job's compile settings
    and its cache (the worker builds its own, phase by phase, in the same scope)."""
    from orchestrator.core.user_code import user_code
    from orchestrator.job.setup.compile_settings import compile_settings
    from workloads import build_workload

    with user_code(cfg.workload.path), compile_settings(cfg, cache):
        wl = build_workload(cfg.workload, cfg.bench.task, device, cfg.bench.seed)
        yield JobContext(cfg, wl, device)
