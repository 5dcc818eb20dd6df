#!/usr/bin/env bash
# Issue 36 on the H200: the same sweeps with the code before this change (.before/, `git archive
# 87d98ac`) and after it (this tree), one GPU host, bench=quick. Each sweep's log, results.jsonl
# and command land in $OUT/time.tar.gz as each sweep ends.
#   PART=check    after only: BERT base infer eager+default (the fork server on CUDA, end to end)
#   PART=infer    BERT and ViT inference in one sweep: before, after (repeat 1), after, before (repeat 2)
#   PART=train1   Llama and T5 training in one sweep: before, after (repeat 1)
#   PART=train2   the same, after first (repeat 2)
#   PART=trainA   T5 training before, after, then Llama before, after: one model a sweep, each sweep's
#                 limit cut to what is left of DEADLINE seconds (default 565) from the script's start,
#                 so that a call of 600 s returns every sweep that ended
#   PART=trainB   the same after first: T5 after, before, then Llama after, before (repeat 2)
#   PART=trainC   what trainA left, then repeat 2 where it fits: Llama after (repeat 1), T5 after,
#                 Llama after, Llama before (repeat 2); ran as run12 (trainB would not have fitted)
#   PART=t5r2     T5 training before (its second repeat), then after (its third): after the fix that
#                 gives the random-ops check the weights as built, the after's parity figure should
#                 read as the before's (0.0312; 0.0100 on the trained weights in run11/run12)
#   PART=ab       after only: fork_diag.py (fork against interpreter), then BERT and ViT inference with
#                 launcher.fork_server=true, then false, twice
#   PART=ab2      defaults (before, after), then BERT and ViT inference with launcher.spares=true,
#                 then launcher.fork_server=false, then fork_diag.py (fork, spare, interpreter): ran
#                 at commit 5fccda8, whose spares (interpreters started ahead) are since taken out
#   PART=t5       T5 training alone: before, then after
#   PART=overlap  after only: BERT, ViT and DistilBERT inference with launcher.overlap=true, then
#                 false, twice (does a job's start beside another's measurements bend its figures?)
#   PART=defaults before, then after: BERT infer at product defaults (3 processes, probes, memory)
#   PART=diag     fork_diag.py alone (fork, interpreter, interpreter pinned to the fork's CPU): where
#                 forks ran and how their time was spent (why did run4-ab's forks run Python slower?)
#   device: PART=... bash benchmarks/h200-time-to-answer/run-gpu.sh   carry [".whl-lite", ".before"]
#   CPU check first: PY=.venv/bin/python CPU=1 PART=... bash benchmarks/h200-time-to-answer/run-gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out-time
mkdir -p "$work" "$final"
py=${PY:-python3}
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  site=/tmp/site; size=base; where=""; vit=ViTForImageClassification; t5=T5ForConditionalGeneration
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else
  site=""; size=tiny; where="bench.device=cpu"; vit=ViTForImageClassification; t5=T5ForConditionalGeneration
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
nproc > "$work/nproc.txt"
save() { tar -C "$work" -czf "$final/time.tar.gz" .; }
start=$(date +%s)
sweep() {  # VERSION(before|after) NAME SECONDS "overrides"
  local code=$root; [ "$1" = before ] && code=$root/.before
  local left=$(( ${DEADLINE:-100000} - ($(date +%s) - start) - 5 ))
  if [ "$left" -lt 60 ]; then echo "=== $2: skipped, ${left}s left of DEADLINE" | tee "$work/$2.log"; return; fi
  set -- "$1" "$2" "$(( $3 < left ? $3 : left ))" "$4"
  local dir=/tmp/sweeps-time/$2 name=$2
  rm -rf "$dir"
  echo "=== $name ($1): python -m orchestrator $4" | tee "$work/$name.log"
  local t0; t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  (cd "$code" && PYTHONPATH=$site:$code timeout "$3" $py -m orchestrator $4 sweep.dir="$dir" logger=none \
     verdict.follow_up=false sweep.name="$name" 2>&1 | tail -30) | tee -a "$work/$name.log"
  echo "wall_s $(python3 -c "import time; print(round(time.time() - $t0, 1))")" | tee -a "$work/$name.log"
  mkdir -p "$work/$name"
  cp "$dir/results.csv" "$dir/results.jsonl" "$work/$name/" 2>/dev/null
  # a sweep cut by its timeout writes no table: keep the results of the jobs that finished
  [ -f "$work/$name/results.jsonl" ] || for f in "$dir"/jobs/*/result.json; do
    [ -f "$f" ] && python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$f" \
      >> "$work/$name/results.jsonl"; done
  echo "python -m orchestrator $4  (code: $1)" > "$work/$name/command.txt"
  save
}
common="workload=hf workload.size=$size bench.dtype=bf16 bench=quick $where"
infer() { sweep "$1" "$1-$2-infer" 200 "$common workload.model=BertForMaskedLM,$vit bench.task=infer compile.mode=default"; }
train() { sweep "$1" "$1-$2-train" 296 "$common workload.model=LlamaForCausalLM,$t5 bench.task=train compile.mode=default"; }
one() { sweep "$1" "$1-$2-$3" "$4" "$common workload.model=$3 bench.task=train compile.mode=default"; }
case "${PART:-check}" in
  trainA) DEADLINE=${DEADLINE:-565}; one before r1 "$t5" 300; one after r1 "$t5" 400; one before r1 LlamaForCausalLM 150; one after r1 LlamaForCausalLM 150 ;;
  trainB) DEADLINE=${DEADLINE:-565}; one after r2 "$t5" 400; one before r2 "$t5" 300; one after r2 LlamaForCausalLM 150; one before r2 LlamaForCausalLM 150 ;;
  t5r2) DEADLINE=${DEADLINE:-565}; one before r2 "$t5" 300; one after r3 "$t5" 300 ;;
  trainC) DEADLINE=${DEADLINE:-565}; one after r1 LlamaForCausalLM 150; one after r2 "$t5" 400; one after r2 LlamaForCausalLM 150; one before r2 LlamaForCausalLM 150 ;;
  check) sweep after check 300 "$common workload.model=BertForMaskedLM bench.task=infer compile.mode=eager,default" ;;
  infer) infer before r1; infer after r1; infer after r2; infer before r2 ;;
  train1) train before r1; train after r1 ;;
  train2) train after r2; train before r2 ;;
  ab)  # after only: the fork server on and off, interleaved (the timed figures' question)
    (PYTHONPATH=$site:$root/benchmarks/h200-time-to-answer:$root DIAG_DIR=/tmp/fork-diag timeout 150 $py \
       benchmarks/h200-time-to-answer/fork_diag.py ${CPU:+cpu} 2>&1 | tee "$work/fork-diag.jsonl"); save
    for r in r1 r2; do
      sweep after "fork-on-$r" 200 "$common workload.model=BertForMaskedLM,$vit bench.task=infer compile.mode=default launcher.fork_server=true"
      sweep after "fork-off-$r" 200 "$common workload.model=BertForMaskedLM,$vit bench.task=infer compile.mode=default launcher.fork_server=false"
    done ;;
  ab2)
    sweep before before-defaults 200 "workload=hf workload.size=$size bench.dtype=bf16 $where workload.model=BertForMaskedLM bench.task=infer compile.mode=default"
    sweep after after-defaults 200 "workload=hf workload.size=$size bench.dtype=bf16 $where workload.model=BertForMaskedLM bench.task=infer compile.mode=default launcher.fork_server=true"
    sweep after spare-r1 150 "$common workload.model=BertForMaskedLM,$vit bench.task=infer compile.mode=default launcher.spares=true"
    sweep after off-r1 150 "$common workload.model=BertForMaskedLM,$vit bench.task=infer compile.mode=default launcher.fork_server=false"
    (PYTHONPATH=$site:$root/benchmarks/h200-time-to-answer:$root DIAG_DIR=/tmp/fork-diag timeout 150 $py \
       benchmarks/h200-time-to-answer/fork_diag.py ${CPU:+cpu} 2>&1 | tee "$work/fork-diag.jsonl"); save ;;
  overlap)  # after only, interleaved: three jobs, so two of them measure while the next one starts
    three="$common workload.model=BertForMaskedLM,$vit,DistilBertForMaskedLM bench.task=infer compile.mode=default"
    for r in r1 r2; do
      sweep after "overlap-on-$r" 140 "$three launcher.overlap=true"
      sweep after "overlap-off-$r" 140 "$three launcher.overlap=false"
    done ;;
  t5)
    sweep before before-t5 230 "$common workload.model=$t5 bench.task=train compile.mode=default"
    sweep after after-t5 200 "$common workload.model=$t5 bench.task=train compile.mode=default" ;;
  diag)
    (PYTHONPATH=$site:$root/benchmarks/h200-time-to-answer:$root DIAG_DIR=/tmp/fork-diag timeout 200 $py \
       benchmarks/h200-time-to-answer/fork_diag.py ${CPU:+cpu} 2>&1 | tee "$work/fork-diag.jsonl")
    cp /tmp/fork-diag/interrupts.txt "$work/" 2>/dev/null; save ;;
  defaults)
    sweep before before-defaults 280 "workload=hf workload.size=$size bench.dtype=bf16 $where workload.model=BertForMaskedLM bench.task=infer compile.mode=default"
    sweep after after-defaults 280 "workload=hf workload.size=$size bench.dtype=bf16 $where workload.model=BertForMaskedLM bench.task=infer compile.mode=default" ;;
esac
save
ls -la "$work"
