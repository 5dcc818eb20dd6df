"""Issue 56, item 2: why BERT's compiled graph runs no fused attention kernel where eager does.

BERT-base MLM inference, 16 x 512, bf16 autocast over fp32 weights (the tool's `bench.dtype=bf16`),
no attention mask passed (the tool's default). For each variant it records, from dynamo's own graph,
what every SDPA call receives (the mask: passed or not, dtype, shape, strides), asks PyTorch's own
dispatcher which fused kernel those exact tensors could use and why not (`can_use_*(debug=True)`),
then times the compiled and eager steps and names the attention kernels the profiler saw.

    python benchmarks/h100-best-setting/sdpa_why.py OUT_DIR      (CPU: tiny sizes, the plumbing only)
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch
import transformers
from torch.profiler import ProfilerActivity, profile

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
BATCH, SEQ = (16, 512) if CUDA else (2, 32)
ATTENTION_WORDS = ("flash", "fmha", "efficient", "cudnn", "attention", "softmax")


def build(weights_bf16: bool) -> torch.nn.Module:
    config = (
        transformers.BertConfig()
        if CUDA
        else transformers.BertConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
        )
    )
    config._attn_implementation = "sdpa"
    model = transformers.BertForMaskedLM(config).to(DEVICE).eval()
    return model.to(torch.bfloat16) if weights_bf16 else model


def describe(t: object) -> object:
    if isinstance(t, torch.Tensor):
        return {"dtype": str(t.dtype), "shape": list(t.shape), "stride": list(t.stride())}
    return repr(t)


def sdpa_calls(model: torch.nn.Module, inputs: dict, autocast: bool) -> list[dict]:
    """What each SDPA call in dynamo's graph receives (its fake tensors' dtype, shape, strides)."""
    calls: list[dict] = []

    def inspect(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        for node in gm.graph.nodes:
            if node.op == "call_function" and "scaled_dot_product_attention" in str(node.target):
                meta = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a for a in node.args]
                kw = {
                    k: (v.meta.get("example_value") if isinstance(v, torch.fx.Node) else v)
                    for k, v in node.kwargs.items()
                }
                calls.append(
                    {"args": [describe(a) for a in meta], "kwargs": {k: describe(v) for k, v in kw.items()}}
                )
                calls[-1]["_tensors"] = (meta, kw)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad(), torch.autocast(DEVICE, torch.bfloat16, enabled=autocast):
        torch.compile(model, backend=inspect)(**inputs)
    return calls


def why_not_fused(call: dict) -> dict:
    """PyTorch's own answer, for tensors like the graph's, to: could flash / efficient / cuDNN run?"""
    meta, kw = call.pop("_tensors")

    def real(t: object) -> object:
        if isinstance(t, torch.Tensor):
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=DEVICE)
        return t

    q, k, v = (real(t) for t in meta[:3])
    mask = real(kw.get("attn_mask", meta[3] if len(meta) > 3 else None))
    causal = bool(kw.get("is_causal", meta[5] if len(meta) > 5 else False))
    out: dict = {"mask": describe(mask) if mask is not None else None, "is_causal": causal}
    if not CUDA:
        return out
    params = torch.backends.cuda.SDPAParams(q, k, v, mask, 0.0, causal, False)
    for name in ("flash", "efficient", "cudnn"):
        check = getattr(torch.backends.cuda, f"can_use_{name}_attention")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            ok = check(params, True)
        out[name] = {"ok": bool(ok), "why_not": [str(w.message) for w in said]}
    out["chosen"] = int(torch._fused_sdp_choice(q, k, v, mask, 0.0, causal))
    return out


def time_ms(fn, inputs: dict, autocast: bool, steps: int) -> float:
    with torch.no_grad(), torch.autocast(DEVICE, torch.bfloat16, enabled=autocast):
        for _ in range(3):
            fn(**inputs)
        if not CUDA:
            return float("nan")
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            fn(**inputs)
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / steps


def attention_kernels(fn, inputs: dict, autocast: bool) -> dict:
    """The profiler's kernels whose names speak of attention or softmax, ms a step (3 steps)."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    with (
        torch.no_grad(),
        torch.autocast(DEVICE, torch.bfloat16, enabled=autocast),
        profile(activities=acts) as prof,
    ):
        for _ in range(3):
            fn(**inputs)
        if CUDA:
            torch.cuda.synchronize()
    found = {}
    for event in prof.key_averages():
        if any(w in event.key.lower() for w in ATTENTION_WORDS):
            us = getattr(event, "device_time_total", 0) or getattr(event, "cuda_time_total", 0)
            found[event.key[:120]] = round(us / 3 / 1000, 4)
    return dict(sorted(found.items(), key=lambda kv: -kv[1])[:8])


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": DEVICE,
        "gpu": torch.cuda.get_device_name() if CUDA else None,
        "batch": BATCH,
        "seq": SEQ,
        "variants": [],
    }
    ids = torch.randint(0, 30000, (BATCH, SEQ), device=DEVICE)
    variants = [
        ("autocast bf16, no mask passed (the tool's default)", False, False),
        ("autocast bf16, attention_mask of ones", False, True),
        ("bf16 weights, no autocast, no mask passed", True, False),
        ("bf16 weights, no autocast, attention_mask of ones", True, True),
    ]
    for name, weights_bf16, with_mask in variants:
        model = build(weights_bf16)
        inputs = {"input_ids": ids} | ({"attention_mask": torch.ones_like(ids)} if with_mask else {})
        autocast = not weights_bf16
        row: dict = {"variant": name}
        calls = sdpa_calls(model, inputs, autocast)
        row["graph_sdpa_calls"] = len(calls)
        row["first_call"] = {k: v for k, v in calls[0].items() if k != "_tensors"} if calls else None
        row["fused_check"] = why_not_fused(calls[0]) if calls else None
        torch._dynamo.reset()
        compiled = torch.compile(model)
        row["compiled_ms"] = time_ms(compiled, inputs, autocast, 20)
        row["eager_ms"] = time_ms(model, inputs, autocast, 20)
        row["compiled_attention_kernels"] = attention_kernels(compiled, inputs, autocast)
        row["eager_attention_kernels"] = attention_kernels(model, inputs, autocast)
        report["variants"].append(row)
        print(json.dumps(row, indent=1), flush=True)
        (out / "sdpa_why.json").write_text(json.dumps(report, indent=1))
        del model, compiled
        if CUDA:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/sdpa_why"))
