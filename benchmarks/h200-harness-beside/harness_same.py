"""PyTorch's harness (`huggingface.py`, a copy of ../shared/dynamo-harness) with its accuracy verdict
recorded tensor by tensor (by ../h200-reasons/harness_t5.py, imported: it wraps `common.same` and
writes $SAME_JSON and its .txt), and three optional patches made from outside its files, so that
its `--accuracy --training` checks the orchestrator's model and inputs:

- CONFIG_JSON='{"vocab_size": 32000, "pad_token_id": 1}': keys set on the config the harness builds
  (the orchestrator's `base` preset of RoBERTa differs from RobertaConfig() in its vocabulary, and
  the harness sets RoBERTa's pad id to 0 where the class's default, ours, is 1).
- IDS=random: input ids drawn from the whole vocabulary, as the orchestrator draws them (the harness
  gives every RoBERTa input id 0, its pad id); the labels stay the harness's.
- SEQ=n: the sequence length of every model (a CPU check's tiny size).

    cd .harness && SAME_JSON=/abs/same.json CONFIG_JSON='{"vocab_size": 32000, "pad_token_id": 1}' \
        IDS=random python3 ../benchmarks/h200-harness-beside/harness_same.py --accuracy --training \
        --amp --amp-dtype bfloat16 --backend inductor --device cuda --only RobertaForMaskedLM \
        --batch-size 16 --output /abs/acc.csv
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h200-reasons"))
import harness_t5  # noqa: E402  (patches common.same; imports the harness from the cwd)
import torch  # noqa: E402

hf = harness_t5.hf
keys = json.loads(os.environ.get("CONFIG_JSON") or "{}")
seq = int(os.environ["SEQ"]) if os.environ.get("SEQ") else None
_orig_cfg = hf.HuggingfaceRunner._get_model_cls_and_config
_orig_inputs = hf.generate_inputs_for_model


def _cfg(self, model_name):
    cls, config = _orig_cfg(self, model_name)
    for k, v in keys.items():
        setattr(config, k, v)
    return cls, config


def _inputs(model_cls, model, model_name, bs, device, include_loss_args=False):
    out = _orig_inputs(model_cls, model, model_name, bs, device, include_loss_args=include_loss_args)
    if os.environ.get("IDS") == "random":
        ids = out["input_ids"]
        vocab = model.config.vocab_size
        out["input_ids"] = torch.randint(0, vocab, ids.shape, dtype=ids.dtype, device=ids.device)
    return out


hf.HuggingfaceRunner._get_model_cls_and_config = _cfg
hf.generate_inputs_for_model = _inputs
if seq:
    hf.get_sequence_length = lambda cls, name: seq

if __name__ == "__main__":
    try:
        hf.huggingface_main()
    finally:
        harness_t5._dump()
