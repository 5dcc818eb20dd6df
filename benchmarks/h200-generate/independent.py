"""Two independent measures of decode tokens/s, beside `+sweep=generate`, the orchestrator not
imported; greedy, random weights from the config class, bf16 weights without autocast (as servers load
an LLM, and as the orchestrator's generation jobs run).

1. transformers' own `generate` with a static cache (it compiles its forward by itself;
   `disable_compile=True` is its eager baseline). Decode time is the difference of two generate
   calls, N new tokens and 1 (the prefill and its token), median over repeats, each call
   synchronized: decode tokens/s = batch x (N - 1) / that difference.
2. A hand-written decode loop, gpt-fast style (`--hand`): one transformers `StaticCache`, the
   prefill eager, then N - 1 greedy steps of the model's forward on the last token, the decode
   step compiled by `torch.compile(mode="reduce-overhead", fullgraph=True)` on the compiled side;
   the decode loop timed whole by the host clock with one synchronize at its end, median over
   repeats. Nothing runs between two steps but the argmax and the next position.

Both measures in one process on one model, so generate's own per-token cost around the same
forward is their difference (`generate_host_ms_per_token`).

    python independent.py --size 1b --batch 1 --prompt 128 --new 128 --repeats 5 --out OUT.json
    python independent.py --size tiny --batch 2 --prompt 16 --new 8 --repeats 2 --device cpu   # a check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from functools import partial

import torch

SIZES = {  # the orchestrator's hf presets, written out (workloads/hf_config.py): not imported
    "tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=1024, head_dim=16, max_position_embeddings=128),
    "1b": dict(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=8192, vocab_size=128256, head_dim=64, tie_word_embeddings=True),
}  # fmt: skip


def timed_generate(model, ids, new: int, eager: bool, device: str) -> float:
    kwargs = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, cache_implementation="static")
    if eager:
        kwargs["disable_compile"] = True
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():  # bf16 weights (main), no autocast
        model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def prefill(model, ids, cache, device: str) -> torch.Tensor:
    """The prompt's forward over `cache` (reset first): its greedy token."""
    cache.reset()
    pos = torch.arange(ids.shape[1], device=device)
    logits = model(input_ids=ids, past_key_values=cache, cache_position=pos, logits_to_keep=1).logits
    return logits[:, -1].argmax(-1, keepdim=True)


def decode_positions(ids, new: int, device: str) -> list[torch.Tensor]:
    """The decode steps' positions, made before a decode clock starts (gpt-fast keeps its own on the
    device)."""
    return [torch.tensor([ids.shape[1] + i], device=device) for i in range(new - 1)]


def hand_loop(model, ids, new: int, step, cache, device: str, wait: bool = False) -> tuple[float, float]:
    """One request by the hand-written loop over `cache` (a side's own StaticCache, allocated once so
    that its addresses stay put for CUDA graphs): (prefill seconds, decode seconds of new - 1 tokens).
    `wait`: the host reads a flag of each new token before the next step, as generate's stopping
    check does (`bool(unfinished_sequences.max() == 0)` in transformers' `_sample`), so that the host
    cannot queue a step while the device runs the last one."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        tok = prefill(model, ids, cache, device)
        sync()
        prefill_s = time.perf_counter() - t0
        positions = decode_positions(ids, new, device)
        sync()
        t1 = time.perf_counter()
        for pos in positions:
            # a copy out of the CUDA graph's output buffer, as gpt-fast takes one: the next replay
            # overwrites that buffer, and cudagraph trees refuse it as the next step's input
            tok = step(tok, cache, pos).clone()
            if wait:
                bool(tok.max() < 0)  # a host read of the device: a sync per token
        sync()
        return prefill_s, time.perf_counter() - t1


def events_loop(model, ids, new: int, step, cache, device: str) -> list[float]:
    """The hand loop timed as the sweep times a request (ctx.timed_steps): an event (CUDA; the host
    clock on a CPU) after every step, one synchronize at the end; each decode token's seconds."""
    with torch.no_grad():
        tok, positions = prefill(model, ids, cache, device), decode_positions(ids, new, device)
        if device != "cuda":
            marks = [time.perf_counter()]
            for p in positions:
                tok = step(tok, cache, p).clone()
                marks.append(time.perf_counter())
            return [b - a for a, b in zip(marks, marks[1:], strict=False)]
        torch.cuda.synchronize()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(positions) + 1)]
        events[0].record()
        for p, e in zip(positions, events[1:], strict=True):
            tok = step(tok, cache, p).clone()
            e.record()
        events[-1].synchronize()
        return [a.elapsed_time(b) / 1000 for a, b in zip(events, events[1:], strict=False)]


