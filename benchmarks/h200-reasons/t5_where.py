"""Where do aot_eager and inductor(fallback_random) draw different dropout masks in T5 training?
(issue 33 point 5, the follow-up to t5_parity.py). Standalone: torch + transformers only.

The orchestrator's T5 build (base width: d_model 768, 12 heads, d_ff 3072, vocab 32000, batch
8 x 512, labels) with fewer layers (--layers, default 2, so each compile is short), once per
attention implementation (transformers' `sdpa`, its default, and `eager`: softmax, then
nn.functional.dropout). For each: eager (E), aot_eager (A) and inductor with fallback_random (C),
the same seed before each call, forward + backward; compared per hidden state (encoder and decoder
layer by layer), logits, loss and all gradients. One profiled step of each lists, in order, the
random and attention ops (aten names, input shapes) and the attention kernels that ran.

    python t5_where.py --device cuda --out DIR
    python t5_where.py --device cpu --tiny --out DIR    # a CPU test
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import time

import torch
from torch import nn

SEED = 1337
WORDS = re.compile(r"dropout|bernoulli|rand|attention|sdpa|flash|efficient|philox|cudnn|fmha", re.I)


def log(*a: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


class Step(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, **kw):
        out = self.inner(**kw, output_hidden_states=True)
        hs = [h.detach() for h in out.encoder_hidden_states] + [h.detach() for h in out.decoder_hidden_states]
        return out.loss, out.logits.detach(), hs


def rel(x, y) -> float:
    x, y = x.double(), y.double()
    return float((x - y).norm() / max(float(y.norm()), 1e-30))


def run(model, inputs, device):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(SEED)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        loss, logits, hs = model(**inputs)
    loss.backward()
    grads = {
        n.replace("_orig_mod.", ""): p.grad.detach().clone()
        for n, p in model.named_parameters()
        if p.grad is not None
    }
    model.zero_grad(set_to_none=True)
    return {"loss": loss.detach().reshape(1), "logits": logits, "hs": hs, "grads": grads}


def compare(x, y, n_enc) -> dict:
    hs = {}
    for i, (a, b) in enumerate(zip(x["hs"], y["hs"], strict=False)):
        where = f"enc[{i}]" if i < n_enc else f"dec[{i - n_enc}]"
        hs[where] = rel(a, b)
    names = sorted(y["grads"])
    num = sum(float((x["grads"][n].double() - y["grads"][n].double()).pow(2).sum()) for n in names)
    den = sum(float(y["grads"][n].double().pow(2).sum()) for n in names)
    return {
        "loss": rel(x["loss"], y["loss"]),
        "logits": rel(x["logits"], y["logits"]),
        "grads_all": (num**0.5) / max(den**0.5, 1e-30),
        "hidden": hs,
    }


def random_ops(model, inputs, device) -> dict:
    """One profiled step: the random / attention ops in order (name, input shapes) and the kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts, record_shapes=True) as prof:
        run(model, inputs, device)
    ops, kernels = [], {}
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        if e.device_type == DeviceType.CUDA:
            if WORDS.search(e.name):
                kernels[e.name[:140]] = kernels.get(e.name[:140], 0) + 1
        elif WORDS.search(e.name) and e.name.startswith("aten::"):
            ops.append(f"{e.name} {e.input_shapes}"[:220])
    return {"ops": ops, "kernels": kernels}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--impls", default="sdpa,eager")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(False)
    os.makedirs(args.out, exist_ok=True)
    import torch._inductor.config as ic
    from transformers import T5Config, T5ForConditionalGeneration

    res: dict = {"layers": args.layers}
    for impl in args.impls.split(","):
        t0 = time.time()
        cfg = T5Config()
        cfg.num_layers = cfg.num_decoder_layers = args.layers
        if args.tiny:
            cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.vocab_size, cfg.d_kv = 64, 4, 128, 1024, 16
            batch, seq = 2, 32
        else:
            cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.vocab_size, cfg.d_kv = 768, 12, 3072, 32000, 64
            batch, seq = 8, 512
        cfg.use_cache = False
        cfg.decoder_start_token_id = 0
        cfg._attn_implementation = impl
        torch.manual_seed(0)
        with device:
            inner = T5ForConditionalGeneration(cfg)
        inner.train()
        base = Step(inner)
        inputs = {
            "input_ids": torch.randint(0, cfg.vocab_size, (batch, seq), device=device),
            "labels": torch.randint(0, cfg.vocab_size, (batch, seq), device=device),
        }
        r: dict = {"attn_implementation": inner.config._attn_implementation}
        torch._dynamo.reset()
        eager = copy.deepcopy(base)
        E = run(eager, inputs, device)
        E2 = run(eager, inputs, device)
        with ic.patch(fallback_random=True):
            a_model = torch.compile(copy.deepcopy(base), backend="aot_eager")
            c_model = torch.compile(copy.deepcopy(base))
            A = run(a_model, inputs, device)
            C = run(c_model, inputs, device)
            C2 = run(c_model, inputs, device)
            n_enc = args.layers + 1
            r["C vs A"] = compare(C, A, n_enc)
            r["C2 vs A"] = compare(C2, A, n_enc)
            r["A vs E"] = compare(A, E, n_enc)
            r["E2 vs E"] = compare(E2, E, n_enc)
            r["profile"] = {
                "E": random_ops(eager, inputs, device),
                "A": random_ops(a_model, inputs, device),
                "C": random_ops(c_model, inputs, device),
            }
        r["seconds"] = time.time() - t0
        res[impl] = r
        log(impl, json.dumps({k: v for k, v in r.items() if k != "profile"}))
        for side in ("E", "A", "C"):
            pr = r["profile"][side]
            print(f"  {side}: {len(pr['ops'])} random/attention aten ops; kernels {pr['kernels']}")
        with open(os.path.join(args.out, "t5_where.json"), "w") as f:
            json.dump(res, f, indent=1)
        del eager, a_model, c_model, base, inner, E, E2, A, C, C2


if __name__ == "__main__":
    sys.exit(main())
