"""Commands on an existing sweep directory: status, gather, cancel, report, compare, verdict."""

from __future__ import annotations

from pathlib import Path

import submitit

from orchestrator.config import Config, ConfigError
from orchestrator.console import make_console
from orchestrator.failures import from_scheduler_state
from orchestrator.launch.ledger import read_ledger
from orchestrator.launch.slurm import slurm_state
from orchestrator.plan import compose_config
from orchestrator.results import RESULT_FILE, read_plan, read_result, write_json_atomic
from orchestrator.results import gather as gather_table
from orchestrator.spec import JobSpec, to_job_config


def _sweep_dir(args: list[str], command: str) -> Path:
    if not args:
        raise ConfigError(f"{command} needs a sweep directory: python -m orchestrator {command} DIR")
    path = Path(args[0]).resolve()
    if not (path / "jobs").is_dir():
        raise ConfigError(f"{path} is not a sweep directory (no jobs/ folder)")
    return path


def _base_config(sweep_dir: Path, overrides: list[str] | None = None) -> Config:
    """The sweep's own settings, read back from any of its jobs' config files."""
    from omegaconf import OmegaConf

    configs = sorted((sweep_dir / "jobs").glob("*/config.yaml"))
    container = OmegaConf.to_container(OmegaConf.load(configs[0])) if configs else {}
    if overrides:
        extra = OmegaConf.to_container(compose_config(overrides))
        container = OmegaConf.to_container(OmegaConf.merge(container, {"compare": extra["compare"]}))
    return to_job_config(container)  # type: ignore[arg-type]


def _job_state(sweep_dir: Path, launcher: str | None, job_id: str) -> str:
    if launcher == "slurm":
        return slurm_state(job_id, sweep_dir / "logs" / "%j")
    return "UNKNOWN"


def status(args: list[str]) -> int:
    """Each job: its result if it has one, else its scheduler state (sacct/squeue on Slurm)."""
    sweep_dir = _sweep_dir(args, "status")
    submitted = read_ledger(sweep_dir)
    plan = read_plan(sweep_dir)
    console = make_console()
    counts: dict[str, int] = {}
    for job_id in sorted(set(plan) | set(submitted["jobs"])):
        result = read_result(sweep_dir / "jobs" / job_id)
        if result is not None:
            state = result["status"]
        elif job_id in submitted["jobs"]:
            state = _job_state(sweep_dir, submitted["launcher"], submitted["jobs"][job_id]["job_id"])
        else:
            state = "NOT_SUBMITTED"
        counts[state] = counts.get(state, 0) + 1
        label = plan.get(job_id, {}).get("label") or submitted["jobs"].get(job_id, {}).get("label", "")
        console.print(f"{job_id}  {state:<14} {label}")
    console.print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 0


def gather(args: list[str]) -> int:
    """Write the table and dashboard of a sweep directory; Slurm jobs that ended without a result
    first get one, with the failure class their scheduler state says."""
    from omegaconf import OmegaConf

    from orchestrator.launch.diagnosis import failure_result
    from orchestrator.sweep import finish

    sweep_dir = _sweep_dir(args, "gather")
    submitted = read_ledger(sweep_dir)
    base = _base_config(sweep_dir)
    plan = read_plan(sweep_dir)
    for job_id, info in submitted["jobs"].items():
        job_dir = sweep_dir / "jobs" / job_id
        if read_result(job_dir) is not None or submitted["launcher"] != "slurm":
            continue
        state = _job_state(sweep_dir, "slurm", info["job_id"])
        status_ = from_scheduler_state(state)
        if status_ is None:
            continue  # still queued or running
        config = OmegaConf.to_container(OmegaConf.load(job_dir / "config.yaml"))
        spec = JobSpec(job_id, plan.get(job_id, {}).get("axes", {}), config, str(sweep_dir))  # type: ignore[arg-type]
        write_json_atomic(job_dir / RESULT_FILE, failure_result(spec, None, status_, f"Slurm state {state}"))
    return finish(sweep_dir, base, make_console())


def cancel(args: list[str]) -> int:
    """Cancel every unfinished job of the sweep (scancel on Slurm, SIGINT to local controllers)."""
    import os
    import signal

    sweep_dir = _sweep_dir(args, "cancel")
    submitted = read_ledger(sweep_dir)
    n = 0
    for job_id, info in submitted["jobs"].items():
        if read_result(sweep_dir / "jobs" / job_id) is not None:
            continue
        if submitted["launcher"] == "slurm":
            submitit.SlurmJob(sweep_dir / "logs" / "%j", info["job_id"]).cancel(check=False)
        else:
            try:
                os.kill(int(info["job_id"]), signal.SIGINT)
            except ProcessLookupError:
                continue
        n += 1
    print(f"cancelled {n} job(s) of {sweep_dir}")
    return 0


def report(args: list[str]) -> int:
    """(Re)write the dashboard of a sweep directory."""
    from orchestrator.report import write_dashboard

    sweep_dir = _sweep_dir(args, "report")
    df = gather_table(sweep_dir)
    if df.empty:
        raise ConfigError(f"{sweep_dir} has no results yet")
    print(f"dashboard: {write_dashboard(sweep_dir, df)}")
    return 0


def compare(args: list[str]) -> int:
    """Regressions of a candidate sweep against a baseline; exit 1 if any."""
    from orchestrator.compare import run_compare

    paths = [a for a in args if "=" not in a]
    overrides = [a for a in args if "=" in a]
    if len(paths) != 2:
        raise ConfigError("compare needs two sweep directories: python -m orchestrator compare BASE CAND")
    base_dir, cand_dir = _sweep_dir(paths[:1], "compare"), _sweep_dir(paths[1:], "compare")
    thresholds = _base_config(cand_dir, overrides).compare
    return run_compare(base_dir, cand_dir, thresholds)


def verdict(args: list[str]) -> int:
    """The verdict again, for another run (verdict.steps=N, verdict.serve_s=S, verdict.cache=warm).

    Nothing is re-measured: the verdict is recomputed from the sweep's results, printed, and
    written to verdict.json and the dashboard."""
    from omegaconf import OmegaConf

    from orchestrator.verdict import run_verdict

    overrides = [a for a in args if "=" in a]
    bad = [o for o in overrides if not o.startswith("verdict.")]
    if bad:
        raise ConfigError(f"verdict takes verdict.KEY=VALUE overrides only, not {bad[0]}")
    sweep_dir = _sweep_dir([a for a in args if "=" not in a], "verdict")
    # The sweep's own verdict settings, then the overrides; the schema check names a bad key.
    sweep = OmegaConf.to_container(OmegaConf.structured(_base_config(sweep_dir)))
    merged = OmegaConf.merge(sweep, OmegaConf.from_dotlist(overrides))
    return run_verdict(sweep_dir, to_job_config(OmegaConf.to_container(merged)).verdict)  # type: ignore[arg-type]
