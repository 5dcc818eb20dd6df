#!/usr/bin/env bash
# Issue 58, item 3 on the GPU: where a job's fixed cost goes, and the fork server's slow eager settled.
#   PART=diag    diag.py: start-up imports, the primer's parts, each CPU's speed, then a fork and an
#                interpreter pinned to the same CPUs (fastest, median, slowest), three rounds (about 3 min)
#   PART=subset  the fixed subset (BERT and ViT inference, Llama training, bench=quick), fork server off
#                then on (AFTER: more overrides for the second sweep), each job's wall_* phases (about 6 min)
#   device: PART=... WHEELS=.whl-lite bash benchmarks/h100-fixed-cost/run-gpu.sh   carry [".whl-lite"]
#   CPU check: CPU=1 PY=.venv/bin/python PART=... bash benchmarks/h100-fixed-cost/run-gpu.sh (tiny sizes)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
final=${OUT:-benchmarks/out}
part=${PART:?PART=diag or subset}
work=/tmp/gpu-out-fixed/$part
rm -rf "$work" && mkdir -p "$work" "$final"
py=${PY:-python3}
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  export PYTHONPATH=/tmp/site:$root
  size=base; where=""; tiny=""
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else  # a check that every step runs, not its figures
  export PYTHONPATH=$root
  size=tiny; where=cpu; tiny="bench.device=cpu"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
save() { tar -C "$work" --exclude='dashboard.html' --exclude='*.lock' --exclude='*.pkl' -czf "$final/$part.tar.gz" .; }
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
sweep() {  # NAME SECONDS "overrides"
  echo "python -m orchestrator $3" > "$work/$1.command.txt"
  echo "=== $1: python -m orchestrator $3"
  # shellcheck disable=SC2086
  timeout "$2" $py -m orchestrator $3 $tiny sweep.dir="$work/$1" logger=none 2>&1 | tail -30 | tee "$work/$1.log"
  $py benchmarks/h100-fixed-cost/phases.py "$work/$1"/results.jsonl | tee "$work/$1.phases.md"
  save
}
case "$part" in
  diag)
    PYTHONPATH=benchmarks/h100-fixed-cost:benchmarks/h200-time-to-answer:$PYTHONPATH DIAG_DIR=$work/diag \
      timeout 400 $py benchmarks/h100-fixed-cost/diag.py $where | tee "$work/diag.jsonl"
    save ;;
  subset)
    S="workload=hf workload.size=$size bench=quick bench.dtype=bf16 compile.mode=default verdict.follow_up=false"
    INFER="$S workload.model=BertForMaskedLM,ViTForImageClassification bench.task=infer"
    TRAIN="$S workload.model=LlamaForCausalLM bench.task=train"
    for how in before after; do
      extra="launcher.fork_server=false"
      [ "$how" = after ] && extra="launcher.fork_server=true ${AFTER:-}"
      sweep "$how-infer" 200 "$INFER $extra"
      sweep "$how-train" 140 "$TRAIN $extra"
    done ;;
  *) echo "unknown PART=$part"; exit 2 ;;
esac
save
ls -la "$work"
