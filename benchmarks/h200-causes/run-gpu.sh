#!/usr/bin/env bash
# One device call (issue 33): BERT and RoBERTa MLM inference (+sweep=hf's models at size base, bf16,
# bench=quick) with the profile pass, so that each verdict carries its measured causes and, where a
# cause has a remedy, a follow-up job; then the same at the harness's numerics (TF32, reduced-precision
# math attention). Files land in $OUT/causes.tar.gz as each sweep ends.
#   device: bash benchmarks/h200-causes/run-gpu.sh            carry [".whl-lite"], WHEELS=.whl-lite
#   CPU check first: PY=.venv/bin/python CPU=1 bash benchmarks/h200-causes/run-gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out-causes
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
save() { tar -C "$work" -czf "$final/causes.tar.gz" .; }
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
models="workload=hf workload.model=BertForMaskedLM,RobertaForMaskedLM workload.size=$size bench.task=infer bench.dtype=bf16"
sweep defaults 380 "$models compile.mode=eager,default bench=quick bench.profile=true $where"
bert="workload=hf workload.model=BertForMaskedLM workload.size=$size bench.task=infer bench.dtype=bf16"
sweep harness-numerics 150 "$bert compile.mode=eager,default bench=quick bench.profile=true bench.matmul_precision=high bench.sdp_reduced_math=true verdict.follow_up=false $where"
save
ls -la "$work"
