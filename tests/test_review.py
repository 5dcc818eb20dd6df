"""Review: wandb offline runs read back, the dashboard in real headless Chromium, the compare."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from browser import CHROME_FLAGS, CHROMIUM, screenshot
from conftest import TESTS, results, run_cli
from wandb_files import read_run


@pytest.fixture(scope="module")
def review_sweep(tmp_path_factory, compile_cache):
    """A real sweep with a clean model, one with graph breaks, one that fails, over a shape schedule."""
    cwd = tmp_path_factory.mktemp("review")
    proc = run_cli(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.inputs=[[4,8,32]]",
            "workload.shapes=[6,10]",
            "bench.task=infer",
            "workload.target=user_models:MLP,user_models:PrintingNet,user_models:Raises",
            "bench.repeats=3",
            "bench.steps_per_repeat=1",
            "bench.warmup=1",
            "logger=none",
            "compile.probes=false",  # the review is of the page and compare, not of compile cost
            "verdict.follow_up=false",  # nor of follow-ups (tests/test_verdict.py runs one)
            "compile.cache=shared",
            f"compile.cache_dir={compile_cache}",
        ],
        cwd=cwd,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the planted failure
    return cwd / "sweeps" / "default"


def test_wandb_offline_runs_hold_config_summary_and_history(tmp_path, fast):
    secret = "wandb-secret-key-0123456789abcdef"
    proc = run_cli(
        [
            "workload=block",
            "compile.mode=eager,default",
            *[a for a in fast if a != "logger=none"],
            "logger=wandb_offline",
            "sweep.name=wb",
            "sweep.report=false",
        ],
        cwd=tmp_path,
        env={"WANDB_API_KEY": secret},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep_dir = tmp_path / "sweeps" / "wb"
    runs = [read_run(p) for p in sorted((sweep_dir / "wandb").glob("offline-run-*/run-*.wandb"))]
    jobs = [r for r in runs if r.job_type == "block"]
    (table_run,) = [r for r in runs if r.job_type == "sweep"]
    assert len(jobs) == 2 and all(r.group == "wb" for r in runs)
    by_id = {r.summary["job_id"]: r for r in jobs}
    for job_id, result in results(sweep_dir).items():
        run = by_id[job_id]
        assert run.config["compile"]["mode"] == result["config"]["compile"]["mode"]
        assert run.config["workload"]["name"] == "block"
        for key in ("speedup", "compile_s", "eager_ms", "compiled_ms", "status"):
            assert run.summary[key] == result[key], key
        timed = [h for h in run.history if "eager_ms" in h]
        assert [h["eager_ms"] for h in timed] == result["timings"]["eager_ms"]
    assert any(h.get("results.nrows") == 2 for h in table_run.history), "the sweep's table as a wandb.Table"
    for path in sweep_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"secret written to {path}"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/system-deps.sh)")
def test_dashboard_renders_in_headless_chromium(review_sweep, tmp_path):
    regen = run_cli(["report", str(review_sweep)], cwd=tmp_path, timeout=120)
    assert regen.returncode == 0 and "dashboard:" in regen.stdout
    url = (review_sweep / "dashboard.html").as_uri()
    dom = subprocess.run(
        [CHROMIUM, *CHROME_FLAGS, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert 'data-ready="true"' in dom, "the page's load handler ran"
    plots = int(dom.split('data-plots="')[1].split('"')[0])
    assert plots >= 5, f"plotly drew {plots} charts"
    errors = dom.split('<div id="js-errors"')[1].split("</div>")[0]
    assert errors.split(">", 1)[1].strip() == "", f"JS errors: {errors}"
    assert dom.count("<tr") >= 4 and "planted failure in forward" in dom
    assert 'id="reasons"' in dom and "user_models.py:" in dom, "graph-break reasons with places"
    assert "Speedup compiled vs eager" in dom and "Recompiles over the shape schedule" in dom

    shot = tmp_path / "dashboard.png"
    assert screenshot(url, shot, tmp_path / "p2", 1280, 2000) == (1280, 2000)
    png = shot.read_bytes()
    assert len(png) > 60_000, "a blank page compresses to a few KB; charts and tables do not"


def _steady(sweep_dir, slower: float = 1.0) -> None:
    """Give the MLP job steady per-repetition timings (eager 10 ms, compiled 5 ms, within 1%), its
    compiled side `slower` times slower: a change judged by its CI must be decided by the change, not
    by the noise a busy host put into three repetitions."""
    for path in (sweep_dir / "jobs").glob("*/result.json"):
        result = json.loads(path.read_text())
        if result["status"] == "ok" and result["label"].endswith("MLP"):
            t = result["timings"]
            n = len(t["compiled_ms"])
            t["eager_ms"] = [10.0 * (1 + 0.01 * (i % 3 - 1)) for i in range(n)]
            t["compiled_ms"] = [5.0 * slower * (1 + 0.01 * ((i + 1) % 3 - 1)) for i in range(n)]
            result.update(eager_ms=10.0, compiled_ms=5.0 * slower, speedup=2.0 / slower)
            path.write_text(json.dumps(result))


def test_compare_catches_a_planted_regression(review_sweep, tmp_path):
    base, candidate = tmp_path / "base", tmp_path / "candidate"
    shutil.copytree(review_sweep, base)
    _steady(base)
    shutil.copytree(base, candidate)
    same = run_cli(["compare", str(base), str(candidate)], cwd=tmp_path, timeout=120)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "no regressions" in same.stdout
    matched = len(list((base / "jobs").glob("*/result.json")))
    assert f"{matched} of {matched} matched job(s) unchanged" in same.stdout, same.stdout
    itself = run_cli(["compare", str(base), str(base)], cwd=tmp_path, timeout=120)
    assert itself.returncode == 2 and "BASE and CAND are the same directory" in itself.stderr

    _steady(candidate, slower=4.0)
    worse = run_cli(["compare", str(base), str(candidate)], cwd=tmp_path, timeout=120)
    assert worse.returncode == 1, worse.stdout
    assert "2 regression(s)" in worse.stdout
    rows = (candidate / "compare.csv").read_text()
    assert "speedup" in rows and "compiled_ms" in rows
    assert "Compare against baseline" in (candidate / "dashboard.html").read_text()

    lenient = run_cli(
        ["compare", str(base), str(candidate), "compare.speedup_drop=0.95", "compare.step_rise=20"],
        cwd=tmp_path,
        timeout=120,
    )
    assert lenient.returncode == 0, lenient.stdout


def test_compare_flags_a_status_flip(review_sweep, tmp_path):
    candidate = tmp_path / "candidate"
    shutil.copytree(review_sweep, candidate)
    for path in (candidate / "jobs").glob("*/result.json"):
        result = json.loads(path.read_text())
        if result["label"].endswith("PrintingNet"):
            result.update(status="parity_fail", parity_ok=False, error="planted parity flip")
            path.write_text(json.dumps(result))
    proc = run_cli(["compare", str(review_sweep), str(candidate)], cwd=tmp_path, timeout=120)
    assert proc.returncode == 1
    assert "status" in proc.stdout and "parity" in proc.stdout
