"""Real models, measured right, on CPU with real transformers models of tiny configs (random weights,
offline): each family trains on its own loss and infers in eval mode; keyword inputs with a real
mask; dict outputs; a scalar loss used as it is; nested blocks compiled one by one; buffers compared
(a planted miscompile of a buffer update fails parity); an auxiliary figure that fails is a note."""

from __future__ import annotations

import pytest
import torch
from conftest import FAST, TESTS

from orchestrator.config.plan import build_plan
from orchestrator.core.failures import ConfigError
from orchestrator.job.worker import run_job
from orchestrator.launch.checks import check_plan
from workloads.inputs import loss_of

transformers = pytest.importorskip("transformers", reason="pip install '.[hf]' (make test installs it)")
USER = ["workload=module", f"workload.path={TESTS}", "workload.inputs=[[8,32]]"]
GRAPH_ONLY = ["compile.backend=aot_eager"]  # dynamo and AOT autograd for real, no C++ to build


def measure(tmp_path, compile_cache, *overrides: str) -> dict:
    shared = ["compile.cache=shared", f"compile.cache_dir={compile_cache}"]
    plan = build_plan([*FAST, *shared, *overrides], cwd=tmp_path)
    check_plan(plan)
    return run_job(plan.jobs[0])


@pytest.mark.parametrize(
    ("model", "task", "dropout"),
    [
        ("BertForMaskedLM", "train", True),
        ("BertForMaskedLM", "infer", False),
        ("T5ForConditionalGeneration", "train", True),
        ("ViTForImageClassification", "train", False),  # ViT's config has no dropout
        ("GPT2ForSequenceClassification", "infer", False),
    ],
)
def test_each_family_trains_on_its_own_loss_and_infers_in_eval_mode(
    tmp_path, compile_cache, model, task, dropout
):
    r = measure(
        tmp_path, compile_cache, "workload=hf", f"workload.model={model}", f"bench.task={task}", *GRAPH_ONLY
    )
    assert r["status"] == "ok", r["error"]
    assert r["model"] == model and r["parity_ok"] and r["graphs"] >= 1
    assert r["model_mode"] == ("train" if task == "train" else "eval")
    assert r["random_ops"] is dropout, "transformers' dropout draws in training, and is off in eval mode"
    assert r["blocks"] and "x" in r["blocks"], "the repeated blocks were found, wherever they sit"


