"""`bench.task=generate`: real tiny decoders (transformers' Llama with grouped-query attention and
GPT-2, and the built-in gpt) served in one shared sweep by the real CLI and inductor on the CPU; and
each bad value refused before anything runs, in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import FAST, run_cli

from orchestrator.__main__ import main

PROMPT, NEW = 8, 4
SIDE_FIGURES = (
    "ttft_ms",
    "first_request_s",
    "first_ttft_ms",
    "decode_p50_ms",
    "decode_p90_ms",
    "decode_tokens_per_s",
    "e2e_ms",
)


@pytest.fixture(scope="module")
def served(tmp_path_factory, compile_cache):
    """One sweep of four jobs: Llama (GQA: the tiny preset has 4 heads, 2 key-value heads) on a
    static cache, GPT-2 on a dynamic one, the built-in gpt on a static one, and the built-in gpt on a
    dynamic cache with compile.dynamic=false for 10 tokens (past dynamo's recompile limit of 8)."""
    cwd = tmp_path_factory.mktemp("generate")
    points = (
        "[['generate.cache=dynamic','workload=hf','workload.model=GPT2LMHeadModel'],['workload=gpt'],"
        "['workload=gpt','generate.cache=dynamic','compile.dynamic=false','generate.new_tokens=10']]"
    )
    args = [
        "bench=quick", "bench.task=generate", "workload=choice(hf)", "workload.size=tiny",
        "workload.model=choice(LlamaForCausalLM)", f"sweep.points={points}",
        f"generate.prompt_len={PROMPT}", f"generate.new_tokens={NEW}", "bench.measure_peaks=true", *FAST,
        "compile.cache=shared", f"compile.cache_dir={compile_cache}",
    ]  # fmt: skip
    proc = run_cli(args, cwd=cwd, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep = cwd / "sweeps" / "default"
    rows = [json.loads(p.read_text()) for p in (sweep / "jobs").glob("*/result.json")]
    verdict = json.loads((sweep / "verdict.json").read_text())
    return proc, rows, verdict


def _row(rows: list[dict], workload: str, cache: str, model: str | None = None) -> dict:
    found = [r for r in rows if r["workload"] == workload and r["kv_cache"] == cache and r["model"] == model]
    assert len(found) == 1, [(r["workload"], r["model"], r["kv_cache"]) for r in rows]
    return found[0]


def test_every_decoder_generates_with_teacher_forced_parity_and_every_figure(served):
    proc, rows, _ = served
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), [(r["label"], r["error"]) for r in rows]
    for r in rows:
        assert r["task"] == "generate" and r["prompt_len"] == PROMPT and r["compiles"] == "both"
        n = r["new_tokens"]
        # Parity: every generated token's logits, both sides fed eager's tokens, within the dtype's limit.
        assert len(r["gen_parity_errors"]) == n and r["parity_ok"] is True
        assert max(r["gen_parity_errors"]) <= r["parity_tol"] == 1e-4 and r["parity_err"] > 0
        # The fp64 reference, fed the sides' tokens and positions: eager's own error is fp32's rounding.
        assert r["parity_reference"] == "fp64" and 0 < r["parity_eager_err"] < 1e-5
        assert r["parity_err"] <= r["parity_limit"] or r["parity_rule"] == "within tol of eager"
        assert r["parity_worst"][0]["tensor"].startswith("logits of token"), r["parity_worst"]
        for side in ("eager", "compiled"):
            for figure in SIDE_FIGURES:
                assert r[f"{side}_{figure}"] > 0, (r["label"], side, figure)
        assert r["compiled_decode_p90_ms"] >= r["compiled_decode_p50_ms"]
        # The headline: per-token decode latency, with its CI; a step is one decode token of the batch.
        assert r["speedup"] > 0 and r["speedup_ci_low"] <= r["speedup"] <= r["speedup_ci_high"]
        assert r["seq_len"] == 1 and r["compiled_tokens_per_s"] > 0
        assert r["gen_ttft_speedup"] > 0 and r["gen_cache_gib"] > 0
        assert 0 < r["gen_e2e_ci_low"] <= r["gen_e2e_speedup"] <= r["gen_e2e_ci_high"]
        assert r["compiled_first_ttft_ms"] > r["compiled_ttft_ms"], "the cold prefill compiles"
        assert r["gen_compile_s"] > 0 and r["compile_s"] == r["gen_compile_s"] and r["gen_frames"] >= 2
        # MBU: the bytes a decode step reads over its time, against this CPU's measured copy bandwidth;
        # no datasheet for a CPU, so that figure stays null (job/phases/limits.py; test_limits.py counts).
        assert r["gen_bandwidth_basis"].startswith("measured: copy") and r["gen_spec_tb_s"] is None
        assert r["gen_decode_bytes"] > r["gen_weight_bytes"] > 0 and r["gen_kv_bytes_per_position"] > 0
        for side in ("eager", "compiled"):
            mbu = (
                r["gen_decode_bytes"] / (r[f"{side}_decode_p50_ms"] / 1000) / (r["gen_bandwidth_tb_s"] * 1e12)
            )
            assert r[f"{side}_decode_mbu"] == pytest.approx(mbu) and r[f"{side}_decode_mbu_spec"] is None
            assert r[f"{side}_prefill_mfu"] > 0
    assert "kv_cache" in proc.stdout and "verdict " in proc.stdout, proc.stdout
    assert "compiled decode at" in proc.stdout and "of measured bandwidth" in proc.stdout, proc.stdout
    page = Path(proc.stdout.split("dashboard: ")[-1].split()[0]).read_text()
    assert "compiled decode at" in page, "the dashboard's answers say it too"


def test_a_dynamic_cache_recompiles_where_a_static_one_does_not(served):
    _, rows, _ = served
    for static in (_row(rows, "hf", "static", "LlamaForCausalLM"), _row(rows, "gpt", "static")):
        assert static["gen_frames"] == 2 and static["gen_recompiles"] == 0, static["gen_recompile_reasons"]
        assert static["step_recompiles"] == 0 and static["gen_recompile_limit"] is None
    dynamic = _row(rows, "hf", "dynamic", "GPT2LMHeadModel")  # the key length grows every token
    assert dynamic["gen_recompiles"] >= 1 and "size mismatch" in dynamic["gen_recompile_reasons"][0]
    assert 0 < dynamic["gen_recompile_s"] < dynamic["gen_compile_s"], "what the recompiles cost, of the whole"


def test_hitting_the_recompile_limit_is_said_and_named_first(served):
    _, rows, verdict = served
    hit = _row(rows, "gpt", "dynamic")
    assert hit["new_tokens"] == 10 and hit["dynamic"] is False
    assert "recompile_limit" in hit["gen_recompile_limit"] and hit["gen_recompiles"] >= 7
    answer = next(v for v in verdict["models"] if v["job_id"] == hit["job_id"])
    first = answer["causes"][0]
    assert first["kind"] == "recompile_limit" and first["lever"] == "generate.cache=static", first
    assert any("recompile limit hit" in risk for risk in answer["risks"]), answer["risks"]


GENERATE = ["bench.task=generate"]
REFUSED = [
    ([*GENERATE, "generate.new_tokens=0"], "generate.new_tokens=0 is not valid; it must be >= 1"),
    (
        [
            *GENERATE,
            "workload=hf",
            "workload.model=LlamaForCausalLM",
            "generate.prompt_len=120",
            "generate.new_tokens=16",
        ],
        "generate.prompt_len=120 + generate.new_tokens=16 = 136 is past LlamaForCausalLM's "
        "max_position_embeddings at workload.size=tiny (128)",
    ),  # fmt: skip
    (
        [*GENERATE, "generate.prompt_len=2040", "generate.new_tokens=16"],
        "is past the built-in gpt's positions",
    ),
    (
        [*GENERATE, "workload=hf", "workload.model=BertForMaskedLM"],
        "workload.model=BertForMaskedLM is not one",
    ),
    (  # an encoder family's LM head: a decoder only with is_decoder set
        [*GENERATE, "workload=hf", "workload.model=BertLMHeadModel"],
        "BertLMHeadModel is an encoder here (its config's is_decoder is false",
    ),
    (
        [*GENERATE, "workload=hf", "workload.model=T5ForConditionalGeneration"],
        "T5ForConditionalGeneration is an encoder-decoder (seq2seq generation is not measured yet)",
    ),
    ([*GENERATE, "workload=block"], "needs workload=gpt or workload=hf (a causal LM), got workload=block"),
    ([*GENERATE, "parallel=ddp"], "bench.task=generate needs parallel=none"),
    ([*GENERATE, "bench.processes=3"], "bench.task=generate measures in the job's one process"),
    (["generate.cache=paged"], "generate.cache='paged' is not valid; choose one of: static, dynamic"),
    (
        [*GENERATE, "generate.cache=dynamic", "compile.mode=reduce-overhead"],
        "generate.cache=dynamic with compile.mode=reduce-overhead: CUDA graphs would replay",
    ),
]


@pytest.mark.parametrize("overrides,message", REFUSED, ids=[" ".join(o) for o, _ in REFUSED])
def test_bad_generation_values_are_refused_in_one_line(overrides, message, capsys, tmp_path):
    code = main([*overrides, f"sweep.dir={tmp_path / 's'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err, err
    assert message in err, err
    assert not (tmp_path / "s").exists(), "nothing may be created before the config is valid"


def test_a_cache_used_wrongly_fails_before_anything_is_timed():
    """The cache's check: the built-in gpt's prefill and decode step over its static cache give the
    logits of a forward without a cache; a decoder that writes the cache one position off does not."""
    import torch

    from orchestrator.config.schema import Config
    from orchestrator.job.context import JobContext
    from orchestrator.job.phases.generation import GenSide
    from orchestrator.job.phases.generation_checks import check_cache_path, reference_of
    from workloads import build_workload
    from workloads.decoding import GPTDecoder

    cfg = Config()
    wl = build_workload(cfg.workload, "generate", torch.device("cpu"))
    ctx = JobContext(cfg, wl, torch.device("cpu"))
    prompt = wl.make_inputs(PROMPT)[0]
    pos = [torch.arange(PROMPT)] + [torch.tensor([PROMPT + i]) for i in range(NEW - 1)]

    class OneOff(GPTDecoder):
        def forward(self, ids, cache, pos):
            return super().forward(ids, cache, pos + 1)

    for decoder, fails in ((GPTDecoder, False), (OneOff, True)):
        d = decoder(wl.model, "static", PROMPT + NEW + 1, wl.batch_size, torch.float32)
        side, ref = GenSide("eager", d.forward, d.forward, d.new_cache()), reference_of(ctx, d)
        assert ref is not None and ref.name == "fp64"
        if fails:
            with pytest.raises(
                RuntimeError, match="the KV cache path disagrees with a forward without a cache"
            ):
                check_cache_path(ctx, d, side, prompt, pos, ref)
        else:
            check_cache_path(ctx, d, side, prompt, pos, ref)


def test_logits_are_judged_by_eagers_own_error_against_the_reference():
    """bf16 weights put two correct paths' logits as far apart as the tolerance (a 1B Llama: 0.028 to
    0.034 on the H200): a compiled side as near the upcast reference as eager passes although it is
    past the tolerance from eager; one three times further off than the rule allows fails."""
    import torch

    from orchestrator.job.phases.generation_checks import judged

    g = torch.Generator().manual_seed(0)
    truth = torch.randn(4, 1000, generator=g, dtype=torch.float64)
    noisy = lambda scale: truth + scale * torch.randn(truth.shape, generator=g, dtype=torch.float64)  # noqa: E731
    eager, compiled, wrong = noisy(0.04), noisy(0.08), noisy(0.5)
    fine = judged(compiled, eager, truth, 0.03, 3.0)
    assert fine["close"] > 0.03 and fine["ok"] and not fine["by_tol"], fine
    assert not judged(compiled, eager, truth, 0.03, 1.0)["ok"], "the multiplier sets the limit"
    assert not judged(compiled, eager, None, 0.03, 3.0)["ok"], "without a reference the tolerance alone"
    bad = judged(wrong, eager, truth, 0.03, 3.0)
    assert bad["err"] > bad["limit"] and not bad["ok"], bad
    nan = compiled.clone()
    nan[0, 0] = float("nan")
    assert judged(nan, eager, truth, 0.03, 3.0)["margin"] == math.inf, "NaN never passes, and ranks worst"


def test_bf16_generation_serves_bf16_weights_without_autocast():
    """bf16 generation casts the weights (as servers load an LLM) and fills a static cache whose keys
    and values are both bf16: under autocast over fp32 weights Llama's keys leave RoPE in fp32, and
    transformers 5.17's static cache, which gives the values its keys' dtype, failed on the H200.
    The control (compile.mode=eager): this is the cache path, not the compiler."""
    import torch

    from orchestrator.config.schema import Config, WorkloadName
    from orchestrator.job.context import JobContext
    from orchestrator.job.phases.generation import run_generation
    from workloads import build_workload

    cfg = Config()
    cfg.workload.name, cfg.workload.model = WorkloadName["hf"], "LlamaForCausalLM"
    cfg.bench.dtype, cfg.bench.task, cfg.bench.repeats = "bf16", "generate", 2
    cfg.compile.mode, cfg.generate.prompt_len, cfg.generate.new_tokens = "eager", PROMPT, NEW
    wl = build_workload(cfg.workload, "generate", torch.device("cpu"))
    ctx = JobContext(cfg, wl, torch.device("cpu"))
    run_generation(ctx)
    assert {p.dtype for p in wl.model.parameters()} == {torch.bfloat16}
    floats = [b for b in wl.model.buffers() if b.is_floating_point()]
    assert floats and all(b.dtype == torch.float32 for b in floats), "RoPE's inv_freq stays fp32"
    c = wl.model.config
    per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    bf16_bytes = 2 * per_token * wl.batch_size * (PROMPT + NEW)  # keys and values, 2 bytes each
    assert ctx.result.generation.gen_cache_gib * 2**30 == bf16_bytes
    assert ctx.result.parity.parity_ok is True


def test_decoder_heads_are_told_from_encoder_heads_by_what_their_classes_say():
    """An encoder family's LM head asks for is_decoder in its own __init__ (BERT, RoBERTa); a decoder
    whose config merely holds is_decoder false (GPT-NeoX), and a seq2seq family's decoder-only head
    that sets is_encoder_decoder false itself (Bart), are decoders."""
    import transformers

    from orchestrator.core.failures import ConfigError
    from workloads.decoding import check_causal_lm

    for name in ("GPTNeoXForCausalLM", "BartForCausalLM", "LlamaForCausalLM"):
        cls = getattr(transformers, name)
        check_causal_lm(cls, cls.config_class())
    for name in ("BertLMHeadModel", "RobertaForCausalLM"):
        cls = getattr(transformers, name)
        with pytest.raises(ConfigError, match="is an encoder here"):
            check_causal_lm(cls, cls.config_class())
