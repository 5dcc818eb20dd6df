#!/usr/bin/env bash
# One device call (issue 33, point 5): the orchestrator's T5 training job (base preset, 8 x 512, bf16,
# bench=quick) after two changes (random-ops parity compiles without inductor's reordering passes; a
# parity result names its worst three tensors), then PyTorch's harness --accuracy --training on the
# same model build and batch (T5_PRESET=ours, batch 8; its same() calls recorded tensor by tensor).
# Files land in $OUT/t5.tar.gz as each step ends.
#   device: WHEELS=.whl-lite bash benchmarks/h200-t5-parity/run-gpu.sh   carry [".whl-lite", ".harness"]
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out-t5
rm -rf "$work" && mkdir -p "$work" "$final"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
save() { tar -C "$work" -czf "$final/t5.tar.gz" .; }
python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$work/gpu.csv" 2>&1
dir=/tmp/sweeps-t5/t5-train
args="workload=hf workload.model=T5ForConditionalGeneration workload.size=base bench.task=train bench.dtype=bf16 compile.mode=default bench=quick verdict.follow_up=false"
echo "python -m orchestrator $args" > "$work/command.txt"
# shellcheck disable=SC2086
timeout 300 python3 -m orchestrator $args sweep.dir="$dir" logger=none sweep.name=t5-train > "$work/t5-train.log" 2>&1
echo "rc=$?" >> "$work/t5-train.log"
cp "$dir/results.jsonl" "$dir/verdict.json" "$work/" 2>/dev/null
tail -25 "$work/t5-train.log"; save
d=$(mktemp -d /tmp/ind.XXXXXX); export TORCHINDUCTOR_CACHE_DIR=$d/inductor TRITON_CACHE_DIR=$d/triton
(cd .harness && SAME_JSON=$work/harness-same.json T5_PRESET=ours timeout -k 10 220 python3 ../benchmarks/h200-reasons/harness_t5.py \
  --accuracy --training --amp --amp-dtype bfloat16 --backend inductor --device cuda \
  --only T5ForConditionalGeneration --batch-size 8 --output "$work/harness.csv" > "$work/harness.log" 2>&1)
echo "rc=$?" >> "$work/harness.log"
tail -4 "$work/harness.log"; cat "$work/harness.csv" 2>/dev/null; save
ls -la "$work"
