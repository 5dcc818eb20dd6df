"""Which difference between t5_parity.py's 'ours' build and t5_where.py's 12-layer run gives the 0.33?
(issue 33 point 5, after call 3). Standalone: torch + transformers, and t5_parity.py beside it.

Call 1 (`t5_parity.py --builds ours`) measured our random-ops check C1 vs A1 (inductor with
fallback_random against aot_eager, dropout on) at 0.33 on gradients, 0.19 on logits. Call 3
(`t5_where.py --layers 12`, same width, batch, seeds and inputs) measured 0.031 / 0.005. This runs
the 'ours' build of t5_parity.py (its config, its build, its step) once per variant, each variant
switching on one of the differences read in the two scripts:

  base        t5_parity.py --builds ours, dropout on, as in call 1 (R, E, E2, Ex, then A1 C1 A2 C2 C3)
  hs          the model is called with output_hidden_states=True and every encoder and decoder
              hidden state is returned (detached) beside the loss and logits, as t5_where.py does
  cudnn_tf32  torch.backends.cudnn.allow_tf32 left at its default (True); t5_parity.py sets False,
              t5_where.py does not touch it
  attn        config._attn_implementation = "sdpa" set before building, as t5_where.py does
              (t5_parity.py lets transformers choose; it chose sdpa in call 1)
  proc        t5_where.py's procedure: no fp64 (R) or other-seed (Ex) step before compiling, and no
              CUDA generator read or synchronize inside the step
  noreorder   not a difference between the scripts, a probe of one mechanism: inductor with
              reorder_for_peak_memory and reorder_for_locality off (both are on by default)
  where       hs + cudnn_tf32 + attn + proc (t5_where.py's run, on t5_parity.py's build)

A variant may join several with '+', e.g. `hs+noreorder`. Every variant rebuilds the model from seed 0
(the same weights and inputs; their checksums are recorded) and resets dynamo. Per variant it
writes the pairs C1 vs A1, C2 vs A2, A1 vs E, C1 vs E, E2 vs E, Ex vs E, E vs R (loss, logits,
all-gradient aggregate, gradient median, worst three gradients, hidden states where returned) and,
per call, a self-check: the cross entropy of the returned logits against the labels, relative to
the returned loss (are the logits returned the ones the loss was computed from?).

    python t5_switch.py --device cuda --variants base,hs --out DIR
    python t5_switch.py --device cpu --size tiny --variants base,hs --out DIR   # a CPU test
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t5_parity as tp  # noqa: E402

ATOMS = ("hs", "cudnn_tf32", "attn", "proc", "noreorder")
ALIASES = {"base": (), "where": ("hs", "cudnn_tf32", "attn", "proc")}


def atoms(variant: str) -> tuple[str, ...]:
    out: list[str] = []
    for part in variant.split("+"):
        if part in ALIASES:
            out += ALIASES[part]
        elif part in ATOMS:
            out.append(part)
        else:
            raise SystemExit(f"unknown switch {part!r}: use {sorted(ATOMS + tuple(ALIASES))}")
    return tuple(dict.fromkeys(out))


class StepHS(nn.Module):
    """t5_where.py's step: loss, logits and every hidden state, detached."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, **kw):
        out = self.inner(**kw, output_hidden_states=True)
        hs = [h.detach() for h in out.encoder_hidden_states] + [h.detach() for h in out.decoder_hidden_states]
        return out.loss, out.logits.detach(), hs


def build(size: str, device: torch.device, sw: tuple[str, ...]):
    """t5_parity.build('ours', ...) with the switches that act on the build."""
    from transformers import T5ForConditionalGeneration

    cfg = tp.t5_config("ours", size)
    if "attn" in sw:
        cfg._attn_implementation = "sdpa"
    batch, seq = (2, 32) if size == "tiny" else (8, 512)
    torch.manual_seed(0)  # bench.seed
    with device:
        inner = T5ForConditionalGeneration(cfg)
    vocab = cfg.vocab_size
    inputs = {
        "input_ids": torch.randint(0, vocab, (batch, seq), device=device),
        "labels": torch.randint(0, vocab, (batch, seq), device=device),
    }
    inner.train()
    with torch.no_grad():
        wsum = sum(float(p.double().sum()) for p in inner.parameters())
    facts = {
        "batch": batch,
        "seq": seq,
        "params": sum(p.numel() for p in inner.parameters()),
        "weights_sum": wsum,
        "input_ids_sum": int(inputs["input_ids"].sum()),
        "labels_sum": int(inputs["labels"].sum()),
        "attn_implementation": getattr(inner.config, "_attn_implementation", None),
        "n_layers": cfg.num_layers,
    }
    step = StepHS(inner) if "hs" in sw else tp.Step(inner)
    return step, inputs, facts


