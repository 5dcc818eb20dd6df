"""Shared fixtures: the CLI as a user runs it, a session-wide warm inductor cache, fast bench settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

# Fast settings for tests that are not about timing quality.
FAST = [
    "bench.repeats=3",
    "bench.steps_per_repeat=1",
    "bench.warmup=1",
    "bench.bootstrap=200",
    "logger=none",
    "compile.probes=false",
    "verdict.follow_up=false",  # a follow-up job per sweep would grow the suite (one test runs them)
    "verdict.profile=false",  # the profile pass of every compiled job, as above (one test runs it)
]


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory) -> Path:
    """One inductor cache for the whole session: tests not about cold compile reuse kernels."""
    return tmp_path_factory.mktemp("inductor-cache")


@pytest.fixture
def fast(compile_cache) -> list[str]:
    return [*FAST, "compile.cache=shared", f"compile.cache_dir={compile_cache}"]


def wait_until(predicate, timeout_s: float, what: str) -> None:
    """Wait for an event (a file, a process gone), checking often, failing with `what` at the deadline:
    never a fixed sleep standing in for the event."""
    import time

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:.0f} s for: {what}")
        time.sleep(0.05)


def run_cli(
    args: list[str], cwd: Path, timeout: float = 600, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python -m orchestrator ARGS` in a subprocess, as a user types it."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def results(sweep_dir: Path) -> dict[str, dict]:
    """Every result.json of a sweep, by job id."""
    return {p.parent.name: json.loads(p.read_text()) for p in (sweep_dir / "jobs").glob("*/result.json")}


def by_label(sweep_dir: Path) -> dict[str, dict]:
    return {r["label"]: r for r in results(sweep_dir).values()}


@pytest.fixture(scope="session")
def initargs_sweep(tmp_path_factory, compile_cache) -> Path:
    """A real sweep over `workload.init_args` with two jobs per mode (the stacked-bars bug's sweep),
    modes given out of canonical order; stdout piped, as in CI. Returns the sweep dir (stdout in
    `cli_stdout.txt` beside it)."""
    cwd = tmp_path_factory.mktemp("initargs")
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.target=user_models:MLP",
            "workload.init_args={hidden:64},{hidden:32}",
            "workload.inputs=[[8,32]]",
            "compile.mode=default,eager",
            "bench.task=infer",
            *FAST,
            f"compile.cache_dir={compile_cache}",
            "sweep.name=initargs",
        ],
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (cwd / "cli_stdout.txt").write_text(proc.stdout)
    return cwd / "sweeps" / "initargs"
