"""Inside each job, on each rank: set up, measure, classify, write one result (rank 0), log.

Global settings are scoped to the job (`torch._dynamo.config.patch`, `torch._inductor.config.patch`,
the inductor/triton cache directories), so that jobs run one after another in one process (the
debug launcher) never see each other's settings. With `compile.cache=private` (the default) each
job compiles into its own empty cache after a primer compile, so its cold compile figure does not
depend on what ran before; then `compile.probes` compiles again in fresh processes (warm, portable).
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import torch
import torch.distributed as dist

from orchestrator.config.spec import JobSpec
from orchestrator.core.failures import RANK_ERROR, classify, first_rank_error, user_frame, write_rank_error
from orchestrator.core.files import RESULT_FILE, private_cache_prefix, write_json_atomic
from orchestrator.core.result import Memory
from orchestrator.core.user_code import user_code
from orchestrator.job.context import JobContext, first_line
from orchestrator.job.phases import generation
from orchestrator.job.phases.peaks import node_peaks
from orchestrator.job.phases.wall import WallClock
from orchestrator.job.processes import apart as processes
from orchestrator.job.processes import fork_server
from orchestrator.job.processes.compile_probe import compile_probes
from orchestrator.job.processes.device_lock import hold_device
from orchestrator.job.processes.fresh import stopped_within
from orchestrator.job.processes.side_process import SideAnswer
from orchestrator.job.protocol import SidesDoNotFit, run_protocol
from orchestrator.job.setup.compile_settings import compile_settings, fresh_dir
from orchestrator.job.setup.device import check_device, job_device
from orchestrator.job.setup.environment import describe
from orchestrator.job.setup.parallelize import (
    init_distributed,
    local_device,
    ranks_per_gpu,
    same_weights_on_every_rank,
)
from orchestrator.job.setup.primer import prime
from orchestrator.job.setup.trace import tlparse_report, torch_trace
from orchestrator.job.setup.tracking import log_job
from orchestrator.job.sides import sides_rule
from orchestrator.job.skeleton import result_skeleton
from workloads import build_workload, check_workload

RUNS_FILE = "runs.log"
TRACEBACK_FILE = "traceback.txt"


def job_cache(spec: JobSpec) -> Path:
    """The job's compile cache: its own empty one (`private`), or the sweep's `shared` one."""
    cc = spec.cfg.compile
    if cc.cache == "private":
        return fresh_dir(spec.job_dir, private_cache_prefix(os.getpid()))
    cache = Path(cc.cache_dir or Path(spec.sweep_dir) / "cache" / "inductor")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def measure(spec: JobSpec, ctx: JobContext, cache: Path, probes: bool) -> None:
    """The protocol in this process, then the fresh processes (job/processes/apart.py): more paired
    repetitions (the first measures the warm probe too, where the job has `probes`) and each side
    alone; or, where the sides do not fit together, each side apart."""
    if ctx.cfg.bench.task == "generate":  # one process, a protocol of its own
        generation.run_generation(ctx)
        return
    rule = sides_rule(ctx.cfg, ctx.device, ctx.world)
    why = None
    try:
        run_protocol(ctx, rule)
    except SidesDoNotFit as e:
        why = str(e)  # not the exception: its traceback would keep the sides alive
    del ctx.wl  # the fresh processes want the device to themselves
    torch._dynamo.reset()
    gc.collect()
    if ctx.device.type == "cuda":
        torch.cuda.empty_cache()
    if why is not None or rule.apart:
        with ctx.clock.phase("sides_alone"):
            processes.one_after_the_other(spec, ctx, cache, why)
        return
    alone: dict[str, SideAnswer] = {}  # sides measured alone in the paired processes
    if rule.processes > 1:
        with ctx.clock.phase("processes"):
            alone = processes.more_processes(spec, ctx, cache, rule.processes, probes, rule.memory_alone)
    if rule.memory_alone:
        try:
            with ctx.clock.phase("sides_alone"):
                processes.sides_alone(spec, ctx, cache, full=False, measured=alone)
        except (RuntimeError, torch.OutOfMemoryError) as e:  # the timings stand; memory is missing
            ctx.result.memory = Memory(memory_error=first_line(e))


def keep_traceback(spec: JobSpec, log_stderr: str | None) -> str:
    """Write the exception being handled, whole, where the user looks: the job's stderr log (the
    worker process writes to it), or, for a job run in-process (the debug launcher), a file of its own.
    Returns that file's path."""
    import traceback

    text = traceback.format_exc()
    if log_stderr:
        print(text, file=sys.stderr, flush=True)
        return log_stderr
    path = spec.job_dir / TRACEBACK_FILE
    path.write_text(text)
    return str(path)


def _log_run(spec: JobSpec, event: str) -> None:
    """One line per start and per result written, in `runs.log`: how often a job really ran."""
    with (spec.job_dir / RUNS_FILE).open("a") as f:
        f.write(f"{event} pid={os.getpid()} rank={os.environ.get('RANK', '0')} time={time.time():.3f}\n")


