"""The verdict and the suite summary: planted sweeps (result files with the real schema, copied from a
real job's result.json) where the verdict must pick eager, pick a mode, or find no measurable gain;
then a real tiny sweep that prints it, writes verdict.json and shows it on the dashboard."""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import time

import pandas as pd
import pytest
import torch
from conftest import FAST, TESTS, results, run_cli

from orchestrator.analysis.answers import Verdict
from orchestrator.analysis.causes import causes
from orchestrator.analysis.verdict import compute, lines
from orchestrator.config.schema import VerdictConfig
from orchestrator.core.files import PLAN_FILE, RESULT_FILE, read_plan, write_json_atomic
from orchestrator.core.stats import geomean_ci
from orchestrator.results.table import gather


@pytest.fixture(scope="module")
def template(initargs_sweep) -> dict:
    """A real compiled job's result, emptied of the figures the plants set."""
    real = next(r for r in results(initargs_sweep).values() if r["mode"] == "default")
    drop = ("graph_breaks", "dyn_recompiles", "dyn_compile_s", "memory_ratio", "compile_warm_s")
    clean = {k: v for k, v in real.items() if k not in drop}
    return clean | {"iso_ok": True, "iso_note": None}  # whatever the host was doing when it ran


def plant(sweep_dir, template: dict, jobs: list[dict]) -> None:
    """One result file per planted job (mode and size are its axes); a training GPT row each."""
    plan = {}
    for job in jobs:
        axes = {"compile.mode": job["mode"], "workload.size": job.get("size", "gpt2")}
        label = " ".join(f"{k}={v}" for k, v in axes.items())
        job_id = hashlib.sha256(label.encode()).hexdigest()[:12]
        row = dict(template, job_id=job_id, label=label, axes=axes, workload="gpt", task="train")
        row.update(size=axes["workload.size"], status="ok", parity_ok=True, eager_ms=50.0)
        row.update(job)
        if "speedup" in job:
            row.setdefault("compiled_ms", row["eager_ms"] / job["speedup"])
        write_json_atomic(sweep_dir / "jobs" / job_id / RESULT_FILE, row)
        plan[job_id] = {"label": label, "axes": axes}
    write_json_atomic(sweep_dir / PLAN_FILE, {"name": "planted", "jobs": plan})


def verdict_of(sweep_dir, **kw) -> dict:
    """The verdict as verdict.json holds it (written by the types, read back by them unchanged)."""
    plan = read_plan(sweep_dir)
    found = compute(gather(sweep_dir, plan), plan, VerdictConfig(**kw)).to_dict()
    assert Verdict.from_dict(found).to_dict() == found
    return found


def gain(mode: str, speedup: float, low: float, high: float, compile_s: float, **kw) -> dict:
    return dict(
        mode=mode,
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        compile_s=compile_s,
        compile_cold_s=compile_s,
        **kw,
    )


CONTROL = dict(mode="eager", speedup=1.0, speedup_ci_low=0.99, speedup_ci_high=1.01, compile_s=0.0)


def test_a_small_gain_never_paid_back_is_explained_by_its_step_first():
    """GPT-2 training on this CPU: 1.08x, compile never paid back, matmuls 1.19 ms a step slower:
    the sentence names the matmuls; a 1.5x gain never paid back names what costs compile time; a paid
    gain names what holds it back where a step cause is measured, and compile causes never."""
    from orchestrator.analysis.answers import Cause
    from orchestrator.analysis.causes import cause_line

    step = Cause("matmul_slower", 1.19, 1.19, "matmul kernels take 11.1 ms against 9.95 ms eager")
    compile_ = Cause("recompiles", 3, None, "3 recompiles", affects="compile")
    faster = Cause("copy_faster", -0.76, 0.76, "copy kernels take 0.222 ms against 0.981 ms eager")
    found = [step, faster, compile_]
    assert cause_line(found, 1.08, [1.05, 1.13], "eager_cost") == f"why: {step.text}"
    assert cause_line([faster, compile_], 1.08, [1.05, 1.13], "eager_cost") == f"why: {compile_.text}"
    assert cause_line(found, 1.5, [1.4, 1.6], "eager_cost") == f"why: {compile_.text}"
    assert (
        cause_line(found, 1.5, [1.4, 1.6], "compile")
        == f"why faster: {faster.text}; held back by: {step.text}"
    )
    assert cause_line([faster, compile_], 1.5, [1.4, 1.6], "compile") == f"why faster: {faster.text}"
    assert cause_line([faster, compile_], 0.9, [0.85, 0.95], "slower") is None, "recompiles slow no step"


def test_eager_when_the_compile_cost_is_never_paid_back(template, tmp_path):
    # 50 ms eager at 1.05x saves 2.4 ms a step: 300 s of compile needs 126k steps.
    plant(tmp_path, template, [CONTROL, gain("default", 1.05, 1.03, 1.07, 300.0, compile_warm_s=20.0)])
    (v,) = verdict_of(tmp_path, steps=10_000)["models"]
    assert (v["choice"], v["outcome"]) == ("eager", "eager_cost")
    assert v["payback_steps"] == pytest.approx(300 / (0.05 * (1 - 1 / 1.05)))
    assert v["net_saved_s"] == pytest.approx(10_000 * 0.05 * (1 - 1 / 1.05) - 300)
    assert "never paid back" in v["why"] and "126" in v["why"]
    # The same sweep for a run that is long enough, or restarting on a warm cache, pays it back.
    (long,) = verdict_of(tmp_path, steps=1_000_000)["models"]
    assert (long["choice"], long["outcome"]) == ("default", "compile")
    (warm,) = verdict_of(tmp_path, steps=10_000, cache="warm")["models"]
    assert warm["choice"] == "default" and warm["compile_s"] == 20.0 and warm["compile_kind"] == "warm"


def test_picks_the_mode_that_saves_most_over_the_run_among_those_that_passed(template, tmp_path):
    reasons = [{"reason": "Unsupported: print", "where": "m.py:3"}] * 2 + [
        {"reason": "item()", "where": "m.py:5"}
    ]
    plant(
        tmp_path,
        template,
        [
            CONTROL,
            gain("default", 1.3, 1.25, 1.35, 20.0, graph_breaks=3, break_reasons=reasons, memory_ratio=1.3),
            gain("max-autotune", 1.4, 1.35, 1.45, 600.0),
            gain("reduce-overhead", 2.0, 1.9, 2.1, 10.0, status="parity_fail", parity_ok=False),
        ],
    )
    (short,) = verdict_of(tmp_path, steps=10_000)["models"]
    assert (short["choice"], short["outcome"]) == ("default", "compile"), "max-autotune's 600 s do not pay"
    assert short["net_saved_s"] == pytest.approx(10_000 * 0.05 * (1 - 1 / 1.3) - 20)
    assert short["failed"] == ["reduce-overhead (parity_fail)"], "faster, but it failed parity"
    assert short["risks"][0] == "3 graph break(s) (top: Unsupported: print)"
    assert any(r.startswith("memory up 1.30x") for r in short["risks"])
    (long,) = verdict_of(tmp_path, steps=1_000_000)["models"]
    assert long["choice"] == "max-autotune" and long["risks"] == []
    _, decision, details = lines(Verdict.from_dict(verdict_of(tmp_path, steps=10_000)))
    assert decision.startswith(
        "verdict gpt gpt2 train fp32 none: use default: saves 1.59 min over 10,000 steps"
    )
    assert (
        details.startswith("  risks: 3 graph break(s)") and "failed: reduce-overhead (parity_fail)" in details
    )


def test_no_measurable_gain_when_the_ci_includes_one(template, tmp_path):
    plant(tmp_path, template, [CONTROL, gain("default", 1.02, 0.97, 1.08, 5.0)])
    (v,) = verdict_of(tmp_path, steps=1_000_000)["models"]
    assert (v["choice"], v["outcome"]) == ("eager", "no_gain"), "a long run does not make noise a gain"
    assert "no measurable gain" in v["why"] and "includes 1" in v["why"]


