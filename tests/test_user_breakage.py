"""When a user's model breaks: where in their code and where the whole traceback is (through a real
sweep, its log, `status` and the dashboard: test_faults.py); models that used to crash the tool (built
in bf16, one dict argument, transformers classes beyond the README's list); bad model inputs refused
before anything runs (how much of a model its graphs hold: test_verdict.py). Real compiles
(aot_eager where the test is not about kernels), real transformers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import FAST, TESTS, run_cli

from orchestrator.config.plan import build_plan
from orchestrator.core.failures import ConfigError
from orchestrator.job.worker import run_job
from orchestrator.launch.checks import check_plan
from orchestrator.results.text import format_cell

USER = ["workload=module", f"workload.path={TESTS}"]
GRAPH_ONLY = ["compile.backend=aot_eager"]  # dynamo and AOT autograd for real, no C++ to build
USER_MODELS = str(TESTS / "user_models.py")


def _line_of(text: str) -> int:
    """The line of tests/user_models.py that holds `text`."""
    return next(i for i, line in enumerate(Path(USER_MODELS).read_text().splitlines(), 1) if text in line)


def measure(tmp_path, compile_cache, *overrides: str) -> dict:
    shared = ["compile.cache=shared", f"compile.cache_dir={compile_cache}"]
    plan = build_plan([*FAST, *shared, *GRAPH_ONLY, *overrides], cwd=tmp_path)
    check_plan(plan)
    return run_job(plan.jobs[0])


def test_a_compile_error_names_the_line_dynamo_was_tracing(tmp_path, compile_cache):
    """In-process (no stderr log of its own): the whole traceback goes to jobs/<id>/traceback.txt.
    A crash through a real sweep, its log, `status` and the dashboard: test_faults.py."""
    overrides = [*USER, "workload.target=user_models:PrintingNet", "workload.inputs=[[8,32]]"]
    r = measure(tmp_path, compile_cache, *overrides, "compile.fullgraph=true", "bench.task=infer")
    assert r["status"] == "compile_error", r["error"]
    broke_at = int(re.search(r":(\d+) \(forward\)$", r["error_where"])[1])
    assert r["error_where"].startswith(USER_MODELS), r["error_where"]
    assert broke_at in (_line_of('print("forward ran")'), _line_of("scale = y.abs().mean().item()"))
    log = Path(r["error_log"])
    assert log.name == "traceback.txt" and "from user code" in log.read_text()


def test_a_model_built_in_bf16_is_judged_as_bf16_and_its_failed_reference_sinks_nothing(
    tmp_path, compile_cache
):
    r = measure(
        tmp_path, compile_cache, *USER, "workload.target=user_models:BuiltInBf16", "workload.inputs=[[8,32]]"
    )
    assert r["status"] == "ok", r["error"]
    assert r["dtype"] == "fp32" and r["compute_dtype"] == "bf16" and r["parity_tol"] == pytest.approx(3e-2)
    assert r["parity_ok"] and r["parity_reference"] == "eager"
    assert "fp64 reference could not run" in r["parity_note"] and "judged against eager" in r["parity_note"]
    assert r["eager_ms"] > 0 and r["speedup"] > 0, "the timings are kept"
    assert format_cell(r, "dtype") == "fp32 (computes bf16)"


@pytest.mark.parametrize(
    "inputs",
    [
        "workload.make_inputs=user_models:one_dict",
        "workload.inputs=[{x: [8,32], scale: {shape: [8,1], fill: 1}}]",
    ],
)
def test_one_dict_argument_is_passed_as_it_is(tmp_path, compile_cache, inputs):
    r = measure(tmp_path, compile_cache, *USER, "workload.target=user_models:TakesOneDict", inputs)
    assert r["status"] == "ok", r["error"]
    assert r["parity_ok"] and r["batch_size"] == 8 and r["graphs"] >= 1


def test_gpt2_with_labels_breaks_on_transformers_logging_call(tmp_path, compile_cache):
    """The GPT2LMHeadModel training break seen on the H200 (`step_unsupported`, modeling_gpt2.py):
    with labels, transformers' `loss_function` logs a warning (`loss_type=None` is not a loss it
    knows for a `*LMHeadModel`), and dynamo cannot trace a logging call. Labels make it, in training
    and in inference alike: inference with labels is the cheaper test of it (no backward to compile)."""
    labels = ["bench.task=infer", "workload.labels=true", "bench.parity=false"]
    r = measure(tmp_path, compile_cache, "workload=hf", "workload.model=GPT2LMHeadModel", *labels)
    assert r["status"] == "ok", r["error"]
    assert r["graph_breaks"] >= 1, r["break_reasons"]
    reason = r["break_reasons"][0]
    assert "logging.Logger" in reason["reason"] and "loss_type" in reason["reason"], reason
    assert "modeling_gpt2.py" in reason["where"]


@pytest.mark.parametrize(
    ("model", "task"),
    [
        ("WhisperForConditionalGeneration", "infer"),
        ("CLIPModel", "train"),
        ("Phi3ForCausalLM", "infer"),
        ("SiglipModel", "infer"),  # its text projection follows the tiny hidden size (issue 59)
    ],
)
def test_speech_vision_text_and_pad_id_families_run_at_tiny(tmp_path, compile_cache, model, task):
    """Whisper gets log-mel features, CLIP ids beside pixel values (and its contrastive loss), and a
    pad id past the tiny vocabulary (Phi-3's 32000, Whisper's 50256) is moved inside it."""
    r = measure(tmp_path, compile_cache, "workload=hf", f"workload.model={model}", f"bench.task={task}")
    assert r["status"] == "ok", r["error"]
    assert r["parity_ok"] and r["graphs"] >= 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["workload=hf", "workload.model=BertForMaskedLM", "+workload.config={num_hidden_layers: -1}"],
            "workload.config.num_hidden_layers=-1 is not valid; it must be an integer >= 1",
        ),
        (
            ["workload=hf", "workload.model=BertForMaskedLM", "+workload.config={vocab_size: 0}"],
            "workload.config.vocab_size=0 is not valid",
        ),
        (
            ["workload=hf", "workload.model=BertForMaskedLM", "+workload.config={num_hiden_layers: 3}"],
            "is not a key of BertConfig; did you mean num_hidden_layers?",
        ),
        (
            ["compile.scope=blocks", "workload.blocks=no.such.path"],
            "workload.blocks=no.such.path is not a module",
        ),
        (
            ["workload=hf", "workload.model=BertForMaskedLM", "workload.blocks=bert.encoder.layers"],
            "did you mean bert.encoder.layer",
        ),
        (
            ["workload=hf", "workload.model=BertForMaskedLM", "workload.inputs=[[8,32]]"],
            "workload.inputs is for workload=module (got workload=hf); it makes its own inputs",
        ),
        (
            ["workload=hf", "workload.model=NoSuchModel"],
            "is not a transformers model class; e.g. BertForMaskedLM",
        ),
        (["workload=hf", "workload.model=LlavaForConditionalGeneration"], "needs image placeholder tokens"),
        (["workload=hf", "workload.model=Wav2Vec2ForCTC"], "needs `input_values` as its input"),
        (["compile.mode=default,"], "compile.mode: cannot parse 'compile.mode=default,' (a comma list needs"),
    ],
)
def test_bad_model_input_is_refused_in_one_line_before_anything_runs(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as e:
        check_plan(build_plan([*FAST, *overrides], cwd=tmp_path))
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "sweeps").exists(), "nothing created"


def test_a_bad_blocks_path_is_exit_2_and_creates_nothing(tmp_path):
    proc = run_cli(
        ["workload=hf", "workload.model=BertForMaskedLM", "workload.blocks=bert.encoder.layers"], tmp_path
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "workload.blocks=bert.encoder.layers" in proc.stderr and not (tmp_path / "sweeps").exists()