def run_job(spec: JobSpec, clock: WallClock | None = None) -> dict | None:
    """Measure one job; rank 0 writes `result.json` and returns it (other ranks return None).
    `clock`: the job's wall clock, started by the supervisor's launch of this process."""
    cfg = spec.cfg
    clock = clock or WallClock()
    spec.job_dir.mkdir(parents=True, exist_ok=True)
    result = result_skeleton(spec)
    _log_run(spec, "start")
    device = job_device(cfg.bench.device)
    rank, world = 0, 1
    ctx = None
    started = time.time()
    cache = job_cache(spec)
    private = cfg.compile.cache == "private"
    compiled_mode = cfg.compile.mode != "eager"
    probes = (  # they compile the model's forward: not what a generation job compiles
        compiled_mode
        and cfg.compile.probes
        and cfg.parallel.world_size == 1
        and cfg.compile.path == "jit"
        and cfg.bench.task != "generate"
    )
    trace_dir = spec.job_dir / "trace" if cfg.compile.trace else None
    outcome = result.outcome
    with ExitStack() as scope:
        with clock.phase("setup"):
            if private:  # removed however the job ends, a stop included (callbacks run last)
                scope.callback(shutil.rmtree, cache, ignore_errors=True)
            scope.enter_context(user_code(cfg.workload.path))  # workload.target, compile.backend
            scope.enter_context(compile_settings(cfg, cache))
            scope.enter_context(torch_trace(trace_dir))
        try:
            with clock.phase("setup"):
                check_device(cfg.bench.device, cfg.launcher.name)  # a GPU job never times the CPU
                if cfg.parallel.world_size > 1:
                    rank, world = init_distributed(device, cfg.bench.timeout_s, cfg.parallel.backend)
                    outcome.dist_backend = dist.get_backend()
                    outcome.ranks_per_gpu = ranks_per_gpu() if device.type == "cuda" else None
                device = local_device(device)
            if cfg.launcher.overlap:  # what runs before this runs beside another job's measurements
                with clock.phase("build"):
                    check_workload(cfg.workload)  # imports the model's class while another job measures
                clock.locked_at = hold_device(device, clock, wait_s=cfg.bench.timeout_s)
            if private and compiled_mode:
                with clock.phase("primer"):
                    # one-offs of this process and machine stay out of the cold figure
                    prime(device, cfg.bench.task == "train", cfg.compile.path == "aoti")
            torch._dynamo.reset()  # nothing compiled earlier in this process may serve this job
            measured = node_peaks(device, Path(spec.sweep_dir)) if cfg.bench.measure_peaks else None
            with clock.phase("build"):
                workload = build_workload(cfg.workload, cfg.bench.task, device, cfg.bench.seed)
                if world > 1:
                    same_weights_on_every_rank(workload.model)
                artifacts = spec.job_dir if probes else None
                where = (artifacts, measured, spec.job_dir)
                ctx = JobContext(cfg, workload, device, rank, world, *where, result=result, clock=clock)
            del workload
            measure(spec, ctx, cache, probes)
            if private and compiled_mode and result.compile is not None:
                result.compile.compile_cold_s = result.compile.compile_s
            if probes:
                with clock.phase("probes"):
                    result.probes = compile_probes(spec, device, cache, result)
            outcome.status = "ok"
        except Exception as exc:  # every failure becomes a result row with its class and message
            if (stopped := stopped_within(exc)) is not None:  # no row: a resumed sweep measures it
                raise KeyboardInterrupt(stopped) from exc
            outcome.status = classify(exc)
            outcome.error = f"{type(exc).__name__}: {exc}".strip()[:2000]
            if outcome.status == "timeout":
                outcome.error = f"hit its time limit of {cfg.time_limit_s():.0f} s per attempt ({exc})"
            outcome.error_where = user_frame(exc)
            outcome.error_log = keep_traceback(spec, outcome.log_stderr)
            write_rank_error(spec.job_dir, rank, outcome.status, outcome.error, outcome.error_where)
    with clock.phase("finish"):
        if trace_dir is not None and rank == 0:
            outcome.trace_dir = str(trace_dir)
            index = tlparse_report(trace_dir, spec.job_dir / "tlparse")
            outcome.tlparse_index = str(index) if index else None
        if outcome.status != "ok" and world > 1:
            time.sleep(1.0)  # let the rank that failed first record its error
            first = first_rank_error(spec.job_dir)
            if first is not None and first["rank"] != rank:
                outcome.status, outcome.error = first["status"], f"rank {first['rank']}: {first['error']}"
                outcome.error_where = first.get("where")
                outcome.error_log = str(spec.job_dir / RANK_ERROR.format(first["rank"]))  # its traceback
        # under overlap, a job that never held its device stays off it (a neighbour may be measuring)
        result.environment = describe(
            device, world, ask_device=not cfg.launcher.overlap or clock.locked_at is not None
        )
        outcome.pid, outcome.wall_s = os.getpid(), time.time() - started
        outcome.forked = fork_server.forked
        outcome.started_ahead = fork_server.started_ahead or None
        if ctx is not None:
            result.timings = ctx.timings
        if dist.is_initialized():
            dist.destroy_process_group()
        result.wall = clock.wall_time()
    if rank != 0:
        return None
    row = result.to_dict()
    write_json_atomic(spec.job_dir / RESULT_FILE, row)
    _log_run(spec, "result")
    if cfg.logger.mode != "disabled":
        log_job(spec, row)
    return row


def answer(spec: JobSpec, req: dict) -> None:
    """job/processes/fresh.py's entry for kind `job`, the child process of `supervisor.Worker`:
    measure the job (its result file is its answer). `started_at`: the supervisor's launch of this process."""
    run_job(spec, WallClock(req.get("started_at")))
