"""Every fresh process of a job, in one place: the worker itself (the supervisor starts it), and
the parts of a job run in an interpreter of their own: the compile probes, the side processes (more
paired repetitions, each side alone) and an AOTInductor package's cold start. A fresh process is the
only way to leave behind what this one holds: in-memory code caches, CUDA-graph pools, allocator
state.

    python -m orchestrator.job.processes.fresh REQUEST.json

The request names its `kind`; `main` sets the request's device, runs that kind's entry (ENTRIES), writes
its answer beside the request where one is asked for, and leaves without the interpreter's teardown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

from orchestrator.config.spec import JobSpec
from orchestrator.job.processes.fork_server import die_with_parent, measuring
from orchestrator.job.processes.supervisor import (
    PYTHON,
    STOP_SIGNALS,
    crash_line,
    how_it_ended,
    start_fresh,
    stop,
)
from orchestrator.job.setup.compile_settings import fresh_dir

# kind -> the function that answers its request in the fresh process (imported there only); a kind
# not named here is itself `module:function` (a test's own entry).
ENTRIES = {
    "job": "orchestrator.job.worker:answer",
    "side": "orchestrator.job.processes.side_process:answer",
    "probe": "orchestrator.job.processes.compile_probe:answer",
    "aoti-load": "orchestrator.job.phases.aoti:answer",
}
THIS_MODULE = "orchestrator.job.processes.fresh"
running: str | None = None  # in a fresh process, the kind it runs (None in the job's own process)


def run_fresh(spec: JobSpec, kind: str, label: str, payload: dict) -> tuple[dict | None, str | None]:
    """Run `kind` in a fresh process on a request (the spec plus `payload`); (answer, None) or
    (None, why). `label` names its work folder and its failures (`side-paired`, `probe-warm`)."""
    request = {"spec": dataclasses.asdict(spec), **payload}
    return run_module(spec.job_dir, spec.cfg.bench.timeout_s, kind, label, request)


def run_module(
    job_dir: Path, timeout_s: float, kind: str, label: str, request: dict
) -> tuple[dict | None, str | None]:
    """`python -m orchestrator.job.processes.fresh REQUEST.json` in a work folder of the job's: (answer, None)
    or (None, why)."""
    work = fresh_dir(job_dir, f"{label}-")
    answer, request_path = work / "answer.json", work / "request.json"
    request_path.write_text(json.dumps({**request, "kind": kind, "answer": str(answer)}, default=str))
    try:
        returncode, stderr = _run(request_path, timeout_s)
    except subprocess.TimeoutExpired:
        shutil.rmtree(work, ignore_errors=True)
        return None, f"{label} process exceeded {timeout_s:.0f} s"
    got = json.loads(answer.read_text()) if answer.exists() else None
    shutil.rmtree(work, ignore_errors=True)
    raise_if_stopped(returncode, f"{label} process")
    if returncode != 0 or got is None:
        why = crash_line(stderr) or "no output"
        return None, f"{label} process {how_it_ended(returncode)}: {why}"[:500]
    return got, None


def _run(request_path: Path, timeout_s: float) -> tuple[int, str]:
    """The fresh process for a request, to its end: (exit code, what it wrote to stderr). A fork of
    the sweep's fork server where there is one, else a new interpreter; a job stopped from outside
    takes it along either way."""
    out, err = request_path.with_name("stdout"), request_path.with_name("stderr")
    with out.open("w") as o, err.open("w") as e:
        child = start_fresh(PYTHON, request_path, notices=False, streams=(o.fileno(), e.fileno()))
        if child is None:
            command = [*PYTHON, "-m", THIS_MODULE, str(request_path)]
            proc = subprocess.run(command, preexec_fn=die_with_parent, stdout=o, stderr=e, timeout=timeout_s)
            returncode = proc.returncode
        else:
            try:
                returncode = child.wait(timeout_s)
            finally:
                stop(child)
    return returncode, err.read_text(errors="replace")


def stop_signal(returncode: int) -> signal.Signals | None:
    """The stop signal (Ctrl-C, `kill`, `timeout`, scancel) that ended a process, or None."""
    return signal.Signals(-returncode) if returncode < 0 and -returncode in STOP_SIGNALS else None


def raise_if_stopped(returncode: int, what: str) -> None:
    """A fresh process ended by a stop signal (Ctrl-C, `kill`, `timeout` and scancel reach the job's
    whole process group) means the job is being stopped: it stops too, without a result
    (KeyboardInterrupt is not a failure class), so that a resumed sweep measures it again rather
    than keep it with figures missing."""
    if (sig := stop_signal(returncode)) is not None:
        raise KeyboardInterrupt(f"{what} was stopped by {sig.name}")


def stopped_within(exc: BaseException) -> str | None:
    """Whether a failure came from a subprocess killed by a stop signal (inductor's C++ compiler,
    which a stop reaches together with the job): then the job is being stopped, and the failure is
    not its result. Says so, or None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:  # dynamo raises `from None`: __context__ too
        seen.add(id(cause))
        sig = stop_signal(cause.returncode) if isinstance(cause, subprocess.CalledProcessError) else None
        if sig is not None:
            return f"a subprocess of the job was stopped by {sig.name}"
        cause = cause.__cause__ or cause.__context__
    return None


def main(request_path: str) -> None:
    """The fresh process: its kind's answer to the request, written beside it where asked for."""
    global running
    import importlib

    req = json.loads(Path(request_path).read_text())
    running = req["kind"]
    # a side process, a probe, a package's cold start: each measures throughout (a job, in its phases),
    # so it holds the sweep's quiet lock from its first step, ahead of the spare started beside it
    with contextlib.nullcontext() if running == "job" else measuring():
        if "device" in req and str(req["device"]).startswith("cuda"):
            import torch

            torch.cuda.set_device(torch.device(req["device"]))
        module, name = ENTRIES.get(running, running).split(":")
        spec = JobSpec(**req.pop("spec")) if "spec" in req else None
        answer = getattr(importlib.import_module(module), name)(spec, req)
    if answer is not None and req.get("answer"):
        Path(req["answer"]).write_text(json.dumps(answer, default=str))
    leave()


def leave() -> NoReturn:
    """End a measuring process once its answer is written: flushed, then gone without the
    interpreter's teardown, which took 1.4 s after a compile on a 2-core CPU (inductor's exit
    work and module teardown) and in which gloo's threads can abort the process (`terminate called
    without an active exception`, seen with ranks pinned to one core each)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":  # the module proper runs it, so that `running` is seen where it is imported
    from orchestrator.job.processes import fresh

    fresh.main(sys.argv[1])
