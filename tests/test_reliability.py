"""Reliability, round 3 (issue 59): what a careful user still broke, each with its own small model
(tests/user_models.py) and a real compile (aot_eager where the test is not about kernels)."""

from __future__ import annotations

import math
import os

import pytest
from conftest import FAST, ROOT, TESTS, by_label, run_cli

from orchestrator.config.plan import build_plan
from orchestrator.core.result import COL
from orchestrator.job.worker import run_job
from orchestrator.launch.checks import check_plan

USER = ["workload=module", f"workload.path={TESTS}", "workload.inputs=[[8,32]]"]
GRAPH_ONLY = ["compile.backend=aot_eager"]  # dynamo and AOT autograd for real, no C++ to build


def measure(tmp_path, compile_cache, *overrides: str) -> dict:
    shared = ["compile.cache=shared", f"compile.cache_dir={compile_cache}"]
    plan = build_plan([*FAST, *shared, *GRAPH_ONLY, *USER, *overrides], cwd=tmp_path)
    check_plan(plan)
    return run_job(plan.jobs[0])


def test_nan_in_eager_itself_is_named_as_eager_s_not_compile_s(tmp_path, compile_cache):
    """A model that is NaN in eager: not a compile failure (`parity_fail: nan > limit nan`), the eager
    control included; the verdict gives no answer and says where eager went non-finite."""
    proc = run_cli(
        [*FAST, *GRAPH_ONLY, *USER, "workload.target=user_models:NaNInEager", "compile.mode=eager,default"],
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    jobs = by_label(tmp_path / "sweeps" / "default")
    assert len(jobs) == 2
    for r in jobs.values():  # the eager control as well: eager against eager is no compile failure
        assert r["status"] == "eager_not_finite", r["error"]
        assert r["error"].startswith("EagerNotFiniteError: eager itself is not finite: loss: NaN, grad net.0")
        assert "nan > limit nan" not in r["error"] and "not compile" in r["error"]
        assert r["parity_eager_not_finite"][0] == "loss: NaN"
        assert r["eager_ms"] > 0, "its timings are kept"
    verdict = next(line for line in proc.stdout.splitlines() if line.startswith("verdict module"))
    assert ": no answer: eager itself is not finite: loss: NaN" in verdict, verdict
    assert "eager:" not in verdict, "eager is not recommended"


def test_a_failing_integer_buffer_is_named_among_the_worst_tensors(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload.target=user_models:CounterMiscompiled", "bench.task=infer")
    assert r["status"] == "parity_fail" and math.isinf(r["parity_err"]), r["error"]
    worst = r["parity_worst"][0]
    assert worst["tensor"] == "buffer steps" and math.isinf(worst["err"]), r["parity_worst"]
    assert "worst tensors: buffer steps inf" in r["error"], r["error"]


def test_a_python_branch_on_a_tensor_value_is_said_in_words_with_its_fixes(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload.target=user_models:BranchesOnValue", "bench.task=infer")
    assert r["status"] == "ok" and r["graph_breaks"] >= 1, r["error"]
    reason = r["break_reasons"][0]["reason"]
    assert reason.startswith("a Python branch on a tensor's value"), reason
    assert "torch.cond" in reason and "torch.where" in reason and "(dynamo: generic_jump" in reason


def test_an_answer_is_said_once_and_never_cut():
    from orchestrator.analysis.answers import ModelVerdict, Verdict
    from orchestrator.analysis.verdict import lines
    from orchestrator.report.verdict_section import answers

    why = "no trustworthy answer: " + " ".join(f"reason{i} of the eager control" for i in range(12))
    why += "; to get one: rerun it alone, and it pays back only after 1234 steps"
    v = ModelVerdict(model="m", choice="no trustworthy answer", outcome="untrusted", why=why)
    page = answers(Verdict(10_000, None, "cold", "", [v]))
    assert page.count("no trustworthy answer") == 1, page
    printed = lines(Verdict(10_000, None, "cold", "", [v]))
    assert all(len(line) <= 160 for line in printed) and not any(line.endswith("...") for line in printed)
    assert " ".join(line.strip() for line in printed[1:]) == f"verdict m: {why}", "wrapped, every word kept"


def _row(**figures: object):
    import pandas as pd

    from orchestrator.core.result import COL

    return pd.Series({getattr(COL, k): v for k, v in figures.items()})


def test_a_profile_unlike_the_timed_step_is_not_quoted_in_milliseconds():
    """A busy host during the profile pass: the compiled step read 402 ms there, 3.10 ms timed."""
    from orchestrator.analysis.causes import cause_line, causes

    row = _row(
        mode="default",
        env_cuda="13.0",
        eager_ms=3.4,
        compiled_ms=3.10,
        eager_profile_step_ms=4.0,
        compiled_profile_step_ms=402.0,
        eager_busy_fraction=0.9,
        compiled_busy_fraction=0.6,
        eager_time_split={"elementwise": 1.2, "matmul": 2.0},
        compiled_time_split={"fused": 216.0, "matmul": 2.0},
    )
    found = causes(row)
    assert not any("216" in c.text or "402 ms of" in c.text for c in found if c.affects != "profile"), found
    note = found[-1]  # last: a note beside the answer's cause, never that cause
    assert note.affects == "profile" and note.lever is None, found
    assert note.text.startswith(
        "the profile pass was not representative (its compiled step read 402 ms against 3.1 ms"
    )
    line = cause_line(found, 1.1, [1.05, 1.15], "compile") or ""
    assert "216" not in line and "not representative" not in line
    row[COL.compiled_profile_step_ms] = 4.5
    assert any("elementwise" in c.text for c in causes(row)), "a representative profile is still read"


def test_no_lever_the_device_ignores_where_a_table_s_cpu_row_reads_nan():
    """A CPU sweep with crashed jobs: the passed row's `env_cuda` reads NaN in the table (other rows lack
    the key), and NaN is truthy: the TF32 lever was planned for a CPU job."""
    from orchestrator.analysis.causes import causes, ran_on_cuda

    row = _row(
        mode="default",
        env_cuda=math.nan,
        compiled_ms=2.0,
        num_matmul_precision="highest",
        graph_fp32_matmuls=4,
        graph_matmuls=4,
    )
    assert not ran_on_cuda(row)
    assert not [c for c in causes(row) if c.lever], "no lever on a CPU"
    row[COL.env_cuda] = "13.0"
    assert any(c.lever == "bench.matmul_precision=high" for c in causes(row)), "on a GPU it is named"


def test_a_zombie_s_private_cache_is_removed(tmp_path):
    """A killed attempt's process that its parent has not reaped (`Z` in /proc) is gone: the cache it
    left is removed before the job runs again, as the orphan stopper already treats it."""
    import socket
    import subprocess
    import sys

    from conftest import wait_until

    from orchestrator.core.files import remove_private_caches

    child = subprocess.Popen([sys.executable, "-c", "pass"])  # not waited for: a zombie once it exits
    try:
        stat = f"/proc/{child.pid}/stat"
        wait_until(lambda: open(stat).read().rsplit(")", 1)[1].split()[0] == "Z", 60, "the child a zombie")
        cache = tmp_path / f"inductor-{socket.gethostname()}-{child.pid}-abc"
        (cache / "fxgraph").mkdir(parents=True)
        mine = tmp_path / f"inductor-{socket.gethostname()}-{os.getpid()}-abc"
        mine.mkdir()
        remove_private_caches(tmp_path)
        assert not cache.exists(), "the zombie's cache is removed"
        assert mine.exists(), "a live process keeps its own"
    finally:
        child.wait()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["workload.target=user_models:DoubleIt"],
            "workload.target=user_models:DoubleIt is a torch.autograd.Function, not an nn.Module; wrap it",
        ),
        (
            ["workload.target=user_models:MLP", "compile.scope=blocks"],
            "compile.scope=blocks needs repeated blocks (a ModuleList or Sequential of one class): "
            "user_models:MLP has none",
        ),
        (
            ["workload.target=user_models:MLP", "parallel=fsdp"],
            "parallel=fsdp needs repeated blocks",
        ),
        (
            ["workload.target=user_models:TakesOneDict", "workload.make_inputs=user_models:one_dict"],
            "workload.inputs and workload.make_inputs are both set",
        ),
    ],
)
def test_late_refusals_now_come_before_anything_runs(tmp_path, overrides, message):
    proc = run_cli([*FAST, *USER, *overrides], cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert not (tmp_path / "sweeps").exists(), "no jobs/ folder made"


def test_a_failure_that_matches_a_known_upstream_bug_points_at_its_repro(tmp_path, compile_cache):
    """The miscompile of a forward that increments and reads a counter buffer, caught by parity; its
    verdict line names the known issue and the standalone repro kept for PyTorch's tracker."""
    import pandas as pd

    from orchestrator.analysis.verdict import compute
    from orchestrator.config.schema import VerdictConfig

    r = measure(tmp_path, compile_cache, "workload.target=user_models:ScalesByItsCounter")
    assert r["status"] == "parity_fail" and r["parity_worst"][0]["tensor"].startswith("grad "), r["error"]
    assert r["parity_buffers_updated"] == ["calls (int64)"]
    plan = {r["job_id"]: {"label": r["label"], "axes": r["axes"]}}
    (v,) = compute(pd.DataFrame([r]), plan, VerdictConfig()).models
    assert "known issue: AOT autograd's gradient of a forward that increments" in v.failed[0], v.failed
    repro = ROOT / "benchmarks" / "upstream" / "counter_buffer_grad.py"
    assert repro.exists() and str(repro.relative_to(ROOT)) in v.failed[0]


def test_timm_s_refusal_names_the_torchvision_matched_to_this_torch(tmp_path):
    """`pip install timm torchvision` installed PyPI's CUDA torchvision, which does not load beside a CPU
    torch; the hint (and scripts/setup.sh) names the torchvision built for this torch, and its index."""
    import importlib.util

    import torch

    if importlib.util.find_spec("timm") is not None:
        pytest.skip("timm is installed here: nothing is refused")
    proc = run_cli(["workload=timm", "workload.model=resnet18", "--dry-run"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    minor = int(torch.__version__.split(".")[1])
    assert f"pip install --no-deps 'torchvision==0.{minor + 15}.*'" in proc.stderr, proc.stderr
    if torch.version.cuda is None:
        assert "--index-url https://download.pytorch.org/whl/cpu" in proc.stderr


def test_a_class_the_preset_cannot_size_is_refused_before_anything_runs(tmp_path, monkeypatch):
    """SigLIP sized as the presets once sized it (each key set after the config was built: its text
    `projection_size` kept 768 beside a hidden size of 64): one forward on the meta device fails with a
    shape error, and the sweep is refused in one line. The old sizing is planted by monkeypatch (today's
    sizes SigLIP right: test_user_breakage.py runs it)."""
    import workloads.hf_config
    from orchestrator.core.failures import ConfigError

    monkeypatch.setattr(workloads.hf_config, "_sized_kwargs", lambda config, size: {})
    plan = build_plan(["workload=hf", "workload.model=SiglipModel", "logger=none"], cwd=tmp_path)
    with pytest.raises(ConfigError) as e:
        check_plan(plan)
    said = str(e.value)
    assert said.startswith("workload.size=tiny cannot size SiglipModel: a forward fails") and "\n" not in said
    assert not (tmp_path / "sweeps").exists()
