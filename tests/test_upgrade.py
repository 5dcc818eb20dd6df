"""The upgrade A/B: one sweep over two real interpreters with different torch builds (this venv's
torch 2.13.0 CPU wheel and torch 2.14.1 in a second venv, which pip takes from this machine's disk),
read as the change from the first to the second; a bare interpreter fails its jobs in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pandas as pd
import pytest
from conftest import by_label, run_cli

from orchestrator.analysis.answers import FigureChange, UpgradePair
from orchestrator.analysis.upgrade import model_word, pairs
from orchestrator.config.plan import build_plan
from orchestrator.config.schema import MEASURED_SECTIONS, CompareConfig

SECOND_TORCH = "torch==2.14.1"
# What a measuring process imports besides the orchestrator's own code (job/, config/spec, core/).
WORKER_NEEDS = ["numpy", "pandas", "omegaconf==2.3.1", "submitit==1.5.4"]


def _has_torch(python: Path) -> bool:
    probe = [str(python), "-c", "import torch, omegaconf, submitit, pandas; print(torch.__version__)"]
    return python.exists() and subprocess.run(probe, capture_output=True, timeout=300).returncode == 0


@pytest.fixture(scope="session")
def second_torch() -> Path:
    """A venv with torch 2.14.1 and what the worker needs: built once per machine (a few minutes,
    most of it unpacking torch), kept under ~/.cache for later runs."""
    root = Path.home() / ".cache" / "orchestrator-tests" / "venv-torch-2.14.1"
    python = root / "bin" / "python"
    if not _has_torch(python):
        venv.create(root, with_pip=True, clear=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, SECOND_TORCH, *WORKER_NEEDS], check=True, timeout=1500)
    return python


def test_two_torch_builds_in_one_sweep_read_as_an_upgrade(tmp_path, second_torch, fast):
    proc = run_cli(
        [
            f"env.python={sys.executable},{second_torch}",
            "compile.mode=eager,default",
            "bench.task=infer",
            *fast,
            "sweep.name=ab",
        ],
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep = tmp_path / "sweeps" / "ab"
    jobs = by_label(sweep)
    assert len(jobs) == 4 and all(r["status"] == "ok" for r in jobs.values()), jobs
    torch_of = {r["env"]: r["env_torch"] for r in jobs.values()}
    assert torch_of[".venv"].startswith("2.13.0") and torch_of["venv-torch-2.14.1"].startswith("2.14.1")
    assert {r["env_interpreter"] for r in jobs.values()} == {sys.executable, str(second_torch)}
    assert len({r["job_id"] for r in jobs.values()}) == 4, "the environment is part of the job id"

    upgrade = json.loads((sweep / "upgrade.json").read_text())
    assert upgrade["environments"] == [".venv", "venv-torch-2.14.1"], "the axis's first value is the baseline"
    (comp,) = upgrade["comparisons"]
    assert {p["setting"] for p in comp["pairs"]} == {"eager", "default"}
    for p in comp["pairs"]:
        step = p["figures"]["compiled_ms"]
        assert step["ci"] is not None and step["ci"][0] <= step["change"] <= step["ci"][1]
        assert step["judged"] in ("improvement", "regression", "unchanged", "inconclusive")
    (model,) = comp["models"]
    assert model["verdict"] in ("faster", "slower", "breaks", "no measurable change") and model["why"]
    assert (
        "upgrade .venv (torch 2.13.0" in proc.stdout and "-> venv-torch-2.14.1 (torch 2.14.1" in proc.stdout
    )
    assert "Upgrade: .venv -&gt; venv-torch-2.14.1" in (sweep / "dashboard.html").read_text()

    again = run_cli(["compare", str(sweep)], cwd=tmp_path, timeout=300)
    assert again.returncode == (1 if model["verdict"] in ("slower", "breaks") else 0), again.stdout
    assert f"{model['verdict']}: {model['why']}"[:100] in again.stdout


def test_an_interpreter_without_torch_fails_its_jobs_in_one_line(tmp_path, fast):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    proc = run_cli(
        [f"env.python={bare / 'bin' / 'python'}", "bench.task=infer", *fast, "sweep.report=false"],
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (r,) = by_label(tmp_path / "sweeps" / "default").values()
    assert r["status"] == "crash" and "\n" not in r["error"]
    assert "No module named" in r["error"] and f"(env bare: {bare / 'bin' / 'python'})" in r["error"]
    missing = run_cli(["env.python=/no/such/python", "--dry-run"], cwd=tmp_path, timeout=120)
    assert missing.returncode == 2 and "env.python=/no/such/python" in missing.stderr.strip().splitlines()[-1]


def test_job_ids_keep_their_value_without_an_interpreter_and_change_with_one(tmp_path):
    own = build_plan(["compile.mode=default"], cwd=tmp_path).jobs[0]
    other = build_plan(["compile.mode=default", f"env.python={sys.executable}"], cwd=tmp_path).jobs[0]
    renamed = build_plan(
        ["compile.mode=default", f"env.python={sys.executable}", "env.name=mine"], cwd=tmp_path
    ).jobs[0]
    assert own.job_id != other.job_id and other.job_id == renamed.job_id
    assert other.cfg.env.name == ".venv" and renamed.cfg.env.name == "mine" and own.cfg.env.name is None


def _pair(setting: str, change: float, judged: str, breaks: bool = False) -> UpgradePair:
    step = FigureChange(change=change, ci=[change - 0.01, change + 0.01], judged=judged)
    return UpgradePair(
        setting=setting,
        breaks=breaks,
        error="crash: boom" if breaks else None,
        figures={"compiled_ms": step, "eager_ms": FigureChange()},
    )


@pytest.mark.parametrize(
    "pairs, word",
    [
        ([_pair("default", -0.2, "improvement"), _pair("eager", 0.0, "unchanged")], "faster"),
        ([_pair("default", -0.2, "improvement"), _pair("eager", 0.3, "regression")], "slower"),
        ([_pair("default", -0.2, "improvement", breaks=True)], "breaks"),
        ([_pair("default", 0.02, "inconclusive"), _pair("eager", 0.0, "unchanged")], "no measurable change"),
    ],
)
def test_one_word_per_model(pairs, word):
    got, why = model_word(pairs)
    assert got == word and why


def test_a_pair_judges_steps_by_their_repetitions_and_compile_and_memory_by_one_figure_each():
    def row(env: str, python: str, ms: float, cold_s: float) -> dict:
        reps = [ms * (1 + 0.001 * i) for i in range(8)]
        return {
            "job_id": env, "env": env,
            "config": {**dict.fromkeys(MEASURED_SECTIONS, {}), "env": {"python": python}},
            "_model": "gpt tiny", "_setting": "default", "status": "ok", "parity_ok": True,
            "compiled_ms": ms, "eager_ms": 10.0, "speedup": 10.0 / ms, "compile_cold_s": cold_s,
            "compiled_peak_gib": None, "interleaved": True,
            "timings": {"eager_ms": [10.0] * 8, "compiled_ms": reps, "process": [0] * 8},
        }  # fmt: skip

    df = pd.DataFrame([row("a", "/a/python", 5.0, 10.0), row("b", "/b/python", 4.0, 20.0)])
    (pair,) = pairs(df, "a", "b", CompareConfig())
    step, cold = pair.figures["compiled_ms"], pair.figures["compile_cold_s"]
    assert step.ci is not None and step.judged == "improvement" and step.change < -0.15
    assert cold.ci is None and cold.change == pytest.approx(1.0) and cold.judged.startswith("regression")
    assert pair.figures["compiled_peak_gib"].change is None
