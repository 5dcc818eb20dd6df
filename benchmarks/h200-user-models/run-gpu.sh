#!/usr/bin/env bash
# One device call (issue 35): the transformers classes that used to crash the tool, and GPT-2's
# training break, on the H200 at bench=quick. Files land in $OUT/models.tar.gz as each sweep ends.
# Wheels: ../shared/scripts/device-wheels.sh plotly==7.1.0, then without wandb (logger=none; the tree
# must stay under 64 MiB): WHEELS=.whl-lite, a copy of .whl less wandb-*.whl (carry .whl-lite).
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out
mkdir -p "$work" "$final"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl}/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
save() { tar -C "$work" -czf "$final/models.tar.gz" .; }
sweep() {  # NAME SECONDS "orchestrator overrides"
  local dir=/tmp/sweeps/$1
  echo "=== $1: python3 -m orchestrator $3" | tee "$work/$1.log"
  # shellcheck disable=SC2086
  timeout "$2" python3 -m orchestrator $3 sweep.dir="$dir" logger=none sweep.name="$1" 2>&1 | tail -60 | tee -a "$work/$1.log"
  mkdir -p "$work/$1"
  cp "$dir/results.csv" "$dir/results.jsonl" "$dir/verdict.json" "$work/$1/" 2>/dev/null
  echo "python3 -m orchestrator $3" > "$work/$1/command.txt"
  save
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
sweep models 400 "workload=hf workload.model=GPT2LMHeadModel,WhisperForConditionalGeneration,CLIPModel,Phi3ForCausalLM workload.size=small bench=quick bench.task=train bench.dtype=bf16"
