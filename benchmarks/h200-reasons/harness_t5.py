"""PyTorch's harness (`huggingface.py --accuracy ...`, a copy of ../shared/dynamo-harness), run
unchanged except for two optional patches made from outside its files, and with its verdict
recorded tensor by tensor:

- T5_PRESET=ours: T5ForConditionalGeneration is built with the orchestrator's `base` preset
  (12+12 layers, d_model 768, 12 heads, d_ff 3072, vocab 32000, d_kv 64) and sequence length 512,
  so that the harness checks the model and batch of the orchestrator's failing job (give
  --batch-size 8). T5_PRESET=tiny: a CPU test size. Unset: the harness's own T5Config().
- Every call of common.same (the harness's comparison: eager run 1 against run 2, then compiled
  against eager with the fp64 reference) is recorded per tensor into $SAME_JSON: relative error,
  RMSE against fp64 of both, allclose at the tolerance, and the rule's verdict.

    cd .harness && SAME_JSON=/abs/same.json T5_PRESET=ours python3 ../benchmarks/h200-reasons/harness_t5.py \
        --accuracy --training --amp --amp-dtype bfloat16 --backend inductor --device cuda \
        --only T5ForConditionalGeneration --batch-size 8 --output /abs/acc.csv
"""

from __future__ import annotations

import json
import math
import os
import sys

sys.path.insert(0, os.getcwd())  # run from the harness's folder
import common  # noqa: E402
import huggingface as hf  # noqa: E402
import torch  # noqa: E402

PRESETS = {
    "ours": (
        dict(
            num_layers=12,
            num_decoder_layers=12,
            d_model=768,
            num_heads=12,
            d_ff=3072,
            vocab_size=32000,
            d_kv=64,
        ),
        512,
    ),
    "tiny": (
        dict(num_layers=2, num_decoder_layers=2, d_model=64, num_heads=4, d_ff=128, vocab_size=1024, d_kv=16),
        32,
    ),
}
preset = os.environ.get("T5_PRESET")
if preset:
    keys, seq = PRESETS[preset]
    _orig_cfg = hf.HuggingfaceRunner._get_model_cls_and_config
    _orig_len = hf.get_sequence_length

    def _cfg(self, model_name):
        cls, config = _orig_cfg(self, model_name)
        if model_name.startswith("T5"):
            for k, v in keys.items():
                setattr(config, k, v)
        return cls, config

    hf.HuggingfaceRunner._get_model_cls_and_config = _cfg
    hf.get_sequence_length = lambda cls, name: seq if name.startswith("T5") else _orig_len(cls, name)

RECORDS: list[dict] = []
_orig_same = common.same


def _leaves(x, path="out"):
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}[{i}]")
    elif hasattr(x, "to_tuple"):  # a transformers ModelOutput
        yield from _leaves(dict(x.items()), path)


def _rmse(a, b):
    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


def _same(ref, res, fp64_ref=None, *args, **kwargs):
    verdict = _orig_same(ref, res, fp64_ref, *args, **kwargs)
    tol = kwargs.get("tol", 1e-4)
    rows = []
    f64 = dict(_leaves(fp64_ref)) if fp64_ref is not None else {}
    for (name, r), (_, s) in zip(_leaves(ref), _leaves(res), strict=False):
        if not r.is_floating_point():
            continue
        r64, s64 = r.detach().double(), s.detach().double().to(r.device)
        row = {
            "name": name,
            "numel": r.numel(),
            "dtype": str(s.dtype),
            "rel_res_vs_ref": float((s64 - r64).norm() / max(float(r64.norm()), 1e-30)),
            "allclose": bool(torch.allclose(r.float(), s.float().to(r.device), atol=tol, rtol=tol)),
        }
        f = f64.get(name)
        if f is not None and f.dtype == torch.float64:
            f = f.detach().to(r.device)
            row["rmse_ref_fp64"] = _rmse(f, r64)
            row["rmse_res_fp64"] = _rmse(f, s64)
            row["rel_ref_vs_fp64"] = float((r64 - f).norm() / max(float(f.norm()), 1e-30))
            row["rel_res_vs_fp64"] = float((s64 - f).norm() / max(float(f.norm()), 1e-30))
        rows.append(row)
    RECORDS.append(
        {
            "call": len(RECORDS) + 1,
            "tol": tol,
            "fp64": fp64_ref is not None,
            "verdict": bool(verdict),
            "tensors": rows,
        }
    )
    _dump()
    return verdict


def _dump():
    path = os.environ.get("SAME_JSON")
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"preset": preset, "argv": sys.argv[1:], "calls": RECORDS}, f, indent=1)
    # a short account: per call the verdict and the worst three tensors
    with open(path.replace(".json", ".txt"), "w") as f:
        for c in RECORDS:
            rows = sorted(
                c["tensors"],
                key=lambda r: -r["rel_res_vs_ref"] if not math.isnan(r["rel_res_vs_ref"]) else -1e300,
            )
            f.write(
                f"same() call {c['call']}: tol {c['tol']} fp64 {c['fp64']} -> {c['verdict']}; "
                f"{sum(not r['allclose'] for r in c['tensors'])} of {len(c['tensors'])} "
                "tensors not allclose\n"
            )
            for r in rows[:3]:
                f.write(
                    "   "
                    + json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})
                    + "\n"
                )


common.same = _same

if __name__ == "__main__":
    try:
        hf.huggingface_main()
    finally:
        _dump()
