"""The submitit callable: run the job's measurement in a child process (a new interpreter, or a fork
of the sweep's fork server) and watch how it ends.

A worker that dies without a word (`os._exit(7)`, a segfault in a kernel, the OOM killer) takes its
exit code with it, and submitit's local controller does not keep it either. This parent stays
small (no torch), waits for the child, and when the child ended without writing its result, writes
one that says how it ended: its exit code or signal and the last line it printed. When the child
wrote its result, it reads it back typed and adds the teardown to the job's wall time.

    python -m orchestrator.job.processes.fresh REQUEST.json      (the child, kind `job`: job/worker.py)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import submitit
from submitit.core.utils import UncompletedJobError

from orchestrator.config.spec import JobSpec
from orchestrator.core.failures import write_rank_error
from orchestrator.core.files import RESULT_FILE, remove_private_caches, write_json_atomic
from orchestrator.core.result import JobResult
from orchestrator.job.processes import fork_server
from orchestrator.job.processes.fork_server import Forked, die_with_parent
from orchestrator.job.skeleton import result_skeleton

# Signals of an outside stop; SIGUSR1/2 are submitit's time-limit and preemption notices.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2}


def _worker_child() -> None:
    """The worker child, before exec: it dies with this supervisor, and leaves the scheduler's
    notices to it. Slurm sends SIGTERM (scancel, preemption) and the time-limit SIGUSR1/2 to every
    process of the step: submitit's handler in this process decides (requeue, or stop), so the
    child ignores them (an ignored signal stays ignored across exec); SIGKILL still ends it."""
    die_with_parent()
    for notice in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(notice, signal.SIG_IGN)


def how_it_ended(returncode: int) -> str:
    if returncode == -signal.SIGKILL:
        return "was killed by SIGKILL (the kernel's OOM killer sends it when host memory runs out)"
    if returncode < 0:
        return f"was killed by signal {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


# Measuring processes run with faulthandler on: a fatal signal (a segfault in a kernel, a loader, a
# collective) prints where in Python it happened, which crash_line turns into one line.
PYTHON = [sys.executable, "-X", "faulthandler"]


# faulthandler's headers: the thread that died, and any other thread (the main one is dumped last).
_CURRENT = re.compile(r"^Current thread 0x[0-9a-fA-F]+.*\(most recent call first\):$")
_THREAD = re.compile(r"^Thread 0x[0-9a-fA-F]+.*\(most recent call first\):$")


def _frames(lines: list[str], header: int) -> str:
    """The two innermost Python frames under a thread's header."""
    frames = []
    for line in lines[header + 1 : header + 3]:
        if not line.startswith("File "):
            break
        frames.append(line)
    return " <- ".join(frames)


def crash_line(text: str) -> str:
    """The line that says how a process ended: after faulthandler's dump, the fatal error and the two
    innermost frames of the thread that died (or, when that thread ran no Python, the main thread's);
    otherwise the last non-empty line that is not faulthandler's list of extension modules."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = max((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), default=None)
    if fatal is None:
        rest = [line for line in lines if not line.startswith("Extension modules:")]
        return rest[-1] if rest else ""
    dump = lines[fatal:]
    current = next((i for i, line in enumerate(dump) if _CURRENT.match(line)), None)
    if current is not None and (where := _frames(dump, current)):
        return f"{dump[0]}, in {where}"
    threads = [i for i, line in enumerate(dump) if _THREAD.match(line)]
    main = _frames(dump, threads[-1]) if threads else ""
    return f"{dump[0]}, in a thread without Python frames" + (f"; main thread in {main}" if main else "")


def last_line() -> str:
    """How this job's stderr log ends (the child writes to it too): crash_line of its tail."""
    try:
        path = submitit.JobEnvironment().paths.stderr
        with open(path, errors="replace") as f:
            f.seek(max(path.stat().st_size - 64000, 0))  # a dump of many threads is long
            return crash_line(f.read())
    except (RuntimeError, KeyError, OSError):  # not inside a submitit job, or no log yet
        return ""


def _global_rank() -> int:
    try:
        return submitit.JobEnvironment().global_rank
    except (RuntimeError, KeyError):  # called directly, outside a submitit job
        return 0


