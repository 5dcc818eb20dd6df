"""Commands on an existing sweep directory: status, gather, cancel, report, compare, verdict."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd
from omegaconf import OmegaConf
from rich.table import Table

from orchestrator.analysis.answers import Upgrade, Verdict
from orchestrator.analysis.compare import compare_tables, findings_cells, paired_timings
from orchestrator.analysis.upgrade import print_upgrade, read_upgrade, write_upgrade
from orchestrator.analysis.verdict import VERDICT_FILE, print_verdict, read_verdict, write_verdict
from orchestrator.cli.console import make_console
from orchestrator.cli.sweep import finish
from orchestrator.config.compose import compose_config
from orchestrator.config.schema import Config
from orchestrator.config.spec import JobSpec, to_job_config
from orchestrator.core.failures import ConfigError, failure_lines, failure_message, from_scheduler_state
from orchestrator.core.files import RESULT_FILE, has_result, read_plan, read_result, write_json_atomic
from orchestrator.core.result import COL
from orchestrator.launch.diagnosis import failure_result
from orchestrator.launch.launchers import launcher_class
from orchestrator.launch.ledger import read_ledger
from orchestrator.report.dashboard import write_dashboard
from orchestrator.results.table import Sweep
from orchestrator.results.table import gather as gather_table
from orchestrator.results.text import plain_table


def _sweep_dir(args: list[str], command: str) -> Path:
    if not args:
        raise ConfigError(f"{command} needs a sweep directory: python -m orchestrator {command} DIR")
    path = Path(args[0]).resolve()
    if not (path / "jobs").is_dir():
        raise ConfigError(f"{path} is not a sweep directory (no jobs/ folder)")
    return path


def _base_config(sweep_dir: Path, overrides: list[str] | None = None) -> Config:
    """The sweep's own settings, read back from any of its jobs' config files."""
    configs = sorted((sweep_dir / "jobs").glob("*/config.yaml"))
    container = OmegaConf.to_container(OmegaConf.load(configs[0])) if configs else {}
    if overrides:
        extra = cast(dict[str, Any], OmegaConf.to_container(compose_config(overrides)))
        container = OmegaConf.to_container(OmegaConf.merge(container, {"compare": extra["compare"]}))
    return to_job_config(container)  # type: ignore[arg-type]


def status(args: list[str]) -> int:
    """Each job: its result if it has one, else its scheduler state (sacct/squeue on Slurm)."""
    sweep_dir = _sweep_dir(args, "status")
    submitted = read_ledger(sweep_dir)
    launcher = launcher_class(submitted["launcher"])
    plan = read_plan(sweep_dir)
    console = make_console()
    counts: dict[str, int] = {}
    for job_id in sorted(set(plan) | set(submitted["jobs"])):
        result = read_result(sweep_dir / "jobs" / job_id)
        if result is not None:
            state = result[COL.status]
        elif job_id in submitted["jobs"]:
            state = launcher.scheduler_state(sweep_dir, submitted["jobs"][job_id]["job_id"])
        else:
            state = "NOT_SUBMITTED"
        counts[state] = counts.get(state, 0) + 1
        label = plan.get(job_id, {}).get("label") or submitted["jobs"].get(job_id, {}).get("label", "")
        console.print(f"{job_id}  {state:<14} {label}")
        if result is not None and state != "ok":  # why, where, and the file with the whole traceback
            for line in [f"  error: {failure_message(result)}", *failure_lines(result)]:
                console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 0


def gather(args: list[str]) -> int:
    """Write the table and dashboard of a sweep directory; Slurm jobs that ended without a result
    first get one, with the failure class their scheduler state says."""
    sweep_dir = _sweep_dir(args, "gather")
    submitted = read_ledger(sweep_dir)
    launcher = launcher_class(submitted["launcher"])
    base = _base_config(sweep_dir)
    plan = read_plan(sweep_dir)
    for job_id, info in submitted["jobs"].items():
        job_dir = sweep_dir / "jobs" / job_id
        if has_result(job_dir):
            continue
        state = launcher.scheduler_state(sweep_dir, info["job_id"])
        status_ = from_scheduler_state(state)
        if status_ is None:
            continue  # still queued or running, or a launcher that keeps no state (local: UNKNOWN)
        config = OmegaConf.to_container(OmegaConf.load(job_dir / "config.yaml"))
        planned = plan.get(job_id, {})  # a follow-up stays one (its row is kept out of the suite)
        spec = JobSpec(
            job_id,
            planned.get("axes", {}),
            config,  # type: ignore[arg-type]
            str(sweep_dir),
            follow_up_of=planned.get(COL.follow_up_of),
            lever=planned.get(COL.lever),
        )
        error = f"{launcher.name} state {state}"
        write_json_atomic(job_dir / RESULT_FILE, failure_result(spec, None, status_, error))
    return finish(Sweep(sweep_dir, plan), base, make_console())


def cancel(args: list[str]) -> int:
    """Cancel every unfinished job of the sweep (scancel on Slurm, SIGINT to local controllers)."""
    sweep_dir = _sweep_dir(args, "cancel")
    submitted = read_ledger(sweep_dir)
    launcher = launcher_class(submitted["launcher"])
    n = 0
    for job_id, info in submitted["jobs"].items():
        if not has_result(sweep_dir / "jobs" / job_id):
            n += launcher.cancel(sweep_dir, info)
    print(f"cancelled {n} job(s) of {sweep_dir}")
    return 0


def _dashboard(
    sweep_dir: Path,
    df: pd.DataFrame,
    plan: Mapping[str, Mapping[str, Any]],
    verdict: Verdict | None = None,
    upgrade: Upgrade | None = None,
    **kw: Any,
) -> Path:
    """The dashboard of a finished sweep directory: the verdict and upgrade A/B given, else as the sweep
    wrote them (a sweep without verdict.json gets one by its own verdict settings, written)."""
    if verdict is None:
        verdict = read_verdict(sweep_dir) or write_verdict(
            sweep_dir, df, plan, _base_config(sweep_dir).verdict
        )
    upgrade = upgrade if upgrade is not None else read_upgrade(sweep_dir)
    return write_dashboard(sweep_dir, df, verdict, plan, upgrade, **kw)


def report(args: list[str]) -> int:
    """(Re)write the dashboard of a sweep directory."""
    sweep_dir = _sweep_dir(args, "report")
    plan = read_plan(sweep_dir)
    df = gather_table(sweep_dir, plan)
    if df.empty:
        raise ConfigError(f"{sweep_dir} has no results yet")
    print(f"dashboard: {_dashboard(sweep_dir, df, plan)}")
    return 0


def compare(args: list[str]) -> int:
    """Regressions of a candidate sweep against a baseline; exit 1 if any.

    Prints the findings, saves compare.csv and a section of the candidate's dashboard. With one
    directory swept over env.python: the upgrade A/B (upgrade.json), exit 1 if a model breaks or
    slows down."""
    paths = [a for a in args if "=" not in a]
    overrides = [a for a in args if "=" in a]
    if len(paths) == 1:
        return upgrade(paths, overrides)
    if len(paths) != 2:
        raise ConfigError(
            "compare needs two sweep directories (python -m orchestrator compare BASE CAND), or one "
            "swept over env.python (the upgrade A/B)"
        )
    base_dir, cand_dir = _sweep_dir(paths[:1], "compare"), _sweep_dir(paths[1:], "compare")
    if base_dir == cand_dir:
        raise ConfigError(f"compare: BASE and CAND are the same directory ({base_dir}); give two sweeps")
    thresholds = _base_config(cand_dir, overrides).compare
    cand_plan = read_plan(cand_dir)
    base, cand = gather_table(base_dir, read_plan(base_dir)), gather_table(cand_dir, cand_plan)
    common = set(base.get(COL.job_id, [])) & set(cand.get(COL.job_id, []))
    if not common:
        raise ConfigError(
            f"compare: {base_dir} and {cand_dir} have no job in common (jobs match by config); "
            "nothing to compare"
        )
    findings = compare_tables(base, cand, thresholds, paired_timings(base), paired_timings(cand))
    findings.to_csv(cand_dir / "compare.csv", index=False)
    _dashboard(cand_dir, cand, cand_plan, compare=findings)
    console = make_console()
    title = f"compare {cand_dir.name} against {base_dir.name}: {len(common)} job(s) matched"
    rows = findings_cells(findings)
    if not console.is_terminal:  # CI logs: plain lines, at most PLAIN_WIDTH wide
        for line in [title, *plain_table([(c, c) for c in findings.columns], rows)]:
            console.print(line, markup=False)
    else:
        table = Table(title=title)
        for col in findings.columns:
            table.add_column(col)
        for cells, regression in zip(rows, findings["regression"], strict=True):
            table.add_row(*cells, style="red" if regression else None)
        console.print(table)
    n = int(findings["regression"].sum()) if len(findings) else 0
    changed = set(findings[COL.job_id]) if len(findings) else set()
    console.print(f"{len(common - changed)} of {len(common)} matched job(s) unchanged")
    console.print(f"[red]{n} regression(s)[/red]" if n else "[green]no regressions[/green]")
    return 1 if n else 0


def upgrade(paths: list[str], overrides: list[str]) -> int:
    """The upgrade A/B of one sweep over `env.python`; exit 1 if any model breaks or slows down."""
    sweep_dir = _sweep_dir(paths, "compare")
    plan = read_plan(sweep_dir)
    df = gather_table(sweep_dir, plan)
    found = (
        write_upgrade(sweep_dir, df, plan, _base_config(sweep_dir, overrides).compare) if len(df) else None
    )
    if found is None:
        raise ConfigError(
            f"compare: {sweep_dir} has one environment; give two sweep directories, or sweep "
            "env.python=/a/bin/python,/b/bin/python"
        )
    _dashboard(sweep_dir, df, plan, upgrade=found)
    print_upgrade(found, make_console())
    words = [v.verdict for comp in found.comparisons for v in comp.models]
    return 1 if {"breaks", "slower"} & set(words) else 0


def verdict(args: list[str]) -> int:
    """The verdict again, for another run (verdict.steps=N, verdict.serve_s=S, verdict.cache=warm).

    Nothing is re-measured: the verdict is recomputed from the sweep's results, printed, and
    written to verdict.json and the dashboard."""
    overrides = [a for a in args if "=" in a]
    bad = [o for o in overrides if not o.startswith("verdict.")]
    if bad:
        raise ConfigError(f"verdict takes verdict.KEY=VALUE overrides only, not {bad[0]}")
    sweep_dir = _sweep_dir([a for a in args if "=" not in a], "verdict")
    # The sweep's own verdict settings, then the overrides; the schema check names a bad key.
    sweep = OmegaConf.to_container(OmegaConf.structured(_base_config(sweep_dir)))
    merged = OmegaConf.merge(sweep, OmegaConf.from_dotlist(overrides))
    vc = to_job_config(OmegaConf.to_container(merged)).verdict  # type: ignore[arg-type]
    plan = read_plan(sweep_dir)
    df = gather_table(sweep_dir, plan)
    if df.empty:
        raise ConfigError(f"{sweep_dir} has no results yet")
    console = make_console()
    found = write_verdict(sweep_dir, df, plan, vc)
    print_verdict(found, console)
    console.print(f"verdict: {sweep_dir / VERDICT_FILE}")
    console.print(f"dashboard: {_dashboard(sweep_dir, df, plan, found)}")
    return 0
