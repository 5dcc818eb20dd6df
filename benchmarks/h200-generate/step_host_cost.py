"""The host cost of one eager decode step, on this CPU: the orchestrator's `HFDecoder.forward` and its
argmax against `independent.py`'s hand step and its copy (and three variants of the hand step), on one
model (16 layers, a tiny width so that dispatch dominates), 25 interleaved repeats of a 127-token
decode; and the aten ops each step dispatches.

    taskset -c 1 .venv/bin/python benchmarks/h200-generate/step_host_cost.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", ".."), HERE]

import independent  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache  # noqa: E402

from workloads.decoding import HFDecoder  # noqa: E402

PROMPT, NEW = 128, 128


def main() -> None:
    shape = dict(independent.SIZES["1b"])
    shape.update(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    shape.update(intermediate_size=128, vocab_size=1024)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape)).eval()
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)
    ids = torch.randint(0, 1024, (1, PROMPT))
    decoder = HFDecoder(model, "static", PROMPT + NEW, 1, torch.bfloat16)
    positions = [torch.tensor([PROMPT + i]) for i in range(NEW - 1)]

    def ours():
        cache = decoder.new_cache()
        tok = decoder.forward(ids, cache, torch.arange(PROMPT)).argmax(-1)
        t = time.perf_counter()
        for pos in positions:
            tok = decoder.forward(tok[:, None], cache, pos).argmax(-1)
        return (time.perf_counter() - t) / len(positions)

    def hand(key: str = "past_key_values", position_ids: bool = False):
        cache = StaticCache(config=model.config, max_cache_len=PROMPT + NEW)

        def step(tok, pos):
            kwargs = {key: cache, "cache_position": pos, "logits_to_keep": 1}
            if position_ids:
                kwargs["position_ids"] = pos[None]
            return model(input_ids=tok, **kwargs).logits[:, -1].argmax(-1, keepdim=True)

        def run():
            cache.reset()
            tok = step(ids, torch.arange(PROMPT))
            t = time.perf_counter()
            for pos in positions:
                tok = step(tok, pos).clone()
            return (time.perf_counter() - t) / len(positions)

        return run, step

    hand_run = hand()[0]
    sides = {
        "ours": ours,
        "hand": hand_run,
        "hand_cache_key": hand(key="cache")[0],
        "hand_position_ids": hand(position_ids=True)[0],
        "hand_both": hand(key="cache", position_ids=True)[0],
    }
    out: dict = {}
    with torch.no_grad():
        for run in sides.values():  # warm
            run()
        times: dict[str, list[float]] = {k: [] for k in sides}
        for _ in range(int(os.environ.get("REPEATS", 25))):
            for name, run in sides.items():
                times[name].append(run())
        for name, seconds in times.items():
            out[f"{name}_ms_per_token"] = statistics.median(seconds) * 1e3
        tok, pos = torch.zeros(1, 1, dtype=torch.long), positions[0]
        cache = decoder.new_cache()
        decoder.forward(ids, cache, torch.arange(PROMPT))  # the prefill: the cache's lazy allocation
        hand_step = hand()[1]  # a fresh cache: the timed runs filled the other one
        hand_step(ids, torch.arange(PROMPT))
        for label, one in (
            ("ours", lambda: decoder.forward(tok, cache, pos).argmax(-1)),
            ("hand", lambda: hand_step(tok, pos).clone()),
        ):
            with torch.profiler.profile() as prof:
                one()
            out[f"{label}_aten_ops_per_step"] = sum(
                e.count for e in prof.key_averages() if e.key.startswith("aten::")
            )
    import transformers

    out.update(torch=torch.__version__, transformers=transformers.__version__)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