def run_child(spec: JobSpec) -> JobResult | None:
    """Start the worker in a child process, wait for it, and return its result (rank 0): the child
    wrote it (`to_dict`), read back typed here (`from_dict`)."""
    rank = _global_rank()
    spec.job_dir.mkdir(parents=True, exist_ok=True)
    request = spec.job_dir / f"request.rank{rank}.json"
    result_path = spec.job_dir / RESULT_FILE
    # Slurm sends SIGCONT with its time-limit SIGUSR2. submitit's handler for SIGCONT only logs, and
    # a SIGUSR2 that lands during that logging has its "no requeue left" exception swallowed by the
    # logging module (seen in CI: the job then hung to the hard limit without a result). SIGCONT's
    # default action is to continue, so it needs no handler.
    signal.signal(signal.SIGCONT, signal.SIG_DFL)
    python, env = interpreter(spec)
    started_at = time.time()  # the job's wall clock starts here (job/phases/wall.py)
    job = {"kind": "job", "spec": dataclasses.asdict(spec), "started_at": started_at}
    request.write_text(json.dumps(job, default=str))
    child = start_fresh(python, request, notices=True) or subprocess.Popen(
        [*python, "-m", "orchestrator.job.processes.fresh", str(request)],
        preexec_fn=_worker_child,
        env=env,
    )
    try:
        returncode = child.wait()
    except UncompletedJobError as e:  # the time limit, and no requeue left: the job's last word
        stop(child)
        _write_ended(spec, rank, None, str(e))
        raise
    finally:  # an exception here (submitit's timeout signal, Ctrl-C) must not leave it running
        stop(child)
        remove_private_caches(spec.job_dir, child.pid)  # a killed child's own clean-up never ran
    request.unlink(missing_ok=True)
    result = _written_by(result_path, child.pid)  # the result file, read once here
    wrote = result is not None
    if -returncode in STOP_SIGNALS and not wrote:
        # Stopped from outside (scancel, the orchestrator's stop, Ctrl-C): no result of its own, so
        # that the scheduler's state decides and a resumed sweep runs the job again.
        line = last_line()
        raise RuntimeError(f"worker process {how_it_ended(returncode)}" + (f": {line}" if line else ""))
    if returncode != 0 and not wrote:
        return _write_ended(spec, rank, returncode, last_line())
    if rank != 0 or result is None:
        return None
    return _with_teardown(result_path, result, started_at)


def _with_teardown(result_path: Path, result: JobResult, started_at: float) -> JobResult:
    """The result with its teardown (result written -> process gone) and the job's whole wall,
    written back: the supervisor is the last to know when the job's process was gone."""
    wall = result.wall
    if wall is not None and wall.wall_written_at is not None:
        ended = time.time()
        wall.wall_teardown_s = max(ended - wall.wall_written_at, 0.0)
        wall.job_wall_s = ended - started_at
        write_json_atomic(result_path, result.to_dict())
    return result


def interpreter(spec: JobSpec) -> tuple[list[str], dict[str, str] | None]:
    """The worker's command and environment: this interpreter, or the job's `env.python` with this
    orchestrator's code (and no other package of this environment) on its path."""
    python = spec.cfg.env.python
    if python is None:
        return PYTHON, None
    code = Path(spec.sweep_dir) / "code"  # links to this orchestrator's packages, whatever installed it
    code.mkdir(exist_ok=True)
    workloads = importlib.util.find_spec("workloads")  # found, not imported: this process stays torch-free
    assert workloads is not None and workloads.origin is not None
    for package in (Path(__file__).resolve().parents[1], Path(workloads.origin).resolve().parent):
        with contextlib.suppress(FileExistsError):  # another job of the sweep made it
            (code / package.name).symlink_to(package, target_is_directory=True)
    # The user's own PYTHONPATH (their model's repository) stays, after this orchestrator's code.
    path = os.pathsep.join(p for p in (str(code), os.environ.get("PYTHONPATH")) if p)
    return [python, "-X", "faulthandler"], {**os.environ, "PYTHONPATH": path}


def start_fresh(
    python: list[str], request: Path, notices: bool, streams: tuple[int, int] = (1, 2)
) -> Forked | None:
    """`python -m orchestrator.job.processes.fresh REQUEST` as a fork of the sweep's fork server, where there
    is one and the job runs this interpreter; None: start an interpreter. `notices`: as
    `_worker_child`, leave the scheduler's notices to this process; `streams`: stdout, stderr."""
    if python != PYTHON:
        return None
    with open(os.devnull) as nothing:
        return fork_server.start(
            "orchestrator.job.processes.fresh", request, notices, (nothing.fileno(), *streams)
        )


def stop(child: subprocess.Popen | Forked) -> None:
    """A child (an interpreter or a fork) still running: killed, and waited for."""
    if child.poll() is None:
        child.kill()
        child.wait()


def _written_by(path: Path, pid: int) -> JobResult | None:
    """The result file where it is this child's (its pid inside), not one left by an earlier attempt."""
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return JobResult.from_dict(row) if row.get("pid") == pid else None


def _write_ended(spec: JobSpec, rank: int, returncode: int | None, line: str) -> JobResult | None:
    """The result of a child that ended without writing one (rank 0), or its rank's error: its exit
    code (`returncode`), or with None the time limit it hit (submitit gave up requeueing)."""
    if returncode is None:
        status = "timeout"
        error = f"hit its time limit of {spec.cfg.time_limit_s():.0f} s per attempt ({line})"
    else:
        status = "crash"
        error = f"worker process {how_it_ended(returncode)} before writing a result"
        error += f": {line}" if line else ""
    if spec.cfg.env.python is not None:  # what that interpreter lacks is read with its name
        error += f" (env {spec.cfg.env.name}: {spec.cfg.env.python})"
    write_rank_error(spec.job_dir, rank, status, error)
    if rank != 0:
        return None

    result = result_skeleton(spec)
    result.outcome.status, result.outcome.error, result.outcome.exit_code = status, error, returncode
    result.outcome.error_log = result.outcome.log_stderr  # what the child printed before it ended
    write_json_atomic(spec.job_dir / RESULT_FILE, result.to_dict())
    return result


class Worker(submitit.helpers.Checkpointable):
    """The submitit callable. Checkpointable: on preemption or time limit submitit requeues it,
    and the job re-measures from scratch (a half-done measurement is not worth resuming)."""

    def __call__(self, spec: JobSpec) -> None:
        """The job's record is its result.json (the runner reads it); submitit's pickle holds nothing."""
        run_child(spec)