def test_serving_duration_counts_the_calls_eager_serves(template, tmp_path):
    plant(tmp_path, template, [gain("default", 1.25, 1.2, 1.3, 60.0, task="infer", eager_ms=10.0)])
    (v,) = verdict_of(tmp_path, serve_s=3600.0)["models"]
    assert v["steps"] == pytest.approx(360_000) and v["run"] == "1.00 h of serving (360000 calls)"
    assert v["net_saved_s"] == pytest.approx(3600 * (1 - 1 / 1.25) - 60)


def test_suite_summary_geomean_pass_rate_and_flags(template, tmp_path):
    plant(
        tmp_path,
        template,
        [
            gain("default", 1.2, 1.1, 1.3, 10.0, size="gpt2"),
            gain("default", 0.9, 0.85, 0.95, 150.0, size="gpt2-medium", memory_ratio=1.2),
            gain("default", 1.5, 1.4, 1.6, 10.0, size="gpt2-large", graph_breaks=2),
            gain("default", 3.0, 2.9, 3.1, 10.0, size="gpt2-xl", status="crash"),
        ],
    )
    verdict = verdict_of(tmp_path)
    suite = verdict["suite"]
    (default,) = suite["settings"]
    assert (default["models"], default["passed"]) == (4, 3) and default["pass_rate"] == 0.75
    assert default["geomean_speedup"] == pytest.approx((1.2 * 0.9 * 1.5) ** (1 / 3)), "the crash is left out"
    low, high = default["ci"]
    assert low < default["geomean_speedup"] < high < 1.3
    flags = {(f["model"], f["flag"]) for f in suite["flags"]}
    assert flags == {
        ("gpt2-medium", "speedup 0.900 < 0.95"),
        ("gpt2-medium", "compile 150 s > 120 s"),
        ("gpt2-medium", "memory ratio 1.20 > 1.1"),
        ("gpt2-large", "2 graph break(s)"),
    }
    assert [v["model"] for v in verdict["models"]] == ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"]
    assert verdict["shared"] == "gpt train fp32 none"
    printed = lines(Verdict.from_dict(verdict))
    assert any(line.startswith("suite of 4 models, geomean speedup: default 1.") for line in printed)


def test_geomean_ci_of_identical_models_narrows_as_sqrt_k():
    lo, hi = 1.2 / 1.1, 1.2 * 1.1  # symmetric in log space, as the suite's CI is
    one = geomean_ci([1.2], [lo], [hi])
    four = geomean_ci([1.2] * 4, [lo] * 4, [hi] * 4)
    assert one == pytest.approx((1.2, lo, hi), rel=1e-6), "one model: its own CI"
    width = lambda ci: math.log(ci[2]) - math.log(ci[1])  # noqa: E731
    assert width(four) == pytest.approx(width(one) / 2)


