"""T5 training parity, tensor by tensor (issue 33 point 5). Standalone: torch + transformers only.

Builds T5ForConditionalGeneration as the orchestrator's failing job did (`workload=hf
workload.size=base bench.task=train bench.dtype=bf16`: the `base` preset, batch 8 x 512, labels,
decoder inputs from the labels, use_cache off) and/or as PyTorch's harness does (`T5Config()`,
batch 4 x 1024, decoder_input_ids = input_ids, labels in [0, vocab-1), built on the CPU under seed
1337, then moved). For each build and each dropout handling it runs one forward+backward step
(bf16 autocast, fp32 weights, TF32 off, as both the job and the harness's accuracy mode) as:

  R   fp64 reference (model and inputs in float64, no autocast)
  E   eager (twice: E and E2, for eager's own run-to-run noise); Ex: eager with another seed
  A   aot_eager (the orchestrator's random-ops reference), first call (compiles) and second call
  C   inductor, first call (compiles) and second call

Dropout `on`: train mode, dropout as built, inductor with fallback_random=True, the same seed reset
before every call (the orchestrator's check_random_parity). Dropout `off`: model.eval() (no
dropout), grad on, no aot_eager. Per tensor (loss, logits, every parameter gradient by name) it
writes ||x - y|| / ||y|| (float64) for each pair, the CUDA generator's offset each call consumed,
the orchestrator's aggregate figure (all gradients at once) and PyTorch's harness rule per tensor.

    python t5_parity.py --device cuda --builds ours,harness --out DIR
    python t5_parity.py --device cpu --size tiny --builds ours,harness --out DIR   # a CPU test
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import math
import os
import sys
import time

import torch
from torch import nn

SEED = 1337  # the seed reset before every call (the harness's reset_rng_state value)
BASE = dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=32000, head_dim=64)  # workloads/hf_config.py
TINY = dict(layers=2, hidden=64, heads=4, ffn=128, vocab=1024, head_dim=16)


def log(*a: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def t5_config(kind: str, size: str):
    from transformers import T5Config

    cfg = T5Config()
    preset = TINY if size == "tiny" else (BASE if kind == "ours" else None)
    if preset:  # what workloads/hf_config.py's preset sets on a T5Config (through its attribute_map)
        cfg.num_layers = cfg.num_decoder_layers = preset["layers"]
        cfg.d_model, cfg.num_heads, cfg.d_ff = preset["hidden"], preset["heads"], preset["ffn"]
        cfg.vocab_size, cfg.d_kv = preset["vocab"], preset["head_dim"]
    if kind == "ours":
        cfg.use_cache = False  # workloads/hf_config.py
        if getattr(cfg, "decoder_start_token_id", None) is None:
            cfg.decoder_start_token_id = cfg.pad_token_id or 0  # workloads/hf_config.py
    return cfg


class Step(nn.Module):
    """The orchestrator's TaskLoss (forward returns the model's loss), plus the logits, detached."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, **kw):
        out = self.inner(**kw)
        return out.loss, out.logits.detach()


def build(kind: str, size: str, device: torch.device):
    from transformers import T5ForConditionalGeneration

    cfg = t5_config(kind, size)
    tiny = size == "tiny"
    if kind == "ours":
        batch, seq = (2, 32) if tiny else (8, 512)
        torch.manual_seed(0)  # bench.seed
        with device:  # the orchestrator initialises on the device
            inner = T5ForConditionalGeneration(cfg)
        vocab = cfg.vocab_size
        inputs = {
            "input_ids": torch.randint(0, vocab, (batch, seq), device=device),
            "labels": torch.randint(0, vocab, (batch, seq), device=device),
        }
    else:
        batch, seq = (2, 32) if tiny else (4, 1024)
        torch.manual_seed(1337)  # the harness's reset_rng_state in load_model
        inner = T5ForConditionalGeneration(cfg).to(device, dtype=torch.float32)
        # The harness sets every float config attribute with "drop" in its name to 1e-30 "so we can
        # check gradients without eliminating the dropout computation", but on a second config
        # object (a fresh config_cls()), after the model is built: it has no effect (below).
        inner.config.use_cache = False
        vocab = inner.config.vocab_size
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        inputs = {
            "input_ids": ids,
            "decoder_input_ids": ids,
            "labels": torch.randint(0, vocab - 1, (batch, seq), device=device),
        }
    inner.train()
    drops = sorted(
        {float(m.p) for m in inner.modules() if isinstance(m, nn.Dropout)}
        | {float(m.dropout) for m in inner.modules() if isinstance(getattr(m, "dropout", None), float)}
    )
    facts = {
        "kind": kind,
        "batch": batch,
        "seq": seq,
        "params": sum(p.numel() for p in inner.parameters()),
        "config": {
            k: getattr(cfg, k)
            for k in (
                "num_layers",
                "num_decoder_layers",
                "d_model",
                "num_heads",
                "d_ff",
                "vocab_size",
                "d_kv",
                "dropout_rate",
                "use_cache",
            )
        },
        "dropout_p_in_modules": drops,
        "attn_implementation": getattr(inner.config, "_attn_implementation", None),
    }
    return Step(inner), inputs, facts