def run(model, inputs, device, amp: bool, seed: int, rng_read: bool) -> dict:
    """t5_parity.run, plus hidden states where returned and the loss-from-logits self-check."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    before = tp.rng_offset(device) if rng_read else None
    t0 = time.perf_counter()
    ctx = torch.autocast(device.type, dtype=torch.bfloat16) if amp else contextlib.nullcontext()
    with ctx:
        outs = model(**inputs)
    loss, logits = outs[0], outs[1]
    hs = outs[2] if len(outs) > 2 else []
    loss.backward()
    if rng_read and device.type == "cuda":
        torch.cuda.synchronize(device)
    after = tp.rng_offset(device) if rng_read else None
    s = time.perf_counter() - t0
    t = {"loss": loss.detach().reshape(1), "logits": logits}
    for i, h in enumerate(hs):
        t[f"hs:{i}"] = h
    for n, p in model.named_parameters():
        t["grad:" + tp.strip(n)] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        lg = logits.detach()
        ce = torch.nn.functional.cross_entropy(
            lg.reshape(-1, lg.shape[-1]).to(torch.float32 if lg.dtype != torch.float64 else lg.dtype),
            inputs["labels"].reshape(-1),
        )
    lv = float(loss.detach())
    selfcheck = abs(float(ce) - lv) / max(abs(lv), 1e-30)
    if rng_read:
        consumed = (after - before) if isinstance(before, int) else ("same" if after == before else "moved")
    else:
        consumed = "not read"
    return {"t": t, "rng_consumed": consumed, "s": s, "loss_from_logits_rel": selfcheck}


def one_variant(variant: str, size: str, device: torch.device) -> dict:
    import torch._inductor.config as ic
    from torch._dynamo.utils import counters

    sw = atoms(variant)
    t_start = time.time()
    tp.log(f"variant {variant} {sw}: start")
    torch.backends.cudnn.allow_tf32 = "cudnn_tf32" in sw
    torch._dynamo.reset()
    counters.clear()
    base, inputs, facts = build(size, device, sw)
    rng_read = "proc" not in sw
    res: dict = {
        "switches": list(sw),
        "facts": facts,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "compile_s": {},
    }
    runs: dict[str, dict] = {}
    if "proc" not in sw:
        ref = copy.deepcopy(base).double()
        runs["R"] = run(ref, inputs, device, amp=False, seed=tp.SEED, rng_read=rng_read)
        del ref
    eager = copy.deepcopy(base)
    runs["E"] = run(eager, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
    runs["E2"] = run(eager, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
    if "proc" not in sw:
        runs["Ex"] = run(eager, inputs, device, amp=True, seed=tp.SEED + 1, rng_read=rng_read)
    del eager
    patch = {"fallback_random": True}
    if "noreorder" in sw:
        patch.update(
            {k: False for k in ("reorder_for_peak_memory", "reorder_for_locality") if hasattr(ic, k)}
        )
    res["inductor_patch"] = patch
    with ic.patch(**patch):
        a_model = torch.compile(copy.deepcopy(base), backend="aot_eager")
        c_model = torch.compile(copy.deepcopy(base))
        runs["A1"] = run(a_model, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
        res["compile_s"]["A1"] = runs["A1"]["s"]
        tp.log(f"variant {variant}: inductor compile")
        runs["C1"] = run(c_model, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
        res["compile_s"]["C1"] = runs["C1"]["s"]
        res["counters_after_compile"] = tp.counters_snapshot()
        runs["A2"] = run(a_model, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
        runs["C2"] = run(c_model, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
        runs["C3"] = run(c_model, inputs, device, amp=True, seed=tp.SEED, rng_read=rng_read)
    del a_model, c_model
    res["rng_consumed"] = {k: v["rng_consumed"] for k, v in runs.items()}
    res["loss_from_logits_rel"] = {k: v["loss_from_logits_rel"] for k, v in runs.items()}
    pairs = [
        ("C1", "A1"),
        ("C2", "A2"),
        ("A1", "E"),
        ("C1", "E"),
        ("C3", "C2"),
        ("E2", "E"),
        ("Ex", "E"),
        ("E", "R"),
    ]
    cmp = tp.compare(runs, pairs, [])
    for c in cmp.values():  # worst three gradients (t5_parity's worst3 ranks every tensor)
        per = c["per_tensor"]
        g = sorted(
            ((k, e) for k, e in per.items() if k.startswith("grad:")),
            key=lambda kv: -(kv[1] if not math.isnan(kv[1]) else math.inf),
        )
        c["worst3_grads"] = g[:3]
        h = [e for k, e in per.items() if k.startswith("hs:")]
        c["hidden_max"] = max(h) if h else None
        c["hidden_per_layer"] = {k: e for k, e in per.items() if k.startswith("hs:")}
    res["compare"] = cmp
    res["seconds"] = time.time() - t_start
    del runs, base
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    tp.log(f"variant {variant}: done in {res['seconds']:.0f} s")
    return res


def summary_lines(results: dict) -> list[str]:
    lines = []
    for key, r in results.items():
        if not key.startswith("variant:"):
            continue
        if not isinstance(r, dict):
            lines.append(f"== {key}: {r}")
            continue
        f = r["facts"]
        lines.append(
            f"== {key} switches {r['switches']} cudnn_tf32 {r['cudnn_allow_tf32']} "
            f"attn {f['attn_implementation']} "
            f"weights_sum {f['weights_sum']:.6g} ids {f['input_ids_sum']} labels {f['labels_sum']} "
            f"compile s { ({k: round(v, 1) for k, v in r['compile_s'].items()}) } total {r['seconds']:.0f} s"
        )
        lines.append(f"  rng consumed {r['rng_consumed']}")
        lines.append(
            "  loss-from-logits self-check (rel) "
            + ", ".join(f"{k} {v:.2g}" for k, v in r["loss_from_logits_rel"].items())
        )
        for pair, c in r["compare"].items():
            w = ", ".join(f"{n[5:]} {e:.3g}" for n, e in c["worst3_grads"])
            hs = "" if c["hidden_max"] is None else f" hidden max {c['hidden_max']:.3g}"
            lines.append(
                f"  {pair:9s} loss {c['loss']:.3g} logits {c['logits']:.3g} grads(all) {c['grads_all']:.3g} "
                f"grad median {c['grad_median']:.3g}{hs} | worst: {w}"
            )
    return lines


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="full", choices=["full", "tiny"])
    p.add_argument("--variants", default="base,hs")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", default="", help="suffix of the output file names")
    p.add_argument("--budget-s", type=float, default=1e9, help="start no variant after this many seconds")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # both scripts
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(False)  # both scripts
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    import transformers

    results: dict = {
        "env": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        },
        "size": args.size,
    }
    stem = os.path.join(args.out, "t5_switch" + (f"_{args.tag}" if args.tag else ""))
    for variant in args.variants.split(","):
        if time.time() - start > args.budget_s:
            results[f"variant:{variant}"] = "skipped: budget"
            continue
        try:
            results[f"variant:{variant}"] = one_variant(variant, args.size, device)
        except Exception as e:  # noqa: BLE001 (keep what the other variants measured)
            import traceback

            traceback.print_exc()
            results[f"variant:{variant}"] = f"error: {type(e).__name__}: {e}"[:500]
        with open(stem + ".json.tmp", "w") as f:  # replaced whole: a copy taken meanwhile stays valid
            json.dump(results, f, indent=1, default=str)
        os.replace(stem + ".json.tmp", stem + ".json")
        lines = summary_lines(results)
        with open(stem + ".txt.tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(stem + ".txt.tmp", stem + ".txt")
        print("\n".join(summary_lines({f"variant:{variant}": results[f"variant:{variant}"]})), flush=True)
    tp.log(f"total {time.time() - start:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
