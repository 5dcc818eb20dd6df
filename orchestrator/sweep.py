"""One sweep from the command line: plan, check, launch, gather, report."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import torch
from omegaconf import OmegaConf
from rich.console import Console

from orchestrator.config import Config, ConfigError
from orchestrator.console import make_console
from orchestrator.launch import Runner, kill_orphans, uses_cuda
from orchestrator.plan import Plan, build_plan
from orchestrator.results import (
    PLAN_FILE,
    gather,
    print_table,
    read_plan,
    read_result,
    write_json_atomic,
    write_table,
)

LOCK_FILE = "orchestrator.lock"
MULTIRUN_FLAGS = ("-m", "--multirun")


def check_plan(plan: Plan) -> None:
    """What composition cannot know: this machine, the launcher, the user's imports."""
    from workloads import import_target

    launcher = plan.base.launcher.name
    gpus = torch.cuda.device_count()
    targets: set[tuple[str, str | None]] = set()
    for job in plan.jobs:
        cfg = job.cfg
        world = cfg.parallel.world_size
        if launcher == "debug" and world > 1:
            raise ConfigError(
                f"parallel.strategy={cfg.parallel.strategy} needs launcher=local or slurm (debug: in-process)"
            )
        if cfg.bench.device == "cuda" and not gpus and launcher != "slurm":
            raise ConfigError(
                "bench.device=cuda but this machine has no GPU; choose bench.device=cpu or auto"
            )
        if launcher == "local" and uses_cuda(cfg) and world > gpus:
            raise ConfigError(
                f"parallel.ranks_per_node={cfg.parallel.ranks_per_node} needs {world} GPUs; this machine has "
                f"{gpus}"
            )
        if cfg.workload.name == "module":
            targets.add((cfg.workload.target or "", cfg.workload.path))
        if ":" in cfg.compile.backend:
            targets.add((cfg.compile.backend, cfg.workload.path))
    for target, path in targets:
        import_target(target, path)
    if plan.base.sweep.detach and launcher != "slurm":
        raise ConfigError(f"sweep.detach=true needs launcher=slurm (got launcher={launcher})")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def take_lock(sweep_dir: Path) -> Path:
    """One orchestrator per sweep directory; a stale lock (dead pid) is taken over."""
    lock = sweep_dir / LOCK_FILE
    text = lock.read_text().strip() if lock.exists() else ""
    pid = int(text) if text.isdigit() else 0
    if pid and pid != os.getpid() and _alive(pid):
        raise ConfigError(f"sweep.dir={sweep_dir} is in use by another orchestrator (pid {pid})")
    lock.write_text(str(os.getpid()))  # absent or stale (that orchestrator is gone): take it
    return lock


def print_plan(plan: Plan, console: Console) -> None:
    console.print(f"sweep [bold]{plan.name}[/bold]: {len(plan.jobs)} job(s) in {plan.sweep_dir}")
    for job in plan.jobs:
        done = read_result(job.job_dir)
        state = f" (finished: {done['status']})" if done else ""
        console.print(f"  {job.job_id}  {job.label}{state}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_sweep(args: list[str]) -> int:
    console = make_console()
    if any(a in MULTIRUN_FLAGS for a in args):
        console.print("[yellow]note: -m is not needed; comma lists and +sweep=NAME already sweep[/yellow]")
        args = [a for a in args if a not in MULTIRUN_FLAGS]
    if "--dry-run" in args:
        args = [a for a in args if a != "--dry-run"] + ["sweep.dry_run=true"]
    plan = build_plan(args)
    check_plan(plan)
    if plan.base.sweep.dry_run:
        print_plan(plan, console)
        if plan.base.launcher.name == "slurm" and plan.jobs:
            from orchestrator.launch import sbatch_script

            console.print(f"sbatch script of {plan.jobs[0].job_id}:", highlight=False)
            print(sbatch_script(plan.jobs[0], plan.base, plan.sweep_dir))
        return 0
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = take_lock(plan.sweep_dir)
    # SIGTERM (a scheduler, `kill`) takes the Ctrl-C path: cancel running jobs, keep finished ones.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(plan, console)
    finally:
        lock.unlink(missing_ok=True)


def _run(plan: Plan, console: Console) -> int:
    base: Config = plan.base
    orphans = kill_orphans(plan.sweep_dir)
    if orphans:
        console.print(
            f"[yellow]stopped {orphans} job(s) left running by an earlier, killed orchestrator[/yellow]"
        )
    write_json_atomic(
        plan.sweep_dir / PLAN_FILE,
        {"name": plan.name, "jobs": {j.job_id: {"label": j.label, "axes": j.axes} for j in plan.jobs}},
    )
    todo = []
    for job in plan.jobs:
        job.job_dir.mkdir(parents=True, exist_ok=True)
        (job.job_dir / "config.yaml").write_text(OmegaConf.to_yaml(job.config))
        done = read_result(job.job_dir)
        if done is None or (base.sweep.rerun_failed and done["status"] != "ok"):
            todo.append(job)
    skipped = len(plan.jobs) - len(todo)
    console.print(
        f"sweep [bold]{plan.name}[/bold]: {len(plan.jobs)} job(s), {skipped} already finished (skipped), "
        f"launcher={base.launcher.name}, dir {plan.sweep_dir}"
    )
    runner = Runner(base, plan.sweep_dir, console)
    if base.sweep.detach:
        runner.submit_array(todo)
        console.print(f"submitted {len(todo)} job(s); later: python -m orchestrator status {plan.sweep_dir}")
        return 0
    runner.run(todo)
    if not console.is_terminal:
        console.line()  # rich's Live ends its last status line without a newline off a terminal
    return finish(plan.sweep_dir, base, console, wanted={j.job_id for j in plan.jobs})


def finish(sweep_dir: Path, base: Config, console: Console, wanted: set[str] | None = None) -> int:
    """Gather, print, write the table and the dashboard; exit code 1 if any job failed."""
    df = gather(sweep_dir)
    if wanted is not None and not df.empty:
        df = df[df["job_id"].isin(wanted)]
    if df.empty:
        console.print("no results")
        return 1
    csv = write_table(sweep_dir, df)
    print_table(df, f"sweep {base.sweep.name}", console, read_plan(sweep_dir))
    console.print(f"results: {csv}")
    if base.sweep.report:
        from orchestrator.report import write_dashboard

        console.print(f"dashboard: {write_dashboard(sweep_dir, df)}")
    if base.logger.mode != "disabled":
        from orchestrator.tracking import log_sweep

        log_sweep(sweep_dir, base.sweep.name, df, base.logger.mode, base.logger.project, base.logger.entity)
        console.print(f"wandb ({base.logger.mode}): {sweep_dir / 'wandb'}")
    failed = int((df["status"] != "ok").sum())
    if failed:
        console.print(f"[red]{failed} of {len(df)} job(s) failed[/red]")
    (sweep_dir / "summary.json").write_text(json.dumps({"jobs": len(df), "failed": failed}))
    return 1 if failed else 0