def rng_offset(device: torch.device) -> int | str:
    if device.type == "cuda":
        s = torch.cuda.get_rng_state(device)
        return int.from_bytes(bytes(s[8:16].tolist()), "little")  # philox: seed (8 bytes), offset (8)
    return str(hash(bytes(torch.get_rng_state().tolist())) % 10**8)


def strip(name: str) -> str:
    return ".".join(p for p in name.split(".") if p not in ("_orig_mod", "inner"))


def run(model: nn.Module, inputs: dict, device: torch.device, amp: bool, seed: int | None = SEED) -> dict:
    """One forward+backward from zero gradients: loss, logits, gradients by name, RNG consumed."""
    model.zero_grad(set_to_none=True)
    if seed is not None:
        torch.manual_seed(seed)
    before = rng_offset(device)
    t0 = time.perf_counter()
    ctx = torch.autocast(device.type, dtype=torch.bfloat16) if amp else contextlib.nullcontext()
    with ctx:
        loss, logits = model(**inputs)
    loss.backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    after = rng_offset(device)
    out = {"loss": loss.detach().reshape(1), "logits": logits}
    for n, p in model.named_parameters():
        out["grad:" + strip(n)] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
    model.zero_grad(set_to_none=True)
    consumed = (after - before) if isinstance(before, int) else ("same" if after == before else "moved")
    return {"t": out, "rng_consumed": consumed, "s": time.perf_counter() - t0}


def rel(x: torch.Tensor, y: torch.Tensor) -> float:
    x64, y64 = x.detach().double(), y.detach().double().to(x.device)
    d = float(torch.linalg.vector_norm(x64 - y64))
    n = float(torch.linalg.vector_norm(y64))
    return d / max(n, 1e-30)


def rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double().to(a.device)))))


def harness_rule(ref: torch.Tensor, res: torch.Tensor, fp64: torch.Tensor | None, tol: float = 1e-2) -> bool:
    """torch._dynamo.utils.same for one float tensor as the harness calls it in training
    (tol 1e-2): allclose, else RMSE(res, fp64) <= m x RMSE(ref, fp64) + tol / 10."""
    if torch.allclose(ref.float(), res.float(), atol=tol, rtol=tol):
        return True
    if fp64 is None:
        return False
    m = 3.0 if res.dtype in (torch.float16, torch.bfloat16) or fp64.numel() < 1000 else 2.0
    return rmse(fp64, res) <= m * rmse(fp64, ref) + tol / 10


