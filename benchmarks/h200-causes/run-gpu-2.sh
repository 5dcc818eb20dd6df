#!/usr/bin/env bash
# Call 2 (issue 33): BERT MLM inference at product numerics with the profile pass and follow-ups on,
# after the nvjet fix and the math-attention lever (README, "After this run"): which lever the verdict
# now picks, and what it measures. Files land in $OUT/causes2.tar.gz.
#   device: bash benchmarks/h200-causes/run-gpu-2.sh          carry [".whl-lite"], WHEELS=.whl-lite
#   CPU check first: PY=.venv/bin/python CPU=1 bash benchmarks/h200-causes/run-gpu-2.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out-causes2
rm -rf "$work" && mkdir -p "$work" "$final"
py=${PY:-python3}
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  export PYTHONPATH=/tmp/site:$PWD
  size=base; where=""
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else
  size=tiny; where="bench.device=cpu"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
save() { tar -C "$work" -czf "$final/causes2.tar.gz" .; }
sweep() {  # NAME SECONDS "orchestrator overrides"
  local dir=/tmp/sweeps-causes/$1
  rm -rf "$dir"
  echo "=== $1: python -m orchestrator $3" | tee "$work/$1.log"
  # shellcheck disable=SC2086
  timeout "$2" $py -m orchestrator $3 sweep.dir="$dir" logger=none sweep.name="$1" 2>&1 | tail -40 | tee -a "$work/$1.log"
  mkdir -p "$work/$1"
  cp "$dir/results.csv" "$dir/results.jsonl" "$dir/verdict.json" "$work/$1/" 2>/dev/null
  echo "python -m orchestrator $3" > "$work/$1/command.txt"
  save
}
bert="workload=hf workload.model=BertForMaskedLM workload.size=$size bench.task=infer bench.dtype=bf16"
sweep bert-math-lever 330 "$bert compile.mode=eager,default bench=quick bench.profile=true $where"
save
ls -la "$work"
