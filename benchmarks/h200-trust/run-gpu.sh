#!/usr/bin/env bash
# One device call of the trust benchmarks (issue 12, 18): which part is $1. Everything it writes goes
# to one archive in $OUT (the device tool brings back at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-benchmarks/out}
export OUT=/tmp/trust-out
mkdir -p "$OUT"
GPT2="workload.size=gpt2 bench.dtype=bf16 compile.probes=false compile.cache=shared compile.cache_dir=/tmp/cc"
case "$1" in
  modes)  # +sweep=modes twice, P=2 (max-autotune modes left out: minutes of autotuning each)
    MODES="compile.mode=eager,default,reduce-overhead"
    SWEEP_TIMEOUT_S=270 VERDICT_STEPS="10000 1000000" bash scripts/gpu-bench.sh \
      "+sweep=modes $GPT2 $MODES bench.processes=2 bench.profile=true sweep.name=modes-run1" \
      "+sweep=modes $GPT2 $MODES bench.processes=2 sweep.name=modes-run2"
    OUT=$OUT/convergence SWEEP_TIMEOUT_S=150 bash scripts/gpu-bench.sh \
      "$GPT2 compile.mode=default bench.convergence_steps=300 bench.processes=1 bench.timeout_s=140 sweep.name=convergence" ;;
  memory)  # the independent per-side memory check (memory_alone.py), one process per mode
    export PYTHONPATH=/tmp/site:$PWD
    for mode in eager default reduce-overhead; do
      timeout 120 python3 benchmarks/h200-trust/memory_alone.py --size gpt2 --mode "$mode" | tee -a "$OUT/memory_alone.jsonl"
    done ;;
  big)  # 6.7b training (sides apart), 2.7b training (reserved memory), DDP/FSDP2 with 2 ranks on 1 GPU
    SWEEP_TIMEOUT_S=190 bash scripts/gpu-bench.sh \
      "workload.size=6.7b bench.dtype=bf16 compile.probes=false bench.processes=1 bench.repeats=4 sweep.name=gpt-6.7b"
    OUT=$OUT/b SWEEP_TIMEOUT_S=110 bash scripts/gpu-bench.sh \
      "workload.size=2.7b bench.dtype=bf16 compile.probes=false bench.processes=1 bench.repeats=6 sweep.name=gpt-2.7b"
    OUT=$OUT/parallel SWEEP_TIMEOUT_S=180 bash scripts/gpu-bench.sh \
      "+sweep=parallel $GPT2 parallel.ranks_per_node=2 launcher.gpus_per_node=1 bench.timeout_s=140 sweep.name=parallel-shared" ;;
esac
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.csv" 2>&1
tar -C "$OUT" -czf "$final/trust-$1.tar.gz" .
ls -la "$final"