def compare(runs: dict[str, dict], pairs: list[tuple[str, str]], rule: list[tuple[str, str, str]]) -> dict:
    """Per pair: per-tensor errors, worst three, the orchestrator's aggregate over all gradients."""
    out = {}
    for a, b in pairs:
        if a not in runs or b not in runs:
            continue
        ta, tb = runs[a]["t"], runs[b]["t"]
        per = {k: rel(ta[k], tb[k]) for k in tb}
        grads = [k for k in tb if k.startswith("grad:")]
        num = sum(float((ta[k].double() - tb[k].double()).pow(2).sum()) for k in grads)
        den = sum(float(tb[k].double().pow(2).sum()) for k in grads)
        worst = sorted(per.items(), key=lambda kv: -(kv[1] if not math.isnan(kv[1]) else math.inf))[:3]
        out[f"{a} vs {b}"] = {
            "loss": per.get("loss"),
            "logits": per.get("logits"),
            "grads_all": math.sqrt(num) / max(math.sqrt(den), 1e-30),
            "grad_median": sorted(per[k] for k in grads)[len(grads) // 2] if grads else None,
            "worst3": worst,
            "per_tensor": per,
        }
    for ref, res, fp64 in rule:  # the harness's verdict per tensor
        if ref not in runs or res not in runs:
            continue
        tr, ts = runs[ref]["t"], runs[res]["t"]
        tf = runs[fp64]["t"] if fp64 in runs else {}
        fails = [k for k in tr if not harness_rule(tr[k], ts[k], tf.get(k))]
        out[f"harness rule: {res} against {ref} (fp64 {fp64})"] = {
            "tensors": len(tr),
            "fail": len(fails),
            "failing": fails[:10],
        }
    return out


def counters_snapshot() -> dict:
    from torch._dynamo.utils import counters

    keep = {}
    for group in ("stats", "inductor", "graph_break"):
        keep[group] = {str(k): v for k, v in counters[group].items() if isinstance(v, int | float)}
    return keep


def one_mode(
    kind: str, mode: str, base: nn.Module, inputs: dict, device: torch.device, facts: dict, deadline: float
) -> dict:
    import torch._inductor.config as ic
    from torch._dynamo.utils import counters

    log(f"{kind} dropout={mode}: start")
    torch._dynamo.reset()
    counters.clear()
    res: dict = {"runs": {}, "compile_s": {}}
    runs: dict[str, dict] = {}

    def prep(m: nn.Module) -> nn.Module:
        return m.train() if mode == "on" else m.eval()

    # fp64 reference (a copy of the weights in float64; inputs are integer ids)
    ref = prep(copy.deepcopy(base)).double()
    runs["R"] = run(ref, inputs, device, amp=False)
    del ref
    # eager twice, and once from another seed (what different dropout masks do)
    eager = prep(copy.deepcopy(base))
    runs["E"] = run(eager, inputs, device, amp=True)
    runs["E2"] = run(eager, inputs, device, amp=True)
    if mode == "on":
        runs["Ex"] = run(eager, inputs, device, amp=True, seed=SEED + 1)
    del eager
    with ic.patch(fallback_random=True):
        # the orchestrator's check: both copies compiled inside the patch, the same seed before each
        # first call (each first call compiles), aot_eager first
        a_model = torch.compile(prep(copy.deepcopy(base)), backend="aot_eager") if mode == "on" else None
        c_model = torch.compile(prep(copy.deepcopy(base)))
        if a_model is not None:
            runs["A1"] = run(a_model, inputs, device, amp=True)
            res["compile_s"]["A1"] = runs["A1"]["s"]
        log(f"{kind} dropout={mode}: inductor compile")
        runs["C1"] = run(c_model, inputs, device, amp=True)
        res["compile_s"]["C1"] = runs["C1"]["s"]
        res["counters_after_compile"] = counters_snapshot()
        if a_model is not None:
            runs["A2"] = run(a_model, inputs, device, amp=True)
        runs["C2"] = run(c_model, inputs, device, amp=True)
        runs["C3"] = run(c_model, inputs, device, amp=True)
    del a_model, c_model
    res["rng_consumed"] = {k: v["rng_consumed"] for k, v in runs.items()}
    res["step_s"] = {k: v["s"] for k, v in runs.items()}
    pairs = [
        ("C1", "A1"),
        ("C2", "A2"),  # (the orchestrator's comparison) first calls, second calls
        ("A1", "E"),
        ("A2", "E"),
        ("C1", "E"),
        ("C2", "E"),
        ("C3", "C2"),  # (a) compiled vs eager
        ("E2", "E"),
        ("Ex", "E"),  # eager noise; another seed
        ("E", "R"),
        ("E2", "R"),  # (b) eager vs fp64
        ("C1", "R"),
        ("C2", "R"),
        ("A1", "R"),
        ("A2", "R"),  # (c) compiled vs fp64
    ]
    rule = [("E", "C1", "R"), ("E", "C2", "R"), ("A1", "C1", "R"), ("A2", "C2", "R")]
    res["compare"] = compare(runs, pairs, rule)
    del runs
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    log(f"{kind} dropout={mode}: done")
    return res


def summary_lines(results: dict) -> list[str]:
    lines = []
    for key, r in results.items():
        if not isinstance(r, dict) or "compare" not in r:
            continue
        lines.append(f"== {key}: rng consumed {r['rng_consumed']}; compile s {r['compile_s']}")
        for pair, c in r["compare"].items():
            if pair.startswith("harness rule"):
                lines.append(f"  {pair}: {c['fail']} of {c['tensors']} fail {c['failing'][:3]}")
                continue
            w = ", ".join(f"{n} {e:.3g}" for n, e in c["worst3"])
            lo = c["logits"]
            lines.append(
                f"  {pair:10s} loss {c['loss']:.3g} logits {lo if lo is None else format(lo, '.3g')} "
                f"grads(all) {c['grads_all']:.3g} grad median {c['grad_median']:.3g} | worst: {w}"
            )
    return lines


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="full", choices=["full", "tiny"])
    p.add_argument("--builds", default="ours,harness")
    p.add_argument("--modes", default="on,off")
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=1e9, help="skip what would start after this")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = (
        False  # the job's default (highest) and the harness's accuracy mode
    )
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(False)
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    import transformers

    results: dict = {
        "env": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        }
    }
    for kind in args.builds.split(","):
        base, inputs, facts = build(kind, args.size, device)
        results[f"{kind}:facts"] = facts
        log(kind, json.dumps(facts))
        for mode in args.modes.split(","):
            if time.time() - start > args.budget_s:
                results[f"{kind}:{mode}"] = "skipped: budget"
                continue
            try:
                results[f"{kind}:{mode}"] = one_mode(
                    kind, mode, base, inputs, device, facts, start + args.budget_s
                )
            except Exception as e:  # noqa: BLE001 (keep what the other modes measured)
                import traceback

                traceback.print_exc()
                results[f"{kind}:{mode}"] = f"error: {type(e).__name__}: {e}"[:500]
            with open(os.path.join(args.out, "t5_parity.json"), "w") as f:
                json.dump(results, f, indent=1, default=str)
        del base, inputs
        gc.collect()
    lines = summary_lines(results)
    with open(os.path.join(args.out, "t5_parity.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    log(f"total {time.time() - start:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
