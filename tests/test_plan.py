"""Sweep expansion, job ids, the plan preview."""

from __future__ import annotations

from conftest import run_cli

from orchestrator.config.plan import build_plan


def test_preset_expands_to_its_axes(tmp_path):
    plan = build_plan(["+sweep=modes"], cwd=tmp_path)
    assert [j.axes["compile.mode"] for j in plan.jobs] == [
        "eager",
        "default",
        "reduce-overhead",
        "max-autotune",
        "max-autotune-no-cudagraphs",
    ]
    assert plan.sweep_dir == tmp_path / "sweeps" / "modes"
    assert plan.name == "modes"


def test_cli_comma_lists_multiply_with_the_preset(tmp_path):
    plan = build_plan(["+sweep=modes", "workload.size=tiny,small", "bench.task=train,infer"], cwd=tmp_path)
    assert len(plan.jobs) == 5 * 2 * 2
    combos = {(j.axes["compile.mode"], j.axes["workload.size"], j.axes["bench.task"]) for j in plan.jobs}
    assert len(combos) == 20


def test_cli_value_replaces_a_preset_axis(tmp_path):
    plan = build_plan(["+sweep=modes", "compile.mode=default,eager"], cwd=tmp_path)
    assert sorted(j.cfg.compile.mode for j in plan.jobs) == ["default", "eager"]
    plan = build_plan(["+sweep=modes", "compile.mode=default"], cwd=tmp_path)
    assert [j.cfg.compile.mode for j in plan.jobs] == ["default"]


def test_plain_run_is_one_job(tmp_path):
    plan = build_plan(["compile.mode=eager"], cwd=tmp_path)
    assert len(plan.jobs) == 1 and plan.jobs[0].cfg.compile.mode == "eager"


def test_job_ids_are_stable_and_distinct(tmp_path):
    a = build_plan(["+sweep=dynamic"], cwd=tmp_path)
    b = build_plan(
        ["+sweep=dynamic", "sweep.dir=elsewhere", "logger=none", "bench.timeout_s=5"], cwd=tmp_path
    )
    ids_a = [j.job_id for j in a.jobs]
    assert ids_a == [j.job_id for j in b.jobs], "ids must not depend on where or how the sweep is launched"
    assert len(set(ids_a)) == 3
    c = build_plan(["+sweep=dynamic", "bench.repeats=11"], cwd=tmp_path)
    assert not set(ids_a) & {j.job_id for j in c.jobs}, "a measured setting must change the id"
    # a later key (bench.sync_each_step): left at its default, the ids stay those of earlier sweeps
    d = build_plan(["+sweep=dynamic", "bench.sync_each_step=true"], cwd=tmp_path)
    assert not set(ids_a) & {j.job_id for j in d.jobs} and d.jobs[0].config["bench"]["sync_each_step"] is True


def test_duplicate_points_run_once(tmp_path):
    plan = build_plan(["compile.mode=default,default"], cwd=tmp_path)
    assert len(plan.jobs) == 1


def test_dry_run_prints_jobs_without_running(tmp_path):
    proc = run_cli(["+sweep=modes", "workload.size=tiny,small", "--dry-run"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "sweep modes: 10 job(s)" in proc.stdout
    assert "compile.mode=max-autotune-no-cudagraphs workload.size=small" in proc.stdout
    assert not (tmp_path / "sweeps").exists()


def test_multirun_flag_is_accepted_with_a_note(tmp_path):
    proc = run_cli(["-m", "compile.mode=eager,default", "sweep.dry_run=true"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "-m is not needed" in proc.stdout and "2 job(s)" in proc.stdout
