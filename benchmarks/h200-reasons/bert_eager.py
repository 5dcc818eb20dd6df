"""The eager step of BERT-base MLM inference, measured every way at once in ONE process (issue 33
point 4). Standalone: torch + transformers only.

Model: BertForMaskedLM(BertConfig()), eval, no_grad, bf16 autocast entered every step, batch
16 x 512 random ids (labels random ids, or none), no attention mask: the orchestrator's
`workload=hf workload.model=BertForMaskedLM workload.size=default bench.task=infer
workload.labels=true` and the harness's `--performance --inference --amp --amp-dtype bfloat16`.

Timing loops (variants are interleaved round-robin, in a shuffled order each round, so that a
drift of the host's speed falls on all of them alike):
  ours_k3    the orchestrator's timed_steps: synchronize, CUDA event, then k=3 steps each followed
             by an event, one synchronize at the end; per-step = block / 3
  harness    the harness's timed(): synchronize (not timed), perf_counter, one step,
             synchronize (timed), perf_counter; 3 such iterations per visit
  ours_k1, ours_k20   the orchestrator's loop with 1 and 20 steps per block (default numerics)
Numerics: TF32 matmul off/on x reduced-precision SDP math off/on (the harness sets both on at
import; the orchestrator's product default has both off). Labels: with / without.

Also: a pure-CPU microbenchmark (a fixed Python loop; 4000 tiny CUDA launches) at the start,
middle and end; the eager step's GPU time alone (the step captured in a CUDA graph and replayed);
a torch.profiler pass (kernel time per step, kernels per step, GPU-busy fraction of the profiled
window, the attention kernels by name, top kernels).

    python bert_eager.py --device cuda --out DIR
    python bert_eager.py --device cuda --mini --out DIR     # a fresh process: ours_k3 and harness only
    python bert_eager.py --device cpu --tiny --out DIR      # a CPU test
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

import torch


def log(*a: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def cpu_bench(device: torch.device) -> dict:
    """Host speed: a fixed pure-Python loop, and the host cost of one tiny kernel launch."""
    t0 = time.perf_counter()
    x = 0
    for i in range(3_000_000):
        x += i & 7
    py_ms = (time.perf_counter() - t0) * 1000
    a = torch.ones(1, device=device)
    b = torch.empty_like(a)
    for _ in range(200):
        torch.add(a, 1, out=b)
    sync(device)
    n = 4000
    t0 = time.perf_counter()
    for _ in range(n):
        torch.add(a, 1, out=b)
    launch_us = (time.perf_counter() - t0) / n * 1e6
    sync(device)
    return {"py_loop_ms": round(py_ms, 2), "launch_us": round(launch_us, 3), "at": time.time()}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def set_numerics(tf32: bool, sdp: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(sdp)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--mini", action="store_true", help="a fresh process: two loops, default numerics")
    p.add_argument(
        "--enqueue",
        action="store_true",
        help="a fresh process: the host's time to enqueue one step (no sync) against the whole step",
    )
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    device = torch.device(args.device)
    os.makedirs(args.out, exist_ok=True)
    name = "mini" if args.mini else "main"
    res: dict = {"pid": os.getpid(), "cpu_bench": [cpu_bench(device)]}
    log("cpu bench", res["cpu_bench"][-1])

    from transformers import BertConfig, BertForMaskedLM

    cfg = (
        BertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=1024
        )
        if args.tiny
        else BertConfig()
    )
    batch, seq = (2, 64) if args.tiny else (16, 512)
    torch.manual_seed(0)
    model = BertForMaskedLM(cfg).to(device).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    labels = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    inputs = {True: {"input_ids": ids, "labels": labels}, False: {"input_ids": ids}}
    res["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    amp_dtype = torch.bfloat16

    def step(with_labels: bool) -> None:
        with torch.no_grad(), torch.autocast(device.type, dtype=amp_dtype):  # entered every step
            model(**inputs[with_labels])

    def ours(k: int, with_labels: bool) -> list[float]:
        sync(device)
        if device.type == "cuda":
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(k + 1)]
            ev[0].record()
            for e in ev[1:]:
                step(with_labels)
                e.record()
            ev[-1].synchronize()
            return [ev[0].elapsed_time(ev[-1]) / k]
        t0 = time.perf_counter()
        for _ in range(k):
            step(with_labels)
        return [(time.perf_counter() - t0) * 1000 / k]

    def harness(n: int, with_labels: bool) -> list[float]:
        out = []
        for _ in range(n):
            sync(device)
            t0 = time.perf_counter()
            step(with_labels)
            sync(device)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    if args.enqueue:
        for _ in range(5):
            step(True)
        sync(device)
        for lab in (True, False):
            host, whole = [], []
            for _ in range(30):
                sync(device)
                t0 = time.perf_counter()
                step(lab)
                t1 = time.perf_counter()
                sync(device)
                t2 = time.perf_counter()
                host.append((t1 - t0) * 1000)
                whole.append((t2 - t0) * 1000)
            res[f"labels={lab}"] = {
                "host_enqueue_ms": statistics.median(host),
                "step_ms": statistics.median(whole),
                "ours_k3_ms": statistics.median(sum((ours(3, lab) for _ in range(15)), [])),
            }
            log(f"labels={lab}", res[f"labels={lab}"])
        res["cpu_bench"].append(cpu_bench(device))
        log("cpu bench", res["cpu_bench"])
        with open(os.path.join(args.out, f"bert_eager_enqueue_{os.getpid()}.json"), "w") as f:
            json.dump(res, f, indent=1)
        return

    numerics = {"off": (False, False), "tf32+sdp": (True, True), "tf32": (True, False), "sdp": (False, True)}
    variants = []
    for loop in ("ours_k3", "harness"):
        for num in ["off", "tf32+sdp"] if args.mini else list(numerics):
            for lab in [True] if args.mini else [True, False]:
                variants.append((loop, num, lab))
    if not args.mini:
        variants += [("ours_k1", "off", True), ("ours_k20", "off", True)]

    def measure(v) -> list[float]:
        loop, num, lab = v
        set_numerics(*numerics[num])
        if loop == "harness":
            return harness(3, lab)
        return ours(int(loop.split("_k")[1]), lab)

    # warm-up: every variant a few times (kernel selection, allocator)
    for v in variants:
        for _ in range(3):
            measure(v)
    sync(device)
    times: dict[str, list[float]] = {}
    rng = random.Random(0)
    rounds = 15 if args.mini else args.rounds
    t_start = time.time()
    for r in range(rounds):
        order = variants[:]
        rng.shuffle(order)
        for v in order:
            times.setdefault("|".join(map(str, v)), []).extend(measure(v))
        if r == rounds // 2:
            res["cpu_bench"].append(cpu_bench(device))
    res["timing_s"] = time.time() - t_start
    res["cpu_bench"].append(cpu_bench(device))
    set_numerics(False, False)
    table = {}
    for k, xs in times.items():
        table[k] = {
            "median_ms": statistics.median(xs),
            "min_ms": min(xs),
            "max_ms": max(xs),
            "n": len(xs),
            "q1_ms": statistics.quantiles(xs, n=4)[0],
            "q3_ms": statistics.quantiles(xs, n=4)[2],
        }
    res["table"] = table
    res["raw"] = times
    log("timings done")
    for k, v in sorted(table.items()):
        print(f"  {k:28s} median {v['median_ms']:8.3f} ms  [{v['q1_ms']:.3f}-{v['q3_ms']:.3f}]  n={v['n']}")

    if not args.mini:
        if device.type == "cuda":
            res["gpu_only"] = graph_replay(model, inputs, device, amp_dtype)
            log("gpu only (CUDA graph replay)", res["gpu_only"])
        res["profile"] = {}
        for num in ("off", "tf32+sdp"):
            set_numerics(*numerics[num])
            res["profile"][num] = profile_steps(step, device, True)
            log(
                "profile",
                num,
                {k: v for k, v in res["profile"][num].items() if k not in ("top", "attention")},
            )
        set_numerics(False, False)
        res["profile"]["off_nolabels"] = profile_steps(step, device, False)
        for num, key in (("off", "ours_k3|off|True"), ("tf32+sdp", "ours_k3|tf32+sdp|True")):
            prof = res["profile"][num]
            prof["busy_vs_unprofiled_ours_k3"] = prof["kernel_ms_per_step"] / table[key]["median_ms"]
            prof["busy_vs_unprofiled_harness"] = (
                prof["kernel_ms_per_step"] / table[key.replace("ours_k3", "harness")]["median_ms"]
            )
        print(
            json.dumps(
                {k: {kk: vv for kk, vv in v.items() if kk != "top"} for k, v in res["profile"].items()},
                indent=1,
            )
        )
    res["cpu_bench"].append(cpu_bench(device))
    log("cpu bench", res["cpu_bench"])
    with open(os.path.join(args.out, f"bert_eager_{name}_{os.getpid()}.json"), "w") as f:
        json.dump(res, f, indent=1)


def graph_replay(model, inputs, device, amp_dtype) -> dict:
    """The eager step's GPU time alone: the same kernels captured once in a CUDA graph, replayed
    (no Python, no launches). Autocast's cast cache is off inside the capture (as torch requires)."""
    out = {}
    for lab in (True, False):
        try:
            s = torch.cuda.Stream(device)
            s.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(s):
                for _ in range(3):
                    with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, cache_enabled=False):
                        model(**inputs[lab])
            torch.cuda.current_stream(device).wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                with torch.no_grad(), torch.autocast("cuda", dtype=amp_dtype, cache_enabled=False):
                    model(**inputs[lab])
            for _ in range(5):
                g.replay()
            torch.cuda.synchronize(device)
            xs = []
            for _ in range(20):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                g.replay()
                b.record()
                b.synchronize()
                xs.append(a.elapsed_time(b))
            out[f"labels={lab}"] = {"median_ms": statistics.median(xs), "min_ms": min(xs)}
            del g
        except Exception as e:  # noqa: BLE001
            out[f"labels={lab}"] = f"capture failed: {type(e).__name__}: {str(e)[:300]}"
    return out


