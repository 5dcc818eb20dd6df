"""Run part of a job in a fresh interpreter and read its answer: the compile probes and the side
processes (more paired repetitions, each side alone). A fresh process is the only way to leave
behind what this one holds: in-memory code caches, CUDA-graph pools, allocator state.

    python -m MODULE REQUEST.json     (MODULE's main(request) writes the answer beside it)
"""

from __future__ import annotations

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
from orchestrator.job.compile_cost import fresh_dir
from orchestrator.job.supervisor import PYTHON, STOP_SIGNALS, crash_line, die_with_parent, how_it_ended


def run_fresh(spec: JobSpec, module: str, kind: str, payload: dict) -> tuple[dict | None, str | None]:
    """Start `python -m module` on a request (the spec plus `payload`); (answer, None) or (None, why)."""
    request = {"spec": dataclasses.asdict(spec), **payload}
    return run_module(spec.job_dir, spec.cfg.bench.timeout_s, module, kind, request)


def run_module(
    job_dir: Path, timeout_s: float, module: str, kind: str, request: dict
) -> tuple[dict | None, str | None]:
    """`python -m module REQUEST.json` in a work folder of the job's: (answer, None) or (None, why)."""
    work = fresh_dir(job_dir, f"{kind}-")
    answer, request_path = work / "answer.json", work / "request.json"
    request_path.write_text(json.dumps({**request, "answer": str(answer)}, default=str))
    try:
        proc = subprocess.run(
            [*PYTHON, "-m", module, str(request_path)],
            preexec_fn=die_with_parent,  # a job stopped from outside takes its fresh processes along
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(work, ignore_errors=True)
        return None, f"{kind} process exceeded {timeout_s:.0f} s"
    got = json.loads(answer.read_text()) if answer.exists() else None
    shutil.rmtree(work, ignore_errors=True)
    raise_if_stopped(proc.returncode, f"{kind} process")
    if proc.returncode != 0 or got is None:
        why = crash_line(proc.stderr) or "no output"
        return None, f"{kind} process {how_it_ended(proc.returncode)}: {why}"[:500]
    return got, None


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


def read_request(path: str) -> tuple[JobSpec, dict]:
    """In the fresh process: the spec and the rest of the request."""
    req = json.loads(Path(path).read_text())
    return JobSpec(**req.pop("spec")), req


def write_answer(req: dict, answer: dict) -> None:
    Path(req["answer"]).write_text(json.dumps(answer, default=str))


def leave() -> NoReturn:
    """End a measuring process once its answer is written: flushed, then gone without the
    interpreter's teardown, which took 1.4 s after a compile on a 2-core CPU (inductor's exit
    work and module teardown) and in which gloo's threads can abort the process (`terminate called
    without an active exception`, seen with ranks pinned to one core each)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