def test_real_sweep_prints_writes_and_shows_the_verdict(initargs_sweep, tmp_path):
    stdout = (initargs_sweep.parent.parent / "cli_stdout.txt").read_text()
    verdict = json.loads((initargs_sweep / "verdict.json").read_text())
    assert verdict["steps"] == 10_000 and verdict["cache"] == "cold"
    models = [v["model"] for v in verdict["models"]]
    assert sorted(models) == ["hidden=32", "hidden=64"]
    for v in verdict["models"]:
        # a tiny CPU sweep of 3 repetitions may well not carry a trusted answer: it must say which
        assert v["outcome"] in ("compile", "eager_cost", "no_gain", "slower", "untrusted"), v
        assert f"verdict {v['model']}: " in stdout
    assert "suite of 2 models" in stdout
    # The numerics both sides ran at, read back from torch: in every result, the verdict and the table.
    (numerics,) = {r["numerics"] for r in results(initargs_sweep).values()}
    assert numerics.startswith("matmul highest") and {v["numerics"] for v in verdict["models"]} == {numerics}
    words = " ".join(stdout.split())  # the table's caption wraps at the plain width
    assert f"numerics: {numerics}" in words and f"numerics={numerics}" in words
    page = (initargs_sweep / "dashboard.html").read_text()
    data = json.loads(re.search(r"id='verdict-data'>(.*?)</script>", page).group(1).replace("<\\/", "</"))
    assert [row[0] for row in data["rows"]] == models and page.index("verdict-data") < page.index(
        "id='results'"
    )

    # Recomputed from the finished directory for a longer run: new file, new lines, new page.
    sweep = tmp_path / "copy"
    shutil.copytree(initargs_sweep, sweep)
    proc = run_cli(["verdict", str(sweep), "verdict.steps=1000000"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((sweep / "verdict.json").read_text())["steps"] == 1_000_000
    assert proc.stdout.startswith("verdict for 1,000,000 steps, cold compile")
    assert "1,000,000 steps" in (sweep / "dashboard.html").read_text()
    bad = run_cli(["verdict", str(sweep), "verdict.cache=hot"], cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: verdict.cache='hot' is not valid; choose one of: cold, warm"


def test_a_biased_control_turns_the_answer_into_no_trustworthy_answer(template, tmp_path):
    biased = dict(CONTROL, speedup=1.3, speedup_ci_low=1.2, speedup_ci_high=1.4)
    plant(tmp_path, template, [biased, gain("default", 1.6, 1.5, 1.7, 5.0)])
    (v,) = verdict_of(tmp_path, steps=1_000_000)["models"]
    assert (v["choice"], v["outcome"]) == ("no trustworthy answer", "untrusted")
    assert v["why"].startswith(
        "no trustworthy answer: the eager-against-eager control reads 1.3x [1.20-1.40]"
    )
    assert "launcher.max_parallel=1" in v["why"] and "best measured: default 1.6x" in v["why"]
    printed = lines(Verdict.from_dict(verdict_of(tmp_path, steps=1_000_000)))
    assert printed[1].startswith("verdict gpt gpt2 train fp32 none: no trustworthy answer: the eager-against")


def test_a_clean_sweep_still_gets_its_answer(template, tmp_path):
    plant(tmp_path, template, [CONTROL, gain("default", 1.6, 1.5, 1.7, 5.0)])
    (v,) = verdict_of(tmp_path, steps=1_000_000)["models"]
    assert (v["choice"], v["outcome"]) == ("default", "compile") and v["distrust"] == []


def test_a_busy_host_or_a_wide_ci_is_no_trustworthy_answer(template, tmp_path):
    busy = gain("default", 1.6, 1.5, 1.7, 5.0, iso_ok=False, iso_note="host busy: load 3.10 on 2 cores")
    plant(tmp_path / "busy", template, [CONTROL, busy])
    (v,) = verdict_of(tmp_path / "busy", steps=1_000_000)["models"]
    assert (
        v["outcome"] == "untrusted" and "1 of 2 job(s) not alone when timed (host busy: load 3.10" in v["why"]
    )
    plant(tmp_path / "wide", template, [CONTROL, gain("reduce-overhead", 1.66, 1.16, 2.15, 5.0)])
    (w,) = verdict_of(tmp_path / "wide", steps=1_000_000)["models"]
    assert w["outcome"] == "untrusted" and "spans 60% of it, over 25%" in w["why"]
    assert "bench.repeats=20" in w["why"]
    (loose,) = verdict_of(tmp_path / "wide", steps=1_000_000, max_ci_width=1.0)["models"]
    assert loose["outcome"] == "compile", "the bound is the user's to set"


def test_risks_from_numpy_typed_rows_against_the_rule_that_decided():
    import numpy as np
    import pandas as pd

    from orchestrator.analysis.verdict import risks

    row = pd.Series(
        {
            "graph_breaks": np.int64(2),
            "dyn_recompiles": np.int64(3),
            "dyn_shapes": np.int64(7),
            "dyn_compile_s": np.float64(4.0),
            "cudagraph_skips": np.int64(1),
            "memory_ratio": np.float64(1.3),
            "compiled_peak_gib": np.float64(9.0),
            "break_reasons": [{"reason": "Unsupported: print"}],
        }
    )
    said = risks(row)
    assert said[0] == "2 graph break(s) (top: Unsupported: print)"
    assert any(r.startswith("3 recompile(s) over the 7-shape schedule") for r in said)
    assert any(r.startswith("CUDA graphs skipped 1x") for r in said) and any(
        "memory up 1.30x" in r for r in said
    )
    # Passed by the tolerance of eager: judged against that tolerance, not against the fp64 rule's limit.
    by_tol = pd.Series(
        {
            "parity_rule": "within tol of eager",
            "parity_vs_eager": np.float64(1e-6),
            "parity_tol": 1e-4,
            "parity_err": np.float64(3.5e-3),
            "parity_limit": np.float64(1e-3),
        }
    )
    assert risks(by_tol) == []
    thin = by_tol.copy()
    thin["parity_vs_eager"] = np.float64(8e-5)
    assert risks(thin) == ["parity margin thin: error 80% of its limit (tolerance of eager)"]


def test_settings_that_failed_are_named_with_their_class(template, tmp_path):
    plant(
        tmp_path,
        template,
        [
            CONTROL,
            dict(mode="default", status="parity_fail", parity_ok=False),
            dict(mode="max-autotune", status="crash"),
        ],
    )
    (v,) = verdict_of(tmp_path)["models"]
    assert v["outcome"] == "none_passed"
    assert v["why"] == "no compiled setting passed: default (parity_fail), max-autotune (crash)"


def test_an_empty_break_reason_and_a_mostly_eager_model_read_as_risks():
    """A break recorded without a reason (an old result, a dynamo that gave none) is not an IndexError;
    a model whose graphs hold little of its forward says so."""
    import pandas as pd

    from orchestrator.analysis.verdict import risks

    row = pd.Series(
        {"graph_breaks": 2, "break_reasons": [{"reason": "", "where": None}], "compiled_fraction": 0.2}
    )
    (said,) = [r for r in risks(row) if "graph break" in r]
    assert said == "2 graph break(s) leaving 80% of the forward eager (top: no reason given)", said


def test_the_cause_is_measured_and_said_with_its_number(template, tmp_path):
    """Slower with the eager step launch-bound (profile figures): the largest cause is the one with
    milliseconds behind it, with its lever; the graph breaks follow. A gain says why it is faster."""
    slow = gain("default", 0.8, 0.75, 0.85, 10.0, eager_busy_fraction=0.2, graph_breaks=2,
                compiled_fraction=0.6, break_reasons=[{"reason": "data-dependent branch\nmore"}])  # fmt: skip
    plant(tmp_path, template, [CONTROL, slow])
    (v,) = verdict_of(tmp_path)["models"]
    kinds = [c["kind"] for c in v["causes"]]
    assert kinds == ["launch_bound", "graph_breaks"], v["causes"]
    launch = v["causes"][0]
    assert (
        launch["ms_per_step"] == pytest.approx(50.0 * 0.8)
        and launch["lever"] == "compile.mode=reduce-overhead"
    )
    assert v["cause"] == "why: " + launch["text"] and "busy 20%" in v["cause"]
    assert (
        "40% of the forward eager" in v["causes"][1]["text"]
        and "data-dependent branch" in v["causes"][1]["text"]
    )
    printed = lines(Verdict.from_dict(verdict_of(tmp_path)))
    assert any(line.strip().startswith("why: eager keeps the GPU busy 20%") for line in printed), printed

    fast = gain("default", 2.0, 1.9, 2.1, 10.0, eager_kernels_per_step=120.0, compiled_kernels_per_step=30.0)
    plant(tmp_path / "fast", template, [CONTROL, fast])
    (f,) = verdict_of(tmp_path / "fast")["models"]
    assert f["cause"] == "why faster: fusion: 30 kernels a step compiled against 120 eager", f


def test_recompiles_inside_the_steps_come_first_and_a_moving_shape_asks_for_dynamic(template, tmp_path):
    """Recompiles inside the timed steps come before a cause with milliseconds behind it (the timed
    compiled steps held compiles), a frame compiled there with no failed guard after them; a shape
    that moved asks for `compile.dynamic=true`, a Python value the forward reads asks for nothing (the
    model's to change), and a dynamic job for nothing."""
    reason = "0/1: tensor 'x' size mismatch at index 0. expected 16, actual 24  # x.sum()  # m.py:3 in f"
    for name, reasons, dynamic, lever in (
        ("shape", [reason], False, "compile.dynamic=true"),
        ("value", ["0/3: self.calls == 3  # self.calls += 1  # m.py:7 in forward"], None, None),
        ("dynamic", [reason], True, None),
        ("unguarded", ["no reason recorded"], False, None),  # T5 under reduce-overhead on an H100
    ):
        slow = gain("default", 0.5, 0.45, 0.55, 10.0, eager_busy_fraction=0.2, step_recompiles=4,
                    step_recompile_reasons=reasons, dynamic=dynamic)  # fmt: skip
        plant(tmp_path / name, template, [CONTROL, slow])
        (v,) = verdict_of(tmp_path / name)["models"]
        if name == "unguarded":  # a frame compiled there, not a recompile: no guard to name, not first
            said = "4 frame(s) compiled inside the warm-up and timed steps (no failed guard)"
            assert [c["kind"] for c in v["causes"]] == ["launch_bound", "step_recompiles"], v["causes"]
            assert v["causes"][1]["text"] == said and v["cause"] == "why: " + v["causes"][0]["text"], v
            assert v["causes"][1]["lever"] is None, v["causes"]
            continue
        first = v["causes"][0]
        assert (first["kind"], first["value"], first["lever"]) == ("step_recompiles", 4, lever), v["causes"]
        assert v["causes"][1]["kind"] == "launch_bound" and v["cause"] == "why: " + first["text"]
        if name == "value":
            assert first["text"].endswith("(guard that failed: 0/3: self.calls == 3)"), "not its source line"


def test_a_cuda_graph_recorded_at_run_time_is_no_frame_compiled():
    """torch records a reduce-overhead step's CUDA graph recording as a run-time compilation-metrics
    entry (`is_runtime`); on an H100 each such job read as one frame compiled in its warm-up. Here a
    real frame recompiles on a Python value, and the recording is timed outside a compile as torch's
    `cudagraphify` times it (no CUDA graph runs on a CPU), with a run-time autotune beside it."""
    import torch
    from torch._dynamo.utils import dynamo_timed, get_runtime_metrics_context

    from orchestrator.job.phases import compile_cost

    torch._dynamo.reset()
    scale = torch.compile(lambda x, n: x * n, backend="eager")
    with compile_cost.frames_compiled() as metrics:
        scale(torch.ones(2), 1), scale(torch.ones(2), 2)  # the second recompiles: n == 1 failed
        with dynamo_timed("CUDAGraphNode.record", dynamo_compile_column_us="runtime_cudagraphify_time_us"):
            pass
        with dynamo_timed("autotune", dynamo_compile_column_us="runtime_triton_autotune_time_us"):
            time.sleep(0.002)  # a measurable run-time autotune, kept in the compile's seconds
        get_runtime_metrics_context().finish()
    assert any(getattr(m, "is_runtime", False) for m in metrics), "torch recorded no run-time entry"
    reasons = compile_cost.recompiles(metrics)
    assert len(reasons) == 2 and reasons[1] == "no reason recorded" and "n == 1" in reasons[0], reasons
    summary = compile_cost.summarize(metrics)
    assert summary.compile_frames == 2 and summary.compile_autotune_s >= 0.001, summary


def test_a_record_function_range_on_the_gpu_timeline_is_no_kernel():
    """The profiler draws `record_function` ranges on the GPU's timeline too (an eager optimizer's
    step spans its kernels and the idle time between them): they are not kernels, in the time split
    or the busy fraction. Torch's own event type, built here (no GPU profile runs on a CPU)."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    from orchestrator.job.phases.profile import device_kernels

    def event(name: str, device: DeviceType, annotation: bool = False) -> FunctionEvent:
        return FunctionEvent(0, name, 1, 0, 10, device_type=device, is_user_annotation=annotation)

    kernel, cpu = event("ampere_bf16_gemm", DeviceType.CUDA), event("aten::mm", DeviceType.CPU)
    span = event("Optimizer.step#AdamW.step", DeviceType.CUDA, annotation=True)
    assert device_kernels([kernel, span, cpu]) == [kernel]


def test_a_follow_up_job_measures_the_lever_and_the_verdict_gives_both_answers(fast, tmp_path):
    """A static compile over a shape schedule recompiles: the verdict names that cause with its lever,
    the sweep runs one follow-up with `compile.dynamic=true`, and both answers are printed and kept;
    the follow-up row is marked, and left out of the model's own answer."""
    args = [
        "workload=block", "bench.task=infer", "workload.shapes=[16,24]", "compile.dynamic=false",
        "compile.mode=default", "bench.profile=true",
        *[a for a in fast if not a.startswith("verdict.follow_up")],
    ]  # fmt: skip
    dry = run_cli([*args, "--dry-run"], cwd=tmp_path)
    assert dry.returncode == 0 and "follow-ups may be added" in dry.stdout, dry.stdout
    proc = run_cli(args, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep = tmp_path / "sweeps" / "default"
    rows = results(sweep).values()
    (follow,) = [r for r in rows if r.get("follow_up_of")]
    (named,) = [r for r in rows if r["mode"] == "default" and not r.get("follow_up_of")]
    assert follow["follow_up_of"] == named["job_id"] and follow["lever"] == "compile.dynamic=true"
    assert follow["dynamic"] is True and follow["dyn_recompiles"] == 0 < named["dyn_recompiles"]
    (v,) = json.loads((sweep / "verdict.json").read_text())["models"]
    kinds = {c["kind"]: c for c in v["causes"]}
    assert v["job_id"] == named["job_id"] and kinds["recompiles"]["affects"] == "compile", v["causes"]
    # A tiny block on a CPU: the compiled call's own overhead (guards, its wrapper) is measured, and
    # it is what the answer names when compiled does not gain (recompiles cost compile time, not
    # steps), unless a cause with more milliseconds behind it is measured.
    # (Named from a tenth of the step: a busy host's slower steps can put it under that.)
    from orchestrator.analysis.causes import OVERHEAD_SHARE

    assert named["compiled_overhead_ms_per_step"] > 0
    share = named["compiled_overhead_ms_per_step"] / named["compiled_ms"]
    # (Not quoted where the profile pass was unlike the timed steps: a busy host's can be.)
    quoted = "profile_unrepresentative" not in kinds
    assert ("overhead" in kinds) == (share >= OVERHEAD_SHARE and quoted), (share, v["causes"])
    if "overhead" in kinds:
        overhead = kinds["overhead"]
        assert overhead["ms_per_step"] == pytest.approx(named["compiled_overhead_ms_per_step"])
        if v["speedup"] < 1.1 or v["ci"][0] <= 1:  # named, unless a cause with more milliseconds is
            # (a busy host's profile can time the tiny block's compiled matmuls slower than eager's)
            (named_cause,) = [c for c in v["causes"] if v["cause"] == "why: " + c["text"]]
            assert (named_cause["ms_per_step"] or 0) >= overhead["ms_per_step"], v
    assert v["follow_up"]["lever"] == "compile.dynamic=true" and v["follow_up"]["cause"] == "recompiles"
    assert v["follow_up"]["job_id"] == follow["job_id"] and v["follow_up"]["status"] == "ok"
    assert v["follow_up"]["speedup"] == pytest.approx(follow["speedup"])
    steps = f"compiled {follow['compiled_ms']:.3g} ms (was {named['compiled_ms']:.3g} ms)"
    assert steps in v["follow_up"]["moved"] and f"    {v['follow_up']['moved']}" in proc.stdout, v
    assert "follow-up step 1: 1 job(s)" in proc.stdout, proc.stdout
    # Where the lever's gain clears its CI the answer is the best found, its path naming the lever;
    # else the follow-up's own line (a busy host decides which: the tiny block's gain is small).
    if v.get("best"):
        assert v["best"]["levers"] == ["compile.dynamic=true"] and "best found: " in proc.stdout, v
    else:
        assert "follow-up with compile.dynamic=true: " in proc.stdout, proc.stdout
    assert f"verdict {v['model']}: " in proc.stdout, "the answer at the user's settings, first"


def test_one_sweep_three_user_models_each_with_its_own_cause(tmp_path, compile_cache):
    """One shared sweep, real inductor on the CPU, the verdict's profile pass at its default (on): a
    model whose graph break leaves most of it eager, one that recompiles at every call (a Python
    counter its forward changes) and a one-matmul model each get their own measured cause, in
    verdict.json and printed (the tiny model's cause as its answer with a lever: the follow-up test
    below)."""
    models = "user_models:MostlyEager,user_models:CountsItsCalls,user_models:OneLinear"
    args = [
        "workload=module", f"workload.path={TESTS}", f"workload.target={models}", "workload.inputs=[[8,32]]",
        "bench.task=infer", "compile.mode=default", *[a for a in FAST if a != "verdict.profile=false"],
        "compile.cache=shared", f"compile.cache_dir={compile_cache}",
    ]  # fmt: skip
    proc = run_cli(args, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep = tmp_path / "sweeps" / "default"
    found = results(sweep)
    said = json.loads((sweep / "verdict.json").read_text())["models"]
    verdicts = {v["model"].split(":")[-1]: v for v in said}
    assert set(verdicts) == {"MostlyEager", "CountsItsCalls", "OneLinear"}, list(verdicts)
    rows = {name: found[v["job_id"]] for name, v in verdicts.items()}

    def first_cause(name: str) -> dict:
        v = verdicts[name]
        slower = v["speedup"] < 1.1 or v["ci"][0] <= 1
        assert not slower or v["cause"] == "why: " + v["causes"][0]["text"], v
        assert not slower or f"why: {v['causes'][0]['text']}" in proc.stdout, proc.stdout
        return v["causes"][0]

    eager = rows["MostlyEager"]  # a break in a loop: dynamo skips the frame, five of six layers eager
    assert eager["compiled_fraction"] < 0.5 and eager["graph_breaks"] == len(eager["break_reasons"]) >= 1
    assert "explain_break_count" not in eager and "graph_breaks_compile" not in eager, "one break count"
    assert any(
        "skipped, runs eager" in b["reason"] and b["where"].startswith(str(TESTS / "user_models.py"))
        for b in eager["break_reasons"]
    ), eager["break_reasons"]
    cause = first_cause("MostlyEager")
    assert cause["kind"] == "graph_breaks" and cause["value"] == pytest.approx(1 - eager["compiled_fraction"])

    counting = rows["CountsItsCalls"]
    assert counting["step_recompiles"] >= 1 and "self.calls" in counting["step_recompile_reasons"][0]
    cause = first_cause("CountsItsCalls")
    assert cause["kind"] == "step_recompiles" and cause["value"] == counting["step_recompiles"]
    assert "self.calls" in cause["text"] and cause["lever"] is None, cause

    tiny, v = rows["OneLinear"], verdicts["OneLinear"]  # one matmul: nothing to fuse
    assert tiny["step_recompiles"] == 0 and tiny["compiled_fraction"] == pytest.approx(1.0)
    assert tiny["graph_matmuls"] >= 1 and tiny["graph_fp32_matmuls"] == tiny["graph_matmuls"], "fp32 here"
    kinds = [c["kind"] for c in v["causes"]]
    assert not {"graph_breaks", "step_recompiles"} & set(kinds), kinds
    assert tiny["compiled_kernels_per_step"] > 0 and tiny.get("compiled_profile_trace") is None, "no trace"
    assert not list((sweep / "jobs" / v["job_id"]).glob("profile_*.json")), "the verdict's pass keeps none"
    if "profile_unrepresentative" in kinds:  # a busy host's profile pass: none of its figures quoted
        assert kinds == ["profile_unrepresentative"] and v["cause"] is None, v["causes"]
        return
    # What it names is the profile's (its own overhead, or a kind of kernel), with the milliseconds
    # of a step behind it; which one is the host's to say (a tiny step on a busy CPU moves).
    assert all(c["ms_per_step"] is not None for c in v["causes"]), v["causes"]
    sentence = (v["cause"] or "").removeprefix("why: ").removeprefix("why faster: ")
    assert not sentence or sentence in [c["text"] for c in v["causes"]], v["cause"]
    # Compile does not pay for its step (slower, or under 10%): the answer names what slows the step.
    # Never paid back or not, a gain under 10% is explained by the step first.
    slowing = [
        c["text"]
        for c in v["causes"]
        if c["affects"] == "step" and c["kind"] != "fusion" and not c["kind"].endswith("_faster")
    ]
    if (v["speedup"] < 1.1 or v["ci"][0] <= 1) and (slowing or v["outcome"] != "eager_cost"):
        assert slowing and v["cause"] and v["cause"].removeprefix("why: ") == slowing[0], v


def test_where_the_step_time_moved_is_a_cause_with_a_lever_only_where_it_acts(template, tmp_path):
    """The profile's time split: matmul kernels that take 4 ms longer compiled, on a GPU without TF32,
    are the largest cause and ask for one follow-up with TF32; on a CPU the same figures ask for none."""
    from orchestrator.analysis.follow_up import follow_up_specs

    split = dict(
        eager_time_split={"matmul": 5.0, "elementwise": 4.0},
        compiled_time_split={"matmul": 9.0, "fused": 1.0},
        num_matmul_precision="highest",
    )
    for device, cuda in (("gpu", "13.0"), ("cpu", None)):
        slow = gain("default", 0.8, 0.75, 0.85, 10.0, env_cuda=cuda, **split)
        plant(tmp_path / device, template, [CONTROL, slow])
    (v,) = verdict_of(tmp_path / "gpu")["models"]
    first = v["causes"][0]
    assert (first["kind"], first["ms_per_step"]) == ("matmul_slower", 4.0), v["causes"]
    assert first["lever"] == "bench.matmul_precision=high" and v["cause"].startswith(
        "why: matmul kernels take 9"
    )
    assert "elementwise_faster" in {c["kind"] for c in v["causes"]}, "4 ms eager, 1 ms fused"
    plan = read_plan(tmp_path / "gpu")
    df = gather(tmp_path / "gpu", plan)
    (spec,) = follow_up_specs(compute(df, plan, VerdictConfig()), df, str(tmp_path / "gpu"), 3)
    assert spec.lever == "bench.matmul_precision=high" and spec.follow_up_of == v["job_id"]
    assert spec.cfg.bench.matmul_precision == "high" and spec.job_id != v["job_id"]
    (c,) = verdict_of(tmp_path / "cpu")["models"]
    assert c["causes"][0]["lever"] is None, "TF32 does nothing on a CPU"
    # Eager ran a fused attention kernel and the compiled step ran its attention as matmuls (the math
    # path, as BERT on the H200: benchmarks/h200-causes/): the lever is that path's reduced precision.
    math = dict(
        split, eager_time_split={**split["eager_time_split"], "attention": 0.5}, num_sdp_reduced_math=False
    )
    math |= dict(eager_attention_backend="flash", compiled_attention_backend="none fused")
    plant(
        tmp_path / "math",
        template,
        [CONTROL, gain("default", 0.8, 0.75, 0.85, 10.0, env_cuda="13.0", **math)],
    )
    (m,) = verdict_of(tmp_path / "math")["models"]
    assert m["causes"][0]["lever"] == "bench.sdp_reduced_math=true", m["causes"][0]
    assert "no fused attention kernel ran compiled (eager's flash took 0.5 ms)" in m["causes"][0]["text"]
    plan = read_plan(tmp_path / "cpu")
    df = gather(tmp_path / "cpu", plan)
    assert follow_up_specs(compute(df, plan, VerdictConfig()), df, str(tmp_path / "cpu"), 3) == []
    # Both sides fused their attention, with other kernels: the cause names which each side ran.
    other = dict(eager_time_split={"attention": 1.0}, compiled_time_split={"attention": 5.0})
    other |= dict(eager_attention_backend="flash", compiled_attention_backend="efficient")
    plant(
        tmp_path / "other",
        template,
        [CONTROL, gain("default", 0.8, 0.75, 0.85, 10.0, env_cuda="13.0", **other)],
    )
    (o,) = verdict_of(tmp_path / "other")["models"]
    assert o["causes"][0]["text"].endswith("ms eager (flash eager, efficient compiled)"), o["causes"]
    # Llama-style inference on an H100 (run3-infer-b-h100, job e28bd384e707): cuDNN both sides, 2.05
    # ms against 0.55 compiled, the graph passing masks that eager's causal calls do not: said, and
    # no reduced-precision math lever (a fused kernel's time it does not move: 2.09 ms with it).
    cudnn = dict(eager_time_split={"attention": 0.55}, compiled_time_split={"attention": 2.05})
    cudnn |= dict(eager_attention_backend="cudnn", compiled_attention_backend="cudnn")
    cudnn |= dict(num_sdp_reduced_math=False, graph_attention=16, graph_masked_attention=16)
    cudnn |= dict(forward_attention=16, forward_masked_attention=0)
    row = gain("default", 0.8, 0.75, 0.85, 10.0, env_cuda="13.0", **cudnn)
    plant(tmp_path / "cudnn", template, [CONTROL, row])
    (a,) = verdict_of(tmp_path / "cudnn")["models"]
    assert a["causes"][0]["text"] == (
        "attention kernels take 2.05 ms a compiled step against 0.55 ms eager; the compiled graph passes "
        "a mask to 16 of its 16 attention calls, eager to 0 of 16"
    ), a["causes"][0]
    assert a["causes"][0]["lever"] is None, a["causes"][0]


def test_a_launch_bound_eager_explains_a_gain_not_a_slow_compiled_step(template, tmp_path):
    """BERT-base MLM inference's figures on an H100 (benchmarks/h200-answers/run1-infer-a-h100, job
    4433cf97239c; its eager step planted at 14 ms, not 12.6, so that its kernels' share, 45%, is
    clear of the launch-bound line): compiled 1.02x. Kernel time is what the profile measured, the
    busy fraction of the profiled step (22.6 and 22.0 ms, longer than the timed ones). The answer
    names the compiled step's slower matmuls (attention as matmuls), not eager's idle time; the
    compiled step's own idle time (its step less its kernels, 1.07 ms) carries reduce-overhead; the
    follow-up takes the attention lever; a failed profile pass names no idle time."""
    from orchestrator.analysis.follow_up import follow_up_specs, lever_effect

    bert = gain(
        "default", 1.019, 1.006, 1.047, 16.0, env_cuda="13.0", eager_ms=14.0, compiled_ms=12.402,
        eager_busy_fraction=0.2793, eager_profile_step_ms=22.615, num_sdp_reduced_math=False,
        compiled_busy_fraction=0.5154, compiled_profile_step_ms=21.99,
        eager_time_split={"matmul": 2.773, "elementwise": 1.966, "copy": 1.134, "attention": 0.444},
        compiled_time_split={"matmul": 7.511, "fused": 3.813, "copy": 0.009},
        eager_attention_backend="cudnn", compiled_attention_backend="none fused",
    )  # fmt: skip
    plant(tmp_path, template, [CONTROL, bert])
    (v,) = verdict_of(tmp_path)["models"]
    kinds = {c["kind"]: c for c in v["causes"]}
    launch, idle = kinds["launch_bound"], kinds["compiled_idle"]
    assert launch["lever"] is None and launch["affects"] == "gain", launch
    assert launch["ms_per_step"] == pytest.approx(14.0 - 0.2793 * 22.615, abs=0.01), (
        "the step less its kernels"
    )
    assert (
        idle["ms_per_step"] == pytest.approx(1.069, abs=0.01)
        and idle["lever"] == "compile.mode=reduce-overhead"
    )
    assert v["cause"].startswith("why: matmul kernels take 7.51 ms"), v["cause"]
    plan = read_plan(tmp_path)
    df = gather(tmp_path, plan)
    (spec,) = follow_up_specs(compute(df, plan, VerdictConfig()), df, str(tmp_path), 3)
    assert spec.lever == "bench.sdp_reduced_math=true"
    # The same eager step where compiled gains: its idle time is why compiled is faster.
    fast = dict(bert, speedup=2.0, speedup_ci_low=1.9, speedup_ci_high=2.1, compiled_ms=6.3)
    fast |= dict(compiled_time_split={"matmul": 2.7, "fused": 3.1}, compiled_profile_step_ms=6.5)
    plant(tmp_path / "fast", template, [CONTROL, fast])
    (f,) = verdict_of(tmp_path / "fast")["models"]
    assert f["cause"] == (
        "why faster: eager's kernels fill 45% of its 14 ms step: launch-bound, 7.68 ms a step idle; held "
        "back by: the compiled step leaves the GPU idle 2.95 ms of its 6.3 ms (its kernels take 3.35 ms)"
    ), "what holds the gain back: the compiled step's own idle time"
    # Its sdp follow-up as it ran (run2-infer-a-sdp-h100, job a83759bfb032): the lever took the
    # matmuls from 7.51 to 3.90 ms and the compiled step from 12.4 to 8.63 ms, but eager read 7.89 ms
    # in that job against 14 here: said, both ways; what still slows it names the next lever (CUDA
    # graphs), not TF32 (no float32 matmul is left for it); an older follow-up with another lever is
    # not the one reported.
    plan = read_plan(tmp_path)
    named_id = next(j for j, p in plan.items() if p["axes"]["compile.mode"] == "default")
    sdp = dict(bert, eager_ms=7.89, compiled_ms=8.626, speedup=0.906, speedup_ci_low=0.857)
    sdp |= dict(speedup_ci_high=0.943, num_sdp_reduced_math=True, graph_matmuls=98, graph_fp32_matmuls=0)
    sdp |= dict(num_matmul_precision="highest")
    sdp |= dict(eager_busy_fraction=0.3738, eager_profile_step_ms=16.92, compiled_busy_fraction=0.4767)
    sdp |= dict(compiled_profile_step_ms=14.79, compiled_time_split={"matmul": 3.902, "fused": 3.119})
    for job_id, lever, extra in (
        ("0" * 12, "compile.mode=reduce-overhead", dict(mode="reduce-overhead")),
        ("f" * 12, "bench.sdp_reduced_math=true", {}),
    ):
        follow = dict(template, job_id=job_id, label="follow", axes={}, workload="gpt", task="train")
        follow |= dict(size="gpt2", status="ok", parity_ok=True, follow_up_of=named_id, lever=lever)
        write_json_atomic(tmp_path / "jobs" / job_id / RESULT_FILE, follow | sdp | extra)
    found = verdict_of(tmp_path)
    f = found["models"][0]["follow_up"]
    assert f["lever"] == "bench.sdp_reduced_math=true" and f["cause"] == "matmul_slower", f
    assert f["moved"] == (
        "with it: matmul kernels 3.9 ms a compiled step (was 7.51 ms); "
        "steps: compiled 8.63 ms (was 12.4 ms), eager 7.89 ms (was 14 ms)"
    ), f["moved"]
    assert f["still"].startswith("the compiled step leaves the GPU idle 1.58 ms"), f["still"]
    # The follow-up resumed on another machine of the same name (run10-train-c-rest-h100: its ViT
    # steps read twice its planned job's): the boot ids say so; unrecorded boots (older results) do not.
    named_row = pd.Series(template | bert | dict(env_host="vm", env_boot="a"))
    for boot, apart in (("b", True), ("a", False), (None, False)):
        moved, _ = lever_effect(
            named_row, pd.Series(template | sdp | dict(env_host="vm", env_boot=boot)), "x"
        )
        assert moved.endswith("its figures cross machines") == apart, (boot, moved)
    assert f["next_lever"] == "compile.mode=reduce-overhead", f
    (matmul,) = [c for c in causes(pd.Series(template | sdp)) if c.kind == "matmul_slower"]
    assert matmul.lever is None, "TF32 with no float32 matmul left to run on it does nothing"
    with_fp32 = pd.Series(template | sdp | dict(graph_fp32_matmuls=24))
    levers = [c.lever for c in causes(with_fp32) if c.kind == "matmul_slower"]
    assert levers == ["bench.matmul_precision=high"], levers
    printed = lines(Verdict.from_dict(found))
    assert f"    still: {f['still']} (next lever: compile.mode=reduce-overhead)" in printed, printed
    # A failed profile pass leaves its figures empty: no idle time is read from them.
    failed = dict(bert, eager_time_split={}, compiled_time_split={}, eager_busy_fraction=None)
    failed |= dict(compiled_busy_fraction=None, eager_profile_step_ms=None, compiled_profile_step_ms=None)
    plant(tmp_path / "failed", template, [CONTROL, failed])
    (x,) = verdict_of(tmp_path / "failed")["models"]
    assert "compiled_idle" not in {c["kind"] for c in x["causes"]}, x["causes"]


def test_kernel_names_are_labelled_by_the_kind_of_work():
    """Names as the H200's profiles show them (benchmarks/h200-causes/): cuBLAS's nvjet and xmma
    GEMMs are matmuls, inductor's Triton kernels fused, PyTorch's own elementwise kernels elementwise."""
    from orchestrator.job.phases.profile import kernel_kind

    assert kernel_kind("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT") == "matmul"
    assert kernel_kind("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8") == "matmul"
    assert kernel_kind("triton_per_fused__safe_softmax_5") == "fused"
    assert (
        kernel_kind("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16>")
        == "elementwise"
    )
    assert kernel_kind("flash_fwd_kernel<Flash_fwd_kernel_traits<64>>") == "attention"
    assert kernel_kind("TorchDynamo Cache Lookup") == "host" and kernel_kind("mystery") == "other"
    # Which attention each side ran, by its kernels' (a CPU's: aten ops') names.
    from orchestrator.job.phases.profile import attention_backend

    assert attention_backend(["pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>"]) == "flash"
    assert attention_backend(["fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "ampere_gemm"]) == "efficient"
    assert attention_backend(["aten::_scaled_dot_product_cudnn_attention"]) == "cudnn"
    assert attention_backend(["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16"]) == "cudnn"
    assert attention_backend(["aten::_scaled_dot_product_flash_attention_for_cpu"]) == "flash"
    assert attention_backend(["aten::_scaled_dot_product_attention_math", "aten::bmm"]) == "math"
    assert attention_backend(["sm90_xmma_gemm_bf16bf16", "triton_per_fused__softmax_0"]) == "none fused"


def test_serving_lines_never_read_an_untrusted_batch_as_compile_not_paying():
    import pandas as pd

    from orchestrator.analysis.answers import ModelVerdict
    from orchestrator.analysis.serving import batch_lines
    from orchestrator.core.result import COL

    def sweep(outcomes: dict[int, str]) -> list[str]:
        df = pd.DataFrame(
            {COL.job_id: [f"j{b}" for b in outcomes], COL.task: "generate", COL.batch_size: list(outcomes)}
        )
        verdicts = [
            ModelVerdict(
                job_id=f"j{b}", outcome=o, choice="default" if o == "compile" else "eager", speedup=2.0
            )
            for b, o in outcomes.items()
        ]
        return batch_lines(df, verdicts, [COL.batch_size])

    untrusted = sweep({1: "compile", 8: "untrusted"})
    assert "compile pays at every batch measured (batch 8: no trustworthy answer)" in untrusted[0], untrusted
    assert "  batch 8: no trustworthy answer" in untrusted
    assert "compile stops paying at batch 64" in sweep({1: "compile", 8: "untrusted", 64: "slower"})[0]
    assert "no trustworthy answer at any batch" in sweep({1: "untrusted", 8: "untrusted"})[0]


def test_a_follow_up_says_its_payback_and_is_held_to_the_same_checks(template, tmp_path):
    main_job = gain("default", 0.9, 0.85, 0.95, 5.0)
    plant(tmp_path, template, [CONTROL, main_job])
    plan = read_plan(tmp_path)
    main_id = next(j for j, p in plan.items() if p["axes"]["compile.mode"] == "default")
    lever = "compile.mode=reduce-overhead"  # planted: its figures, not a real lever's run
    follow = dict(template, job_id="f" * 12, label="follow", axes={}, workload="gpt", task="train")
    follow.update(size="gpt2", status="ok", parity_ok=True, eager_ms=50.0, follow_up_of=main_id, lever=lever)
    follow.update(gain("default", 1.5, 1.45, 1.55, 5.0, compiled_ms=50.0 / 1.5))
    follow.update(iso_ok=False, iso_note="a foreign process on the GPU")
    write_json_atomic(tmp_path / "jobs" / follow["job_id"] / RESULT_FILE, follow)
    (v,) = verdict_of(tmp_path)["models"]
    why = v["follow_up"]["why"]
    assert why.startswith(f"with {lever}: 1.5x") and "pays back after" in why, why
    assert "not trusted: 1 of 1 job(s) not alone when timed (a foreign process on the GPU)" in why, why


def test_generation_served_in_requests_is_judged_on_whole_requests(template, tmp_path):
    """A request's prefill counts: `verdict.requests` (or serve_s) judge generate on a whole request's
    speedup and CI, not on the per-token headline; a result without a request CI keeps decode steps."""
    served = dict(task="generate", eager_ms=12.0, eager_e2e_ms=2000.0, gen_e2e_speedup=2.0)
    plant(
        tmp_path,
        template,
        [gain("default", 3.0, 2.9, 3.1, 30.0, **served, gen_e2e_ci_low=1.9, gen_e2e_ci_high=2.1)],
    )
    (v,) = verdict_of(tmp_path, requests=1000)["models"]
    assert (v["steps"], v["unit"], v["run"]) == (1000, "requests", "1,000 requests"), v
    assert v["speedup"] == 2.0 and v["ci"] == [1.9, 2.1], "the request's speedup, not the token's 3x"
    assert v["net_saved_s"] == pytest.approx(1000 * 2.0 * (1 - 1 / 2.0) - 30.0)
    assert v["why"].endswith("requests)") and "pays back after 30.0 requests" in v["why"], v["why"]
    (v,) = verdict_of(tmp_path, serve_s=3600.0)["models"]
    assert v["steps"] == pytest.approx(1800) and v["run"] == "1.00 h of serving (1800 requests)"
    wide = dict(served, gen_e2e_ci_low=1.2, gen_e2e_ci_high=2.9)  # the token's CI tight, the request's not
    plant(tmp_path, template, [gain("default", 3.0, 2.9, 3.1, 30.0, **wide)])
    (v,) = verdict_of(tmp_path, requests=1000)["models"]
    assert v["outcome"] == "untrusted" and "CI [1.20-2.90]" in v["why"], v["why"]
    plant(tmp_path, template, [gain("default", 3.0, 2.9, 3.1, 30.0, **served)])  # an older result
    (v,) = verdict_of(tmp_path, requests=1000)["models"]
    assert v["unit"] == "steps" and v["speedup"] == 3.0 and v["steps"] == 10_000, v


def test_float32_matmuls_with_tf32_off_are_a_cause_on_a_gpu_only(template, tmp_path):
    counted = dict(graph_matmuls=12, graph_fp32_matmuls=12, num_matmul_precision="highest")
    for name, extra in (
        ("gpu", dict(env_cuda="13.0")),
        ("tf32", dict(env_cuda="13.0", num_matmul_precision="high")),
        ("cpu", dict(env_cuda=None)),
    ):
        plant(tmp_path / name, template, [CONTROL, gain("default", 1.3, 1.2, 1.4, 10.0, **(counted | extra))])
    (v,) = verdict_of(tmp_path / "gpu")["models"]
    (c,) = [c for c in v["causes"] if c["kind"] == "fp32_matmuls"]
    assert c["lever"] == "bench.matmul_precision=high" and c["text"].startswith(
        "12 of the compiled graph's 12 matmuls"
    )
    for name in ("tf32", "cpu"):
        (v,) = verdict_of(tmp_path / name)["models"]
        assert "fp32_matmuls" not in {c["kind"] for c in v["causes"]}, (name, v["causes"])


def test_stacked_follow_ups_walk_three_steps_drop_a_loser_and_hand_over_runnable_code(template, tmp_path):
    """Planted causes drive the walk (analysis/stack.py): the named setting's largest cause (an idle
    compiled step) asks for CUDA graphs; that step gains, and its own largest cause left (attention as
    matmuls) asks for the math path's reduced precision, which loses and is dropped; the next one left
    (float32 matmuls) asks for TF32, which gains. The budget is honoured, a resumed sweep plans nothing
    that ran, and the best found is handed over as code that runs and a command that measures it again."""
    import shlex

    from orchestrator.analysis.follow_up import follow_up_specs
    from orchestrator.config.plan import build_plan

    sweep = tmp_path / "stack"
    math = dict(
        eager_time_split={"matmul": 5.0, "attention": 0.5},
        compiled_time_split={"matmul": 7.0},
        num_sdp_reduced_math=False,
        eager_attention_backend="flash",
        compiled_attention_backend="none fused",
        env_cuda="13.0",
    )
    fp32 = dict(num_matmul_precision="highest", graph_fp32_matmuls=12, graph_matmuls=12)
    idle = dict(compiled_busy_fraction=0.5, compiled_profile_step_ms=10.0, compiled_ms=10.0, eager_ms=8.0)
    plant(sweep, template, [CONTROL, gain("default", 0.8, 0.75, 0.85, 10.0, **math, **fp32, **idle)])

    def specs(budget: int = 3) -> list:
        plan = read_plan(sweep)
        df = gather(sweep, plan)
        return follow_up_specs(
            compute(df, plan, VerdictConfig(max_follow_ups=budget)), df, str(sweep), budget
        )

    def ran(spec, figures: dict) -> None:  # the step's result, as its job would write it
        plan = json.loads((sweep / PLAN_FILE).read_text())
        busy = dict(compiled_busy_fraction=0.98, compiled_profile_step_ms=5.0, compiled_ms=5.0, eager_ms=8.0)
        row = dict(template, job_id=spec.job_id, label=spec.label, axes=spec.axes, config=spec.config)
        row.update(workload="gpt", task="train", size="gpt2", status="ok", parity_ok=True, **busy, **math)
        row.update(follow_up_of=spec.follow_up_of, lever=spec.lever, **figures)
        write_json_atomic(sweep / "jobs" / spec.job_id / RESULT_FILE, row)
        plan["jobs"][spec.job_id] = {"label": spec.label, "axes": spec.axes} | {
            "follow_up_of": spec.follow_up_of,
            "lever": spec.lever,
        }
        write_json_atomic(sweep / PLAN_FILE, plan)

    (first,) = specs()
    assert first.lever == "compile.mode=reduce-overhead" and first.cfg.compile.mode == "reduce-overhead"
    ran(first, gain("reduce-overhead", 1.5, 1.45, 1.55, 12.0, **fp32))
    (second,) = specs()
    assert second.lever == "compile.mode=reduce-overhead + bench.sdp_reduced_math=true", second.lever
    assert second.cfg.compile.mode == "reduce-overhead" and second.cfg.bench.sdp_reduced_math
    ran(second, gain("reduce-overhead", 1.2, 1.15, 1.25, 12.0, **fp32))
    assert specs(budget=2) == [], "two steps: the budget is spent"
    (third,) = specs()
    assert third.lever == "compile.mode=reduce-overhead + bench.matmul_precision=high", "the loser dropped"
    ran(third, gain("reduce-overhead", 1.9, 1.85, 1.95, 12.0, num_matmul_precision="high"))
    assert specs() == [], "resumed: every step ran, the budget of 3 spent"
    # Beyond the budget: the best job keeps its GPU busy in matmul kernels (its profile), so autotuning is
    # next, tried after the precision levers; stacked on CUDA graphs it is max-autotune (both).
    (fourth,) = specs(budget=5)
    assert fourth.lever.endswith("+ compile.mode=max-autotune") and fourth.cfg.compile.mode == "max-autotune"

    plan = read_plan(sweep)
    verdict = compute(gather(sweep, plan), plan, VerdictConfig())
    (v,) = verdict.models
    assert [(s.lever, s.outcome) for s in v.path] == [
        ("compile.mode=reduce-overhead", "gain"),
        ("bench.sdp_reduced_math=true", "loses"),
        ("bench.matmul_precision=high", "gain"),
    ]
    best = v.best
    assert best is not None and best.job_id == third.job_id and best.speedup == pytest.approx(1.9)
    assert best.levers == ["compile.mode=reduce-overhead", "bench.matmul_precision=high"]
    assert best.numerics == ["bench.matmul_precision=high"] and "within its limit" in best.parity
    assert Verdict.from_dict(verdict.to_dict()) == verdict, "typed both ways"
    printed = lines(verdict)
    head = next(line for line in printed if "best found" in line)
    stack = "default + compile.mode=reduce-overhead + bench.matmul_precision=high"
    assert head.startswith(f"verdict {v.model}: best found: {stack} 1.9x"), head
    assert "changes numerics (bench.matmul_precision=high)" in " ".join(printed)
    assert any("step 2: + bench.sdp_reduced_math=true: 1.2x [1.15-1.25], lost: dropped" in x for x in printed)
    assert any(x.startswith("  your settings: ") for x in printed), "then the user's own answer"
    assert f"  reproduce: {best.reproduce}" in printed, "one line, never wrapped"

    code = "\n".join(best.recipe)  # real code: it runs around a model, and compiles it
    assert 'torch.set_float32_matmul_precision("high")' in code
    assert 'model = torch.compile(model, mode="reduce-overhead")' in code
    before = torch.get_float32_matmul_precision()
    scope: dict = {"model": torch.nn.Linear(4, 4)}
    try:
        exec(code, scope)  # noqa: S102 (the recipe is ours, and running it is the point)
        assert torch.get_float32_matmul_precision() == "high"
        assert scope["model"](torch.randn(2, 4)).shape == (2, 4)
        assert hasattr(scope["model"], "_orig_mod"), "compiled"
    finally:
        torch.set_float32_matmul_precision(before)
        torch._dynamo.reset()
    args = shlex.split(best.reproduce)
    assert args[:3] == ["python", "-m", "orchestrator"]
    assert build_plan(args[3:], cwd=tmp_path).jobs[0].job_id == best.job_id, "the same job again"


def test_the_new_levers_are_named_only_where_their_cause_is_measured():
    """Autotuning for a compiled step that keeps the GPU busy in matmul kernels, and compiling the
    optimizer for a training step whose eager optimizer step takes a large share of it."""
    from orchestrator.analysis.causes import causes
    from orchestrator.core.result import COL

    def row(**figures: object) -> pd.Series:
        return pd.Series({getattr(COL, k): v for k, v in figures.items()})

    busy = dict(mode="default", env_cuda="13.0", compiled_ms=10.0, compiled_profile_step_ms=10.0)
    matmul = row(**busy, compiled_busy_fraction=0.95, compiled_time_split={"matmul": 7.0, "fused": 2.5})
    (bound,) = [c for c in causes(matmul) if c.kind == "matmul_bound"]
    assert bound.lever == "compile.mode=max-autotune-no-cudagraphs" and bound.ms_per_step is None
    idle = row(**busy, compiled_busy_fraction=0.6, compiled_time_split={"matmul": 5.0, "fused": 1.0})
    assert "matmul_bound" not in {c.kind for c in causes(idle)}, "an idle GPU: not the matmuls' to tune"

    step = dict(mode="default", task="train", compiled_ms=10.0, compiled_optimizer_ms_per_step=3.0)
    (opt,) = [c for c in causes(row(**step)) if c.kind == "optimizer"]
    assert opt.lever == "compile.optimizer=true" and opt.ms_per_step == 3.0
    assert not [c for c in causes(row(**step, compile_optimizer_s=2.0)) if c.lever], "compiled already"
    small = dict(step, compiled_optimizer_ms_per_step=0.5)
    assert not [c for c in causes(row(**small)) if c.lever], "too small a share"


def test_an_expanded_attention_mask_is_counted_in_the_graph_and_names_its_lever():
    """Counted on a real dynamo graph: an SDPA call passed a mask broadcast along its last dimension
    (stride 0, as transformers 5.17 builds one while dynamo traces) and one passed a materialized mask.
    The cause (planted figures: the GPU profile cannot run here) names `workload.attention_mask=true`
    for the first and the math path's reduced precision once a mask is passed."""
    import torch
    import torch.nn.functional as F

    from orchestrator.analysis.causes import causes
    from orchestrator.core.result import COL
    from orchestrator.job.phases.graphs import expanded_masks

    counted: list[int] = []

    def count(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        counted.append(expanded_masks(gm))
        return gm.forward

    def attend(q: torch.Tensor, expand: bool) -> torch.Tensor:
        keep = torch.ones(q.shape[0], 1, q.shape[2], 1, dtype=torch.bool)  # strides as transformers' mask
        mask = keep.expand(-1, 1, -1, q.shape[2]) if expand else keep.repeat(1, 1, 1, q.shape[2])
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    q = torch.randn(2, 2, 8, 4)
    for expand in (True, False):
        torch._dynamo.reset()
        torch.compile(attend, backend=count)(q, expand)
    torch._dynamo.reset()
    assert counted == [1, 0]

    def row(**figures: object) -> pd.Series:
        return pd.Series({getattr(COL, k): v for k, v in figures.items()})

    as_matmuls = dict(
        mode="default", env_cuda="13.0", compiled_ms=12.0, num_sdp_reduced_math=False,
        eager_time_split={"matmul": 2.8, "attention": 0.45}, compiled_time_split={"matmul": 7.6},
        eager_attention_backend="cudnn", compiled_attention_backend="none fused",
    )  # fmt: skip
    expanded = dict(as_matmuls, graph_expanded_masks=12)
    (cause,) = [c for c in causes(row(**expanded, attention_mask=False)) if c.lever]
    assert cause.lever == "workload.attention_mask=true"
    assert "12 attention call(s) an expanded mask" in cause.text
    passed = [c.lever for c in causes(row(**expanded, attention_mask=True)) if c.lever]
    assert passed == ["bench.sdp_reduced_math=true"], "a mask passed already: the math path's precision next"
    unknown = [c.lever for c in causes(row(**as_matmuls)) if c.lever]
    assert unknown == ["bench.sdp_reduced_math=true"], "an older result, masks not counted: not named"
