"""Inside each job, on each rank: set up, measure, classify, write one result (rank 0), log."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import submitit
import torch
import torch.distributed as dist
from submitit.core.utils import UncompletedJobError

from orchestrator.plan import JobSpec
from orchestrator.results import RESULT_FILE, write_json_atomic

RANK_ERROR = "rank{}.error.json"


def result_skeleton(spec: JobSpec) -> dict:
    """The fields every result has, whatever happened: identity and the settings that make the row."""
    c = spec.config
    return {
        "job_id": spec.job_id,
        "sweep": c["sweep"]["name"],
        "label": spec.label,
        "status": "crash",
        "error": None,
        "workload": c["workload"]["name"],
        "size": c["workload"]["size"] if c["workload"]["name"] != "module" else c["workload"]["target"],
        "task": c["bench"]["task"],
        "dtype": c["bench"]["dtype"],
        "mode": c["compile"]["mode"],
        "dynamic": c["compile"]["dynamic"],
        "fullgraph": c["compile"]["fullgraph"],
        "backend": c["compile"]["backend"],
        "cache": c["compile"]["cache"],
        "strategy": c["parallel"]["strategy"],
        "world_size": 1
        if c["parallel"]["strategy"] == "none"
        else c["parallel"]["ranks_per_node"] * c["parallel"]["nodes"],
        "axes": spec.axes,
        "config": c,
    }


def classify(exc: BaseException) -> str:
    """The failure class of an exception raised by a job."""
    from orchestrator.measure import CompileError, NoGraphError, ParityError

    if isinstance(exc, ParityError):
        return "parity_fail"
    if isinstance(exc, NoGraphError):
        return "no_graph"
    if isinstance(exc, torch.OutOfMemoryError) or isinstance(exc.__cause__, torch.OutOfMemoryError):
        return "oom"
    if isinstance(exc, CompileError):
        return "compile_error"
    if isinstance(exc, UncompletedJobError) and "timed-out" in str(exc):
        return "timeout"  # submitit's signal handler: time limit reached, no requeue left
    return "crash"


def _inductor_cache(spec: JobSpec) -> Path:
    """Point inductor and triton at the cache this job's `compile.cache` asks for."""
    cc = spec.config["compile"]
    if cc["cache"] == "cold":
        path = Path(tempfile.mkdtemp(prefix="inductor-cold-", dir=spec.job_dir))
    else:
        path = Path(cc["cache_dir"] or Path(spec.sweep_dir) / "cache" / "inductor")
        path.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
    os.environ["TRITON_CACHE_DIR"] = str(path / "triton")
    if cc["freezing"]:
        os.environ["TORCHINDUCTOR_FREEZING"] = "1"
    return path


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


def _first_rank_error(job_dir: Path) -> dict | None:
    """The earliest error any rank recorded: the cause, where the others only saw a broken peer."""
    errors = []
    for path in job_dir.glob(RANK_ERROR.format("*")):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return min(errors, key=lambda e: e["time"]) if errors else None


def run_job(spec: JobSpec) -> dict | None:
    """Measure one job; rank 0 writes `result.json` and returns it (other ranks return None)."""
    from orchestrator.measure import Protocol
    from orchestrator.parallelize import init_distributed, local_device
    from workloads import build_workload

    cfg = spec.cfg
    if cfg.workload.path and cfg.workload.path not in sys.path:
        sys.path.insert(0, cfg.workload.path)  # user code: workload.target and compile.backend
    spec.job_dir.mkdir(parents=True, exist_ok=True)
    result = result_skeleton(spec) | _log_paths()
    cache = _inductor_cache(spec)
    # A dynamic-shape schedule must not hit the recompile limit, or the count would stop there.
    torch._dynamo.config.recompile_limit = max(8, len(cfg.workload.shapes) + 4)
    device = _device(cfg.bench.device)
    rank, world = 0, 1
    protocol = None
    started = time.time()
    try:
        if cfg.parallel.world_size > 1:
            rank, world = init_distributed(device, cfg.bench.timeout_s)
        device = local_device(device)
        torch._dynamo.reset()  # nothing compiled earlier in this process may serve this job
        workload = build_workload(cfg.workload, cfg.bench.task, device, cfg.bench.seed)
        protocol = Protocol(cfg, workload, device, rank, world)
        result.update(protocol.run())
        result["status"] = "ok"
    except Exception as exc:  # every failure becomes a result row with its class and message
        result["status"] = classify(exc)
        result["error"] = f"{type(exc).__name__}: {exc}".strip()[:2000]
        if result["status"] == "timeout":
            result["error"] = f"hit its time limit of {cfg.bench.timeout_s:.0f} s per attempt ({exc})"
        if protocol is not None:
            result.update(protocol.result)
        write_json_atomic(
            spec.job_dir / RANK_ERROR.format(rank),
            {
                "rank": rank,
                "time": time.time(),
                "status": result["status"],
                "error": result["error"],
                "traceback": traceback.format_exc()[-4000:],
            },
        )
    finally:
        if cfg.compile.cache == "cold":
            shutil.rmtree(cache, ignore_errors=True)
    if result["status"] != "ok" and world > 1:
        time.sleep(1.0)  # let the rank that failed first record its error
        first = _first_rank_error(spec.job_dir)
        if first is not None and first["rank"] != rank:
            result["status"], result["error"] = first["status"], f"rank {first['rank']}: {first['error']}"
    from orchestrator.environment import describe

    result.update(describe(device, world))
    result["wall_s"] = time.time() - started
    if protocol is not None:
        result["timings"] = protocol.timings
    if dist.is_initialized():
        dist.destroy_process_group()
    if rank != 0:
        return None
    write_json_atomic(spec.job_dir / RESULT_FILE, result)
    if cfg.logger.mode != "disabled":
        from orchestrator.tracking import log_job

        log_job(spec, result)
    return result


class Worker(submitit.helpers.Checkpointable):
    """The submitit callable. Checkpointable: on preemption or time limit submitit requeues it,
    and the job re-measures from scratch (a half-done measurement is not worth resuming)."""

    def __call__(self, spec: JobSpec) -> dict | None:
        return run_job(spec)
