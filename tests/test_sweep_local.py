"""The local executor path end to end: the CLI, submitit subprocesses, real compiles, the table."""

from __future__ import annotations

import csv

from conftest import TESTS, by_label, results, run_cli


def test_smoke_sweep_table_and_skip_on_rerun(tmp_path, fast):
    args = ["+sweep=smoke", *fast, "sweep.report=false"]
    first = run_cli(args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    sweep_dir = tmp_path / "sweeps" / "smoke"
    found = results(sweep_dir)
    assert len(found) == 4 and all(r["status"] == "ok" for r in found.values())
    rows = list(csv.DictReader((sweep_dir / "results.csv").open()))
    assert {(r["mode"], r["task"]) for r in rows} == {
        (m, t) for m in ("eager", "default") for t in ("infer", "train")
    }
    for r in found.values():
        assert r["eager_ms"] > 0 and r["compiled_ms"] > 0 and r["speedup"] > 0
        assert r["log_stdout"].startswith(str(sweep_dir / "logs"))
    # the printed table carries the figures
    for header in ("compile s", "eager ms", "compiled ms", "speedup", "parity", "status"):
        assert header in first.stdout
    assert f"results: {sweep_dir / 'results.csv'}" in first.stdout

    stamps = {p: p.stat().st_mtime_ns for p in sweep_dir.glob("jobs/*/result.json")}
    again = run_cli(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "4 job(s), 4 already finished (skipped)" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in sweep_dir.glob("jobs/*/result.json")} == stamps

    wider = run_cli([*args, "compile.mode=eager,default,max-autotune"], cwd=tmp_path)
    assert wider.returncode == 0, wider.stderr
    assert "6 job(s), 4 already finished (skipped)" in wider.stdout
    assert len(results(sweep_dir)) == 6


def test_cold_compile_is_slower_than_warm(tmp_path, fast):
    cache = tmp_path / "shared-cache"
    common = ["workload=block", *fast, f"compile.cache_dir={cache}", "sweep.report=false"]
    prime = run_cli([*common, "sweep.dir=prime"], cwd=tmp_path)  # fills the shared cache
    assert prime.returncode == 0, prime.stderr
    both = run_cli([*common, "compile.cache=cold,warm", "sweep.dir=both"], cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    r = by_label(tmp_path / "both")
    cold, warm = r["compile.cache=cold"], r["compile.cache=warm"]
    assert cold["compile_s"] > 2 * warm["compile_s"], (cold["compile_s"], warm["compile_s"])
    assert not list((tmp_path / "both" / "jobs").glob("*/inductor-cold-*")), "cold caches are removed"


def test_user_defined_module_by_config_alone(tmp_path, fast):
    (tmp_path / "my_models.py").write_text(
        "import torch\n"
        "class TwoLayer(torch.nn.Module):\n"
        "    def __init__(self, dim=16):\n"
        "        super().__init__()\n"
        "        self.a, self.b = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)\n"
        "    def forward(self, x):\n"
        "        return self.b(torch.relu(self.a(x)))\n"
    )
    proc = run_cli(
        [
            "workload=module",
            "workload.path=.",
            "workload.target=my_models:TwoLayer",
            "workload.init_args={dim: 24}",
            "workload.inputs=[[6,24]]",
            "bench.task=infer,train",
            *fast,
            "sweep.report=false",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = list(results(tmp_path / "sweeps" / "default").values())
    assert len(found) == 2 and all(r["status"] == "ok" and r["graphs"] == 1 for r in found)
    assert {r["size"] for r in found} == {"my_models:TwoLayer"}
    assert found[0]["params"] == 2 * (24 * 24 + 24)


def test_debug_executor_runs_in_process(tmp_path, fast):
    proc = run_cli(
        ["launcher=debug", "workload=block", "bench.task=infer", *fast, "sweep.report=false"], cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = results(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "ok" and r["graphs"] == 1
    assert "log_stdout" not in r, "no submitit subprocess, so no job log"


def test_failed_job_sets_exit_code_and_keeps_the_rest(tmp_path, fast):
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,32]]",
            "workload.target=user_models:MLP,user_models:Raises",
            *fast,
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    r = by_label(tmp_path / "sweeps" / "default")
    assert r["workload.target=user_models:MLP"]["status"] == "ok"
    bad = r["workload.target=user_models:Raises"]
    assert bad["status"] == "crash" and "planted failure in forward" in bad["error"]
    assert (tmp_path / "sweeps" / "default" / "dashboard.html").exists(), "the report is still written"
    assert "1 of 2 job(s) failed" in proc.stdout
