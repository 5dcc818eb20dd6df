#!/usr/bin/env bash
# Issue 58 on the GPU: how near served decode and prefill come to the card's limits (MBU, MFU).
#   `+sweep=generate` (Llama-3.2-1B's shape, random weights, bf16, static cache) at batch 1 and 8,
#   prompt 128, 128 new tokens: eager control, default, reduce-overhead (6 jobs), with this node's
#   peaks measured once (bench.measure_peaks=true) beside the datasheet's. Its sweep folder (results,
#   verdict), log and command land in $OUT/generate.tar.gz, also where LIMIT cut it.
#   BATCHES=1,8 MODES=eager,default,reduce-overhead: the axes (defaults as above), for a shorter call
#   device: WHEELS=.whl-lite bash benchmarks/h100-limits/run-gpu.sh      carry [".whl-lite"]
#   CPU check first: PY=.venv/bin/python CPU=1 bash benchmarks/h100-limits/run-gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out-limits/generate
mkdir -p "$work" "$final"
py=${PY:-python3}
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  site=/tmp/site; size=""
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else  # tiny, few tokens: that it runs, not its figures
  site=""; size="workload.size=tiny generate.new_tokens=8 bench.device=cpu workload.config={max_position_embeddings:2048}"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
args="+sweep=generate bench=quick sweep.points=[] workload.batch_size=${BATCHES:-1,8} compile=${MODES:-eager,default,reduce-overhead} generate.prompt_len=128 bench.measure_peaks=true verdict.follow_up=false $size"
echo "python -m orchestrator $args sweep.dir=SWEEP logger=none" > "$work/command.txt"
start=$(date +%s)
# shellcheck disable=SC2086
PYTHONPATH=$site:$root timeout "${LIMIT:-520}" $py -m orchestrator $args sweep.dir="$work/sweep" logger=none \
  2>&1 | tail -60 | tee "$work/log.txt"
echo "wall $(( $(date +%s) - start )) s" | tee -a "$work/log.txt"
tar -C "$work" --exclude=sweep/dashboard.html --exclude='*.lock' --exclude='*.pkl' -czf "$final/generate.tar.gz" .