def test_gqa_decoder_compiles_with_inductor_and_its_flops_are_counted(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload=hf", "workload.model=LlamaForCausalLM", "bench.dtype=bf16")
    assert r["status"] == "ok", r["error"]
    cfg = r["config"]["workload"]
    assert r["parity_ok"] and r["flops_per_step"] > 0 and r["flops_basis"].startswith("counted")
    assert r["blocks"] == "model.layers (2 x LlamaDecoderLayer)"
    assert cfg["model"] == "LlamaForCausalLM" and r["model_mode"] == "train"
    # Both layers' attention calls counted on both sides; eager's causal calls pass no mask, and
    # transformers builds one while dynamo traces before torch 2.14 (masking_utils' own comment).
    assert r["graph_attention"] == r["forward_attention"] == 2 and r["forward_masked_attention"] == 0, r
    if torch.__version__ < "2.14":
        assert r["graph_masked_attention"] == 2, r


def test_nested_blocks_are_compiled_one_by_one(tmp_path, compile_cache):
    r = measure(
        tmp_path,
        compile_cache,
        "workload=hf",
        "workload.model=LlamaForCausalLM",
        "compile.scope=blocks",
        *GRAPH_ONLY,
    )
    assert r["status"] == "ok", r["error"]
    assert r["scope"] == "blocks" and r["blocks"] == "model.layers (2 x LlamaDecoderLayer)"
    assert r["graphs"] == 1, "one compiled frame serves every block"


def test_named_blocks_and_a_bad_path_in_one_line(tmp_path, compile_cache):
    r = measure(
        tmp_path,
        compile_cache,
        *USER,
        "workload.target=user_models:Stacked",
        "workload.blocks=layers",
        "compile.scope=blocks",
        *GRAPH_ONLY,
    )
    assert r["status"] == "ok" and r["blocks"] == "layers (2 x MLP)", r["error"]
    with pytest.raises(ConfigError) as bad:  # before anything runs (a meta-device build), not a crash
        measure(tmp_path, compile_cache, *USER, "workload.target=user_models:Stacked", "workload.blocks=nope")
    assert "workload.blocks=nope is not a module" in str(bad.value)
    assert "repeated blocks: layers" in str(bad.value)


def test_keyword_inputs_with_a_real_mask_and_a_dict_output_train_on_its_loss(tmp_path, compile_cache):
    inputs = (
        "workload.inputs={input_ids: {shape: [4, 16], dtype: long, high: 100}, "
        "attention_mask: {shape: [4, 16], dtype: long, fill: 1}, "
        "labels: {shape: [4, 16], dtype: long, high: 100}}"
    )
    r = measure(
        tmp_path,
        compile_cache,
        "workload=module",
        f"workload.path={TESTS}",
        "workload.target=user_models:KeywordNet",
        inputs,
        *GRAPH_ONLY,
    )
    assert r["status"] == "ok", r["error"]
    assert r["parity_ok"] and r["batch_size"] == 4


def test_the_loss_rule():
    assert loss_of({"loss": torch.tensor(6.95), "logits": torch.ones(2)}).item() == pytest.approx(6.95)
    assert loss_of(torch.tensor(6.95)).item() == pytest.approx(6.95), "a scalar loss is used as it is"
    assert loss_of((torch.full((2, 2), 3.0),)).item() == 9.0, "else the mean of squares of the first tensor"
    bert = transformers.BertForMaskedLM(
        transformers.BertConfig(
            num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=50
        )
    )
    ids = torch.randint(0, 50, (2, 8))
    out = bert(input_ids=ids, labels=ids)
    assert loss_of(out) is out.loss, "a ModelOutput's own loss"


def test_a_factory_target_and_a_scalar_loss(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, *USER, "workload.target=user_models:make_mlp", "compile.mode=eager")
    assert r["status"] == "ok", r["error"]
    s = measure(
        tmp_path,
        compile_cache,
        *USER,
        "workload.target=user_models:ScalarOut",
        "compile.mode=eager",
        "bench.convergence_steps=2",
        "sweep.name=scalar",
    )
    assert s["status"] == "ok" and 6.0 < s["conv_eager_loss"][0] < 8.0, "7 + mean, not its square (~49)"


def test_inference_runs_the_model_in_eval_mode(tmp_path, compile_cache):
    r = measure(
        tmp_path,
        compile_cache,
        *USER,
        "workload.target=user_models:TrainingModeOnly",
        "bench.task=infer",
        *GRAPH_ONLY,
    )
    assert r["status"] == "ok" and r["model_mode"] == "eval", r["error"]


def test_buffers_are_compared_and_a_miscompiled_buffer_update_fails(tmp_path, compile_cache):
    ok = measure(tmp_path, compile_cache, *USER, "workload.target=user_models:RunningMean", *GRAPH_ONLY)
    assert ok["status"] == "ok" and ok["parity_ok"], ok["error"]
    assert ok["parity_buffers"] == 2 and ok["parity_buffer_err"] < 1e-6, "same start, same number of calls"
    for task in ("train", "infer"):
        bad = measure(
            tmp_path,
            compile_cache,
            *USER,
            "workload.target=user_models:RunningMeanMiscompiled",
            f"bench.task={task}",
            *GRAPH_ONLY,
        )
        assert bad["status"] == "parity_fail", (task, bad["error"])
        assert "worst: buffers" in bad["error"] and bad["parity_buffer_err"] > 0.1
        assert bad["parity_out_err"] < 1e-5, "the outputs alone agree"


def test_a_failing_flop_counter_is_a_note_not_a_crash(tmp_path, compile_cache):
    r = measure(
        tmp_path,
        compile_cache,
        *USER,
        "workload.target=user_models:PlantedFlopFailure",
        "bench.task=infer",
        *GRAPH_ONLY,
    )
    assert r["status"] == "ok", r["error"]
    assert "the counter failed (AssertionError: sdpa_flop_count" in r["flops_basis"]
    assert r["flops_basis"].startswith("formula") and r["flops_per_step"] == 2 * r["params"] * 8 * 32


def test_the_optimizer_step_compiled_too_says_so(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload=block", "compile.optimizer=true", *GRAPH_ONLY)
    assert r["status"] == "ok", r["error"]
    assert "compiled on the compiled side" in r["optimizer"] and r["compile_optimizer_s"] > 0
    plain = measure(tmp_path, compile_cache, "workload=block", *GRAPH_ONLY, "sweep.name=plain")
    assert "eager on both sides" in plain["optimizer"] and plain["compile_optimizer_s"] is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [
                "workload=module",
                f"workload.path={TESTS}",
                "workload.target=user_models:MLP",
                "workload.inputs=[[8,32]]",
                "workload.init_args={width: 3}",
            ],
            "workload.init_args.width is not a parameter of MLP; valid: dim, hidden",
        ),
        (
            [
                "workload=module",
                f"workload.path={TESTS}",
                "workload.target=user_models:MLP",
                "workload.inputs=[4,64]",
            ],
            "workload.inputs=[4, 64] is not valid",
        ),
        (
            [
                "workload=module",
                f"workload.path={TESTS}",
                "workload.target=user_models:MLP",
                "workload.inputs=[[8,32]]",
                "workload.vocab=0",
            ],
            "workload.vocab=0 is not valid; it must be >= 1",
        ),
        (["workload.target=user_models:MLP"], "workload.target is for workload=module (got workload=gpt)"),
        (
            ["workload=hf", "workload.model=BertForMaskedLN"],
            "not a transformers model class; did you mean BertForMaskedLM",
        ),
        (
            ["workload=hf", "workload.model=BertForMaskedLM", "+workload.config.no_such_key=1"],
            "workload.config.no_such_key is not a key of BertConfig",
        ),
        (["workload=hf", "workload.model=BertForMaskedLM", "workload.size=huge"], "is not an hf preset"),
    ],
)
def test_bad_model_input_is_one_line_naming_the_key(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=None) as e:
        check_plan(build_plan([*FAST, *overrides], cwd=tmp_path))
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_timm_without_timm_says_what_to_install(tmp_path):
    try:
        import timm  # noqa: F401
    except Exception:  # noqa: BLE001 (what a user without timm, or without a torchvision that loads, sees)
        with pytest.raises(
            ConfigError, match=r"workload=timm needs timm and a torchvision built for this torch"
        ):
            check_plan(build_plan([*FAST, "workload=timm", "workload.model=resnet18"], cwd=tmp_path))
    else:
        pytest.skip("timm imports here: its absence cannot be shown (the H200 run measures timm models)")


def test_the_harness_numerics_are_scoped_to_the_job():
    from orchestrator.job.setup.compile_settings import matmul_precision

    before = (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed(),
    )
    with matmul_precision("high", True):
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    after = (torch.get_float32_matmul_precision(), torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed())
    assert after == before
