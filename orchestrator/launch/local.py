"""The launchers of this host: `local` (one subprocess per job, submitit's LocalExecutor, placed on
free GPUs) and `debug` (in this process, one job after another, for a debugger)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import submitit
import torch

from orchestrator.config.schema import Config
from orchestrator.config.spec import JobSpec
from orchestrator.core.env_scope import scoped_environ
from orchestrator.core.failures import ConfigError, first_rank_error
from orchestrator.launch import ledger
from orchestrator.launch.diagnosis import Attempt
from orchestrator.launch.launcher import Launcher, uses_cuda

CONTROLLERS_LOG = "controllers.err"
WATCHDOG_GRACE_S = 60.0
"""Seconds past a local job's time limit (all its requeues) before the orchestrator kills it."""
RANK_GRACE_S = 30.0
"""Seconds a job's other ranks get, after one rank recorded its failure, to end or record theirs."""


class LocalLauncher(Launcher):
    """One subprocess per job on this host (submitit's LocalExecutor), placed on free GPUs."""

    name = "local"
    places_gpus = True
    pid_jobs = True

    def executor(self) -> submitit.Executor:
        return submitit.LocalExecutor(folder=self.folder, max_num_timeout=self.base.launcher.max_requeues)

    def parameters(self, spec: JobSpec) -> dict[str, Any]:
        return host_parameters(self, spec)

    @contextlib.contextmanager
    def submitting(self, spec: JobSpec) -> Iterator[None]:
        """submitit's local controller inherits this process's stderr, and prints a KeyboardInterrupt
        traceback there when a job is cancelled (Ctrl-C). Controllers started in this scope write
        theirs to logs/controllers.err instead: the job's own output is in its own logs anyway.
        A job of several ranks meets at a port free now (MASTER_PORT, which submitit's environment
        takes): submitit's own pick, random from the job's pid, can be a port in use (EADDRINUSE on
        rank 0, seen beside another sweep's gloo connections)."""
        path = self.sweep_dir / "logs" / CONTROLLERS_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        port = {"MASTER_PORT": str(free_port())} if spec.cfg.parallel.world_size > 1 else {}
        saved = os.dup(2)
        with path.open("ab") as log, scoped_environ(port):
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)

    def ended(self, attempt: Attempt) -> bool:
        if attempt.job.done():
            return True
        if (stopped := stop_stuck_ranks(attempt)) is not None:
            attempt.failure = stopped
            return True
        # Watchdog over submitit's own timeout: its requeues included, plus a grace period.
        limit = attempt.spec.cfg.time_limit_s() * (self.base.launcher.max_requeues + 1) + WATCHDOG_GRACE_S
        if time.time() - attempt.started > limit:
            attempt.job.cancel(check=False)
            attempt.failure = ("timeout", f"killed by the orchestrator after {limit:.0f} s")
            return True
        return False

    def check(self, cfg: Config) -> None:
        super().check(cfg)
        check_host(self, cfg)

    @classmethod
    def cancel(cls, sweep_dir: Path, entry: dict) -> bool:
        try:
            os.kill(int(entry["job_id"]), signal.SIGINT)  # submitit's own cancel of a local controller
        except ProcessLookupError:
            return False
        return True

    @classmethod
    def stop_orphans(cls, sweep_dir: Path) -> int:
        return ledger.stop_orphans(sweep_dir)


class DebugLauncher(Launcher):
    """In this process, one job after another (submitit's DebugExecutor), for a debugger; this host's
    rules, as `local` has them."""

    name = "debug"

    def executor(self) -> submitit.Executor:
        return submitit.DebugExecutor(folder=self.folder)

    def parameters(self, spec: JobSpec) -> dict[str, Any]:
        return host_parameters(self, spec)

    def task(self) -> Callable[[JobSpec], Any]:
        # Imported when a debug sweep asks for it: the measuring code (torch._dynamo) costs every
        # other command a second to import.
        from orchestrator.job.worker import run_job

        return run_job  # no supervisor: the job runs here, where a debugger can stop in it

    def ended(self, attempt: Attempt) -> bool:
        """A debug job runs when its result is asked for: here, and it has ended when this returns."""
        try:
            attempt.job.result()
        except Exception as e:  # the worker records its own failures; this is a crash around it
            attempt.failure = ("crash", f"{type(e).__name__}: {e}")
        return True

    def check(self, cfg: Config) -> None:
        super().check(cfg)
        check_host(self, cfg)
        if cfg.parallel.world_size > 1:
            raise ConfigError(
                f"parallel.strategy={cfg.parallel.strategy} needs launcher=local or slurm (debug: in-process)"
            )

    @classmethod
    def cancel(cls, sweep_dir: Path, entry: dict) -> bool:
        return False  # its jobs ran in the orchestrator's process, and ended with it


def free_port() -> int:
    """A TCP port no socket of this host holds now (the kernel's pick for a bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def stop_stuck_ranks(attempt: Attempt) -> tuple[str, str] | None:
    """A job of several ranks where one rank recorded its failure RANK_GRACE_S ago and the job still
    runs: its other ranks wait on a group that will not form or answer (rank 0 failed before the
    group's store existed: the others wait in init_process_group for its whole timeout). Stopped
    now, with the first rank's failure as the job's; None while nothing is stuck."""
    if attempt.spec.cfg.parallel.world_size < 2:
        return None
    first = first_rank_error(attempt.spec.job_dir)
    if first is None or float(first["time"]) < attempt.started:  # none, or an earlier attempt's
        return None
    if time.time() - float(first["time"]) < RANK_GRACE_S:
        return None
    attempt.job.cancel(check=False)
    # `crash`: failure_result then takes the first rank's own class, and puts its error first
    return "crash", f"the job's other ranks were stopped {RANK_GRACE_S:.0f} s after it, still waiting"


def host_parameters(launcher: Launcher, spec: JobSpec) -> dict[str, Any]:
    """The executor parameters of a job on this host: its ranks, GPUs and time limit."""
    cfg = spec.cfg
    timeout_s = cfg.time_limit_s()
    return {
        "tasks_per_node": cfg.parallel.ranks_per_node if cfg.parallel.world_size > 1 else 1,
        "gpus_per_node": launcher.gpus(spec),
        "timeout_min": timeout_s / 60,
        "signal_delay_s": int(min(30, max(1, timeout_s / 4))),
    }


def check_host(launcher: Launcher, cfg: Config) -> None:
    """A job's ranks fit this host: one per GPU (unless `launcher.gpus_per_node` shares them), at most
    one per core on a CPU."""
    world, ranks = cfg.parallel.world_size, cfg.parallel.ranks_per_node
    gpus, cores = torch.cuda.device_count(), os.cpu_count() or 1
    if uses_cuda(cfg) and world > gpus and not launcher.base.launcher.gpus_per_node:
        raise ConfigError(
            f"parallel.ranks_per_node={ranks} needs {world} GPUs; this machine has {gpus} "
            f"(launcher.gpus_per_node={gpus or 1} lets ranks share them: the code path, not scaling)"
        )
    if not uses_cuda(cfg) and world > cores:
        raise ConfigError(
            f"parallel.ranks_per_node={ranks} starts {world} CPU ranks; this machine has {cores} cores "
            f"(at most one rank per core)"
        )
