"""Inside each job, on each rank: set up, measure, classify, write one result (rank 0), log.

Global settings are scoped to the job (`torch._dynamo.config.patch`, `torch._inductor.config.patch`,
the inductor/triton cache directories), so that jobs run one after another in one process (the
debug launcher) never see each other's settings. With `compile.cache=private` (the default) each
job compiles into its own empty cache after a primer compile, so its cold compile figure does not
depend on what ran before; then `compile.probes` compiles again in fresh processes (warm, portable).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import submitit
import torch
import torch.distributed as dist

from orchestrator.failures import classify, first_rank_error, write_rank_error
from orchestrator.job.compile_cost import (
    ARTIFACTS_FILE,
    compile_settings,
    fresh_dir,
    prime,
    tlparse_report,
    torch_trace,
)
from orchestrator.job.skeleton import result_skeleton
from orchestrator.results import RESULT_FILE, write_json_atomic
from orchestrator.spec import JobSpec

RUNS_FILE = "runs.log"


def job_cache(spec: JobSpec) -> Path:
    """The job's compile cache: its own empty one (`private`), or the sweep's `shared` one."""
    cc = spec.config["compile"]
    if cc["cache"] == "private":
        return fresh_dir(spec.job_dir, "inductor-")
    cache = Path(cc["cache_dir"] or Path(spec.sweep_dir) / "cache" / "inductor")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def compile_probes(spec: JobSpec, device: torch.device, cache: Path, result: dict) -> None:
    """Warm and portable compile, each in a fresh process; break-even steps for cold and warm."""
    from orchestrator.job.compile_probe import run_probe

    if device.type == "cuda":
        torch.cuda.empty_cache()  # the probe shares the device
    result.update(run_probe(spec, "warm", device, cache, None))
    artifacts = spec.job_dir / ARTIFACTS_FILE
    if artifacts.exists():
        empty = fresh_dir(spec.job_dir, "inductor-portable-")
        result.update(run_probe(spec, "portable", device, empty, artifacts))
        shutil.rmtree(empty, ignore_errors=True)
        artifacts.unlink()
    saved_s = (result["eager_ms"] - result["compiled_ms"]) / 1000
    warm = result.get("compile_warm_s")
    result["break_even_warm_steps"] = warm / saved_s if saved_s > 0 and warm is not None else None


def _device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def _log_paths() -> dict:
    try:
        paths = submitit.JobEnvironment().paths
        return {"log_stdout": str(paths.stdout), "log_stderr": str(paths.stderr)}
    except (RuntimeError, KeyError):  # not inside a submitit job (called directly, or the debug executor)
        return {}


def _log_run(spec: JobSpec, event: str) -> None:
    """One line per start and per result written, in `runs.log`: how often a job really ran."""
    with (spec.job_dir / RUNS_FILE).open("a") as f:
        f.write(f"{event} pid={os.getpid()} rank={os.environ.get('RANK', '0')} time={time.time():.3f}\n")


def run_job(spec: JobSpec) -> dict | None:
    """Measure one job; rank 0 writes `result.json` and returns it (other ranks return None)."""
    from orchestrator.job.context import JobContext
    from orchestrator.job.environment import describe
    from orchestrator.job.parallelize import init_distributed, local_device
    from orchestrator.job.protocol import run_protocol
    from workloads import build_workload

    cfg = spec.cfg
    if cfg.workload.path and cfg.workload.path not in sys.path:
        sys.path.insert(0, cfg.workload.path)  # user code: workload.target and compile.backend
    spec.job_dir.mkdir(parents=True, exist_ok=True)
    result = result_skeleton(spec) | _log_paths()
    _log_run(spec, "start")
    device = _device(cfg.bench.device)
    rank, world = 0, 1
    ctx = None
    started = time.time()
    cache = job_cache(spec)
    private = cfg.compile.cache == "private"
    compiled_mode = cfg.compile.mode != "eager"
    probes = (
        compiled_mode and cfg.compile.probes and cfg.parallel.world_size == 1 and cfg.compile.path == "jit"
    )
    trace_dir = spec.job_dir / "trace" if cfg.compile.trace else None
    with compile_settings(spec.config["compile"], len(cfg.workload.shapes), cache), torch_trace(trace_dir):
        try:
            if cfg.parallel.world_size > 1:
                rank, world = init_distributed(device, cfg.bench.timeout_s)
            device = local_device(device)
            if private and compiled_mode:
                prime(device)  # one-offs of this process and machine stay out of the cold figure
            torch._dynamo.reset()  # nothing compiled earlier in this process may serve this job
            workload = build_workload(cfg.workload, cfg.bench.task, device, cfg.bench.seed)
            ctx = JobContext(
                cfg, workload, device, rank, world, spec.job_dir if probes else None, spec.job_dir
            )
            result.update(run_protocol(ctx))
            result["compile_cold_s"] = result["compile_s"] if private and compiled_mode else None
            del ctx.wl, workload  # the probes want the device to themselves
            if probes:
                compile_probes(spec, device, cache, result)
            result["status"] = "ok"
        except Exception as exc:  # every failure becomes a result row with its class and message
            result["status"] = classify(exc)
            result["error"] = f"{type(exc).__name__}: {exc}".strip()[:2000]
            if result["status"] == "timeout":
                result["error"] = f"hit its time limit of {cfg.bench.timeout_s:.0f} s per attempt ({exc})"
            if ctx is not None:
                result.update(ctx.result)
            write_rank_error(spec.job_dir, rank, result["status"], result["error"])
    if private:
        shutil.rmtree(cache, ignore_errors=True)
    if trace_dir is not None and rank == 0:
        result["trace_dir"] = str(trace_dir)
        index = tlparse_report(trace_dir, spec.job_dir / "tlparse")
        result["tlparse_index"] = str(index) if index else None
    if result["status"] != "ok" and world > 1:
        time.sleep(1.0)  # let the rank that failed first record its error
        first = first_rank_error(spec.job_dir)
        if first is not None and first["rank"] != rank:
            result["status"], result["error"] = first["status"], f"rank {first['rank']}: {first['error']}"
    result.update(describe(device, world), pid=os.getpid())
    result["wall_s"] = time.time() - started
    if ctx is not None:
        result["timings"] = ctx.timings
    if dist.is_initialized():
        dist.destroy_process_group()
    if rank != 0:
        return None
    write_json_atomic(spec.job_dir / RESULT_FILE, result)
    _log_run(spec, "result")
    if cfg.logger.mode != "disabled":
        from orchestrator.tracking import log_job

        log_job(spec, result)
    return result


class Worker(submitit.helpers.Checkpointable):
    """The submitit callable. Checkpointable: on preemption or time limit submitit requeues it,
    and the job re-measures from scratch (a half-done measurement is not worth resuming)."""

    def __call__(self, spec: JobSpec) -> dict | None:
        return run_job(spec)