def save(out: dict, path: str | None) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)


def decode_step_of(model):
    def step(tok, cache, pos):
        out = model(input_ids=tok, past_key_values=cache, cache_position=pos, logits_to_keep=1)
        return out.logits[:, -1].argmax(-1, keepdim=True)

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="1b")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hand", action="store_true", help="also the hand-written loop, and generate's own cost")
    p.add_argument("--eager-only", action="store_true", help="the hand loop's eager side alone (no compile)")
    p.add_argument("--out")
    a = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    with torch.device(a.device):
        model = LlamaForCausalLM(LlamaConfig(**SIZES[a.size])).eval()
    for param in model.parameters():  # bf16 weights; RoPE's inv_freq stays fp32, as a bf16 load keeps it
        param.data = param.data.to(torch.bfloat16)
    model.generation_config.pad_token_id = 0
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.prompt), device=a.device)
    out = dict(vars(a), torch=torch.__version__)
    import transformers

    out["transformers"] = transformers.__version__
    for side, eager in () if a.eager_only else (("eager", True), ("compiled", False)):
        first = timed_generate(model, ids, a.new, eager, a.device)  # the compiled side compiles here
        timed_generate(model, ids, 1, eager, a.device)
        whole = [timed_generate(model, ids, a.new, eager, a.device) for _ in range(a.repeats)]
        prefill = [timed_generate(model, ids, 1, eager, a.device) for _ in range(a.repeats)]
        decode_s = statistics.median(whole) - statistics.median(prefill)
        from torch._dynamo.utils import get_compilation_metrics  # what generate compiled by itself

        out[side] = dict(
            first_request_s=first,
            e2e_ms=statistics.median(whole) * 1000,
            ttft_ms=statistics.median(prefill) * 1000,
            decode_ms_per_token=decode_s / (a.new - 1) * 1000,
            decode_tokens_per_s=a.batch * (a.new - 1) / decode_s,
            frames_compiled_so_far=len(get_compilation_metrics()),
        )
        print(side, json.dumps(out[side]), flush=True)
    save(out, a.out)  # generate's figures kept, should the hand loop fail
    if a.hand:  # the hand-written loop beside generate, in this process
        from transformers import StaticCache

        eager_step = decode_step_of(model)
        compiled_step = torch.compile(decode_step_of(model), mode="reduce-overhead", fullgraph=True)
        pairs = (("eager", eager_step),) + (() if a.eager_only else (("compiled", compiled_step),))
        for side, step in pairs:
            cache = StaticCache(config=model.config, max_cache_len=a.prompt + a.new)
            one = partial(hand_loop, model, ids, a.new, step, cache, a.device)
            for _ in range(2):  # compiles, then records the CUDA graph
                one()
            runs = [one() for _ in range(a.repeats)]
            waits = [one(wait=True) for _ in range(a.repeats)]
            decode_s = statistics.median(d for _, d in runs)
            wait_s = statistics.median(d for _, d in waits)
            hand = dict(
                ttft_ms=statistics.median(p for p, _ in runs) * 1000,
                decode_ms_per_token=decode_s / (a.new - 1) * 1000,
                decode_tokens_per_s=a.batch * (a.new - 1) / decode_s,
                # the same loop with a host read per token, as generate's stopping check
                waiting_decode_ms_per_token=wait_s / (a.new - 1) * 1000,
            )
            # the sweep's timer on the same loop: per-token events, each repetition's median, their median
            timed = [events_loop(model, ids, a.new, step, cache, a.device) for _ in range(a.repeats)]
            hand["events_decode_p50_ms"] = statistics.median(statistics.median(t) for t in timed) * 1000
            hand["events_decode_mean_ms"] = statistics.median(statistics.fmean(t) for t in timed) * 1000
            if side in out:  # generate's own per-token cost around a forward of the same kind
                hand["generate_host_ms_per_token"] = (
                    out[side]["decode_ms_per_token"] - hand["decode_ms_per_token"]
                )
            out[f"hand_{side}"] = hand
            print(f"hand {side}", json.dumps(hand), flush=True)
        if not a.eager_only:
            out["hand_decode_speedup"] = (
                out["hand_eager"]["decode_ms_per_token"] / out["hand_compiled"]["decode_ms_per_token"]
            )
    if not a.eager_only:
        out["compile_config"] = str(getattr(model.generation_config, "compile_config", None))
        out["decode_speedup"] = out["eager"]["decode_ms_per_token"] / out["compiled"]["decode_ms_per_token"]
        print("decode speedup", round(out["decode_speedup"], 3), flush=True)
    save(out, a.out)


if __name__ == "__main__":
    main()
