"""One sweep from the command line: plan, check, launch, the follow-ups' rounds, gather, report.
The sweep's one path from the command line to its table, in order."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from omegaconf import OmegaConf
from rich.console import Console

from orchestrator.analysis.answers import Verdict
from orchestrator.analysis.follow_up import follow_up_specs
from orchestrator.analysis.upgrade import print_upgrade, write_upgrade
from orchestrator.analysis.verdict import compute as compute_verdict
from orchestrator.analysis.verdict import print_verdict, write_verdict
from orchestrator.cli.console import make_console
from orchestrator.config.plan import Plan, PlannedJob, build_plan
from orchestrator.config.schema import Config
from orchestrator.config.spec import JobSpec
from orchestrator.core.env_scope import scoped_environ
from orchestrator.core.failures import ConfigError
from orchestrator.core.files import PLAN_FILE, write_json_atomic
from orchestrator.core.result import COL
from orchestrator.job.processes import fork_server
from orchestrator.job.processes.supervisor import PYTHON
from orchestrator.job.setup.tracking import log_sweep
from orchestrator.launch.checks import check_plan, check_sweep_dir
from orchestrator.launch.launcher import uses_cuda
from orchestrator.launch.launchers import launcher_class
from orchestrator.launch.ledger import read_ledger
from orchestrator.launch.runner import Runner
from orchestrator.report.dashboard import write_dashboard
from orchestrator.results.table import Sweep, write_table
from orchestrator.results.text import print_table
from orchestrator.results.time_spent import time_line

LOCK_FILE = "orchestrator.lock"
ATTACHED = "the same command with sweep.detach=false runs them (finished jobs are skipped)"


def take_lock(sweep_dir: Path) -> TextIO:
    """One orchestrator per sweep directory: an OS lock (flock), held while the returned file is open.

    The kernel drops it when the holder dies, however it dies, so there is no stale lock to judge.
    The file is never removed: removing it while another process waits on it would let a third
    lock a new file of the same name beside the first (the flock/unlink race).
    """
    lock = (sweep_dir / LOCK_FILE).open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        raise ConfigError(f"sweep.dir={sweep_dir} is in use by another orchestrator (pid {holder})") from None
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def print_plan(plan: Plan, console: Console) -> None:
    console.print(f"sweep [bold]{plan.name}[/bold]: {len(plan.jobs)} job(s) in {plan.sweep_dir}")
    sweep = Sweep(plan.sweep_dir, {})
    for job in plan.jobs:
        done = sweep.result(job.job_id)
        state = f" (finished: {done.outcome.status})" if done else ""
        console.print(f"  {job.job_id}  {job.label}{state}")
    if plan.base.verdict.follow_up and plan.base.verdict.max_follow_ups:
        console.print(
            f"follow-ups may be added: up to {plan.base.verdict.max_follow_ups} steps per model whose "
            "verdict names a measured cause with a remedy, each stacking the next cause's lever on what "
            "gained (verdict.max_follow_ups=N; verdict.follow_up=false: none)"
        )


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM (a scheduler, `kill`) takes the Ctrl-C path for the scope: cancel running jobs, keep
    finished ones. The handlers that were there before are restored on the way out."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for s in saved:
        signal.signal(s, _interrupt)
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM or SIGINT: one KeyboardInterrupt, raised once. Later signals are ignored while the
    running jobs are cancelled, so none lands inside cleanup code (a traceback from a destructor)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def run_sweep(overrides: list[str], multirun: bool = False, dry_run: bool = False) -> int:
    """The sweep of Hydra `overrides`, as the parsed flags say: `multirun` (-m) is accepted, not
    needed; `dry_run` plans and prints, and runs nothing (the same as `sweep.dry_run=true`)."""
    console = make_console()
    if multirun:
        console.print("[yellow]note: -m is not needed; comma lists and +sweep=NAME already sweep[/yellow]")
    args = [*overrides, "sweep.dry_run=true"] if dry_run else list(overrides)
    started = time.time()
    plan = build_plan(args)
    check_plan(plan)
    if plan.base.sweep.dry_run:
        print_plan(plan, console)
        launcher = launcher_class(plan.base.launcher.name)(plan.base, plan.sweep_dir)
        text = launcher.dry_run_text(plan.jobs[0]) if plan.jobs else None
        if text:
            print(text)
        return 0
    check_sweep_dir(plan.sweep_dir)
    with take_lock(plan.sweep_dir), stop_on_signals():
        return _run(plan, console, started)


def to_run(specs: list[JobSpec], rerun_failed: bool, sweep: Sweep) -> list[JobSpec]:
    """Each job's folder and config.yaml written; the jobs without a result (or, with
    `sweep.rerun_failed`, without an ok one) returned, to run."""
    todo = []
    for spec in specs:
        spec.job_dir.mkdir(parents=True, exist_ok=True)
        (spec.job_dir / "config.yaml").write_text(OmegaConf.to_yaml(spec.config))
        done = sweep.result(spec.job_id)
        if done is None or (rerun_failed and done.outcome.status != "ok"):
            sweep.forget(spec.job_id)  # to be run again: its result comes from the runner
            todo.append(spec)
    return todo


@contextlib.contextmanager
def forks_for_the_jobs(base: Config, todo: list[JobSpec]) -> Iterator[None]:
    """The local launcher's jobs start their processes as forks of one fork server for the scope
    (`launcher.fork_server`), which has loaded the sweep's transformers model classes too, or as
    interpreters it started ahead (`launcher.start_ahead`); the variable that names it is set for
    the scope only, as submitit's local jobs inherit it. None where it would not pay: it imports
    once what each process would (5 s on 2 cores), so from the second process on (a second job,
    or a job's compile probes)."""
    own = [job.cfg for job in todo if job.cfg.env.python is None]  # another interpreter: no fork
    forks = base.launcher.fork_server
    if forks is None:  # CPU jobs only: see LauncherConfig.fork_server
        forks = not any(uses_cuda(cfg) for cfg in own)
    ahead = not forks and base.launcher.start_ahead
    probes = any(cfg.compile.probes and cfg.compile.mode != "eager" for cfg in own)
    if base.launcher.name != "local" or not (forks or ahead) or not (len(own) > 1 or probes):
        yield
        return
    hf = sorted({cfg.workload.model for cfg in own if cfg.workload.name == "hf" and cfg.workload.model})
    extra = ("transformers.modeling_utils", *(f"transformers:{model}" for model in hf)) if hf else ()
    with fork_server.serving(PYTHON, extra, ahead) as env, scoped_environ(env):
        yield


def _run(plan: Plan, console: Console, started: float) -> int:
    base: Config = plan.base
    earlier = launcher_class(read_ledger(plan.sweep_dir)["launcher"])  # what ran here last
    orphans = earlier.stop_orphans(plan.sweep_dir)
    if orphans:
        console.print(
            f"[yellow]stopped {orphans} job(s) left running by an earlier, killed orchestrator[/yellow]"
        )
    jobs: dict[str, PlannedJob] = {j.job_id: {"label": j.label, "axes": j.axes} for j in plan.jobs}
    write_json_atomic(plan.sweep_dir / PLAN_FILE, {"name": plan.name, "jobs": jobs})
    sweep = Sweep(plan.sweep_dir, jobs)
    todo = to_run(plan.jobs, base.sweep.rerun_failed, sweep)
    skipped = len(plan.jobs) - len(todo)
    console.print(
        f"sweep [bold]{plan.name}[/bold]: {len(plan.jobs)} job(s), {skipped} already finished (skipped), "
        f"launcher={base.launcher.name}, dir {plan.sweep_dir}"
    )
    runner = Runner(base, plan.sweep_dir, console)
    if base.sweep.detach:
        runner.submit_array(todo)
        console.print(f"submitted {len(todo)} job(s); later: python -m orchestrator status {plan.sweep_dir}")
        if base.verdict.follow_up:  # they need the verdict, which needs the results
            console.print(f"follow-ups are not run by a detached submit: after its jobs, {ATTACHED}")
        return 0
    verdict = None
    with forks_for_the_jobs(base, todo):
        run(runner, todo, sweep)
        if base.verdict.follow_up and base.verdict.max_follow_ups:
            verdict = run_follow_ups(plan, sweep, runner, console)
    if not console.is_terminal:
        console.line()  # rich's Live ends its last status line without a newline off a terminal
    return finish(sweep, base, console, set(sweep.plan), started, verdict)


def run(runner: Runner, todo: list[JobSpec], sweep: Sweep) -> None:
    """Run the jobs; each one's result, read by the runner as it ended, handed to the sweep."""
    runner.run(todo)
    for spec in todo:
        if spec.job_id in runner.results:
            sweep.add(spec.job_id, runner.results[spec.job_id])


def run_follow_ups(plan: Plan, sweep: Sweep, runner: Runner, console: Console) -> Verdict | None:
    """The follow-up steps the sweep's verdict asks for (analysis/follow_up.py), run round by round
    (each model's next step needs its last one's result), their plan entries added to `sweep.plan`.
    Returns the verdict of the last round where it planned nothing: that of the finished sweep (None
    where the last round ran jobs)."""
    vc = plan.base.verdict
    jobs = dict(sweep.plan)
    added: dict[str, PlannedJob] = {}
    for step in range(1, vc.max_follow_ups + 1):
        wanted = {**jobs, **added}
        df = sweep.frame(set(wanted))
        if df.empty:
            return None
        verdict = compute_verdict(df, wanted, vc)
        specs = follow_up_specs(verdict, df, str(plan.sweep_dir), vc.max_follow_ups)
        specs = [s for s in specs if s.job_id not in added]
        if not specs:
            return verdict
        added |= {
            s.job_id: {"label": s.label, "axes": s.axes, "follow_up_of": s.follow_up_of, "lever": s.lever}
            for s in specs
        }
        sweep.plan.update(added)
        write_json_atomic(plan.sweep_dir / PLAN_FILE, {"name": plan.name, "jobs": sweep.plan})
        todo = to_run(specs, plan.base.sweep.rerun_failed, sweep)
        if not console.is_terminal:
            console.line()  # the runner's last status line ends without a newline off a terminal
        levers = "; ".join(f"{s.lever} for {s.follow_up_of}" for s in specs)
        done = len(specs) - len(todo)
        console.print(f"follow-up step {step}: {len(specs)} job(s), {done} already finished: {levers}")
        run(runner, todo, sweep)
    return None


def finish(
    sweep: Sweep,
    base: Config,
    console: Console,
    wanted: set[str] | None = None,
    started: float | None = None,
    verdict: Verdict | None = None,
) -> int:
    """Print and write the table, the verdict and the dashboard from the sweep as read once; exit code
    1 if any job failed. `wanted`: the jobs of this sweep's plan (others in the folder left out);
    `started`: when this sweep was planned (its time spent is printed for the jobs it ran);
    `verdict`: the one the follow-ups computed over these same results, else computed here."""
    sweep_dir, plan = sweep.dir, sweep.plan
    df = sweep.frame(wanted)
    if df.empty:
        console.print("no results")
        return 1
    csv = write_table(sweep_dir, df)
    print_table(df, f"sweep {base.sweep.name}", console, plan)
    console.print(f"results: {csv}")
    if started is not None and (spent := time_line(df, time.time() - started, started)):
        console.print(spent, markup=False, highlight=False)
    verdict = write_verdict(sweep_dir, df, plan, base.verdict, verdict)
    print_verdict(verdict, console)
    upgrade = write_upgrade(sweep_dir, df, plan, base.compare)  # a sweep over env.python; else None
    print_upgrade(upgrade, console)
    if base.sweep.report:
        console.print(f"dashboard: {write_dashboard(sweep_dir, df, verdict, plan, upgrade)}")
    if base.logger.mode != "disabled":
        log_sweep(sweep_dir, base.sweep.name, df, base.logger.mode, base.logger.project, base.logger.entity)
        console.print(f"wandb ({base.logger.mode}): {sweep_dir / 'wandb'}")
    failed = int((df[COL.status] != "ok").sum())
    if failed:
        console.print(f"[red]{failed} of {len(df)} job(s) failed[/red]")
    (sweep_dir / "summary.json").write_text(json.dumps({"jobs": len(df), "failed": failed}))
    return 1 if failed else 0
