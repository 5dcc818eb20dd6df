#!/usr/bin/env bash
# Issue 34 on the H200: `+sweep=generate` (Llama-3.2-1B's shape, random weights, bf16) at bench=quick,
# split into calls of under 10 minutes, and transformers' own `generate` beside two of its points.
# Each part's sweep directory (jobs/*/result.json, plan.json), log and command land in $OUT/PART.tar.gz
# as each sweep ends; the parts merge into one sweep directory afterwards (merge.sh) and the table and
# verdict come from re-running the sweep into it (every job found finished, nothing runs).
#   PART=check    first, about 2 minutes: the tiny preset, 16 new tokens, every CUDA path the parts take
#                 (static cache under eager, default and reduce-overhead; the dynamic cache under
#                 default), so that a GPU-only failure costs 2 minutes, not a part's 10
#   PART=b1       batch 1: prompts 128 and 1024 x eager, default, reduce-overhead (6 jobs)
#   PART=b8       batch 8, the same 6 jobs
#   PART=b64      batch 64, the same 6 jobs
#   PART=points   the dynamic cache at batch 8, prompt 128: compile.dynamic automatic and true (2 jobs)
#   PART=b1p1024  batch 1, prompt 1024 only (3 jobs): the parity rule's check on the GPU (run4)
#   PART=b64p1024 batch 64, prompt 1024 only (3 jobs): what run8's limit left of PART=b64
#   PART=bBpP     any batch B and prompt P alone (3 jobs), e.g. b64p128 to measure run8's unsteady point again
#   LIMIT=seconds a part's sweep limit (default 570), for a call shorter than 10 minutes
#   PART=gap      the eager step twice each way, alternating: independent.py's hand loop, eager only, and the
#                 sweep's batch-1, prompt-128 eager control (each its own process): the loop's 9% in run12
#   PART=same     the eager control (sweep) and independent.py --hand at batch 1, prompt 128, in one call
#   PART=loop     independent.py --hand (transformers' generate, static cache, compiled by itself, and with
#                 disable_compile=True; a hand-written loop and its per-token-wait variant) at batch 1 and 8, prompt 128, 128 new tokens
#   device: PART=... bash benchmarks/h200-generate/run-gpu.sh      carry [".whl-lite"]
#   CPU check first: PY=.venv/bin/python CPU=1 PART=... bash benchmarks/h200-generate/run-gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
final=${OUT:-benchmarks/out}
part=${PART:-b1}
work=/tmp/gpu-out-generate/$part
mkdir -p "$work" "$final"
py=${PY:-python3}
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  site=/tmp/site; size=""; loop="--size 1b"
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else  # tiny, few tokens: that every part runs, not its figures
  site=""; size="workload.size=tiny generate.new_tokens=8 bench.device=cpu workload.config={max_position_embeddings:2048}"
  loop="--size tiny --device cpu --new 8 --repeats 2"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
save() { tar -C "$work" -czf "$final/$part.tar.gz" .; }
sweep() {  # SECONDS "overrides"
  local dir=$work/sweep
  echo "=== $part: python -m orchestrator +sweep=generate bench=quick $2" | tee "$work/log.txt"
  # shellcheck disable=SC2086
  PYTHONPATH=$site:$root timeout "$1" $py -m orchestrator +sweep=generate bench=quick $size $2 \
    sweep.dir="$dir" logger=none verdict.follow_up=false 2>&1 | tail -40 | tee -a "$work/log.txt"
  echo "python -m orchestrator +sweep=generate bench=quick $size $2" > "$work/command.txt"
  save
}
case "$part" in
  # A CLI value of an axis holds for the preset's points too: they run in their own part, as a grid
  # of their own (the same configs, so the same job ids as in the whole sweep).
  check)  # the tiny preset whatever CPU says; its own sweep folder, not merged
    size="workload.size=tiny generate.new_tokens=16 workload.config={max_position_embeddings:2048} ${CPU:+bench.device=cpu}"
    sweep 200 "sweep.points=[['generate.cache=dynamic','compile=default']] workload.batch_size=1 generate.prompt_len=128" ;;
  b1|b8|b64) sweep "${LIMIT:-570}" "sweep.points=[] workload.batch_size=${part#b}" ;;
  b*p*) b=${part%p*}; sweep "${LIMIT:-570}" "sweep.points=[] workload.batch_size=${b#b} generate.prompt_len=${part#*p}" ;;
  points) sweep 570 "sweep.points=[] workload.batch_size=8 generate.prompt_len=128 generate.cache=dynamic compile=default compile.dynamic=null,true" ;;
  gap)  # the eager step, twice each way, alternating: the hand loop's eager side alone (host clock and
        # per-token events) in a fresh process, then the sweep's eager control job in its own sweep
    for i in 1 2; do
      # shellcheck disable=SC2086
      PYTHONPATH=$site timeout 150 $py benchmarks/h200-generate/independent.py $loop --hand --eager-only \
        --batch 1 --prompt 128 --out "$work/loop-eager-$i.json" 2>&1 | tail -2 | tee -a "$work/log.txt"
      # shellcheck disable=SC2086
      PYTHONPATH=$site:$root timeout 200 $py -m orchestrator +sweep=generate bench=quick $size sweep.points=[] \
        workload.batch_size=1 generate.prompt_len=128 compile=eager sweep.dir="$work/sweep-$i" logger=none \
        verdict.follow_up=false 2>&1 | grep -E "^(ok|failed|hf) " | tee -a "$work/log.txt"
      save
    done ;;
  same)  # the sweep's eager control and the loop at batch 1, prompt 128, in one call (one host)
    sweep 240 "sweep.points=[] workload.batch_size=1 generate.prompt_len=128 compile=eager"
    bs=1 ;&
  loop)
    for b in ${bs:-1 8}; do
      # shellcheck disable=SC2086
      PYTHONPATH=$site timeout 280 $py benchmarks/h200-generate/independent.py $loop --hand --batch $b --prompt 128 \
        --out "$work/loop-b$b.json" 2>&1 | tail -12 | tee -a "$work/log.txt"
      save
    done ;;
  *) echo "unknown PART=$part"; exit 2 ;;
esac
save