def profile_steps(step, device, with_labels: bool, n: int = 6) -> dict:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step(with_labels)
    sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(n):
            step(with_labels)
        sync(device)
        wall_ms = (time.perf_counter() - t0) * 1000
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    spans = sorted((e.time_range.start, e.time_range.end) for e in kernels)
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    window = (spans[-1][1] - spans[0][0]) if spans else 0.0
    by_name: dict[str, list[float]] = {}
    for e in kernels:
        by_name.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
    total_us = sum(sum(v) for v in by_name.values())
    top = sorted(((k, sum(v) / n / 1000, len(v) / n) for k, v in by_name.items()), key=lambda t: -t[1])
    attn_words = ("flash", "fmha", "attention", "attn", "sdpa", "efficient", "cudnn", "softmax", "bmm")
    attention = [t for t in top if any(w in t[0].lower() for w in attn_words)]
    return {
        "steps": n,
        "wall_ms_per_step_profiled": wall_ms / n,
        "kernel_ms_per_step": total_us / n / 1000,
        "kernels_per_step": len(kernels) / n,
        "gpu_busy_fraction_of_kernel_window": busy / window if window else None,
        "kernel_window_ms_per_step": window / n / 1000,
        "attention": [
            {"kernel": k[:160], "ms_per_step": round(ms, 4), "calls_per_step": c} for k, ms, c in attention
        ],
        "top": [
            {"kernel": k[:160], "ms_per_step": round(ms, 4), "calls_per_step": c} for k, ms, c in top[:15]
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
