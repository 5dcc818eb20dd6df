#!/usr/bin/env bash
# One device call of issue 33's reasons (points 4 and 5); which part is $1. Each step's files are
# packed into $OUT/<part>.tar.gz as it ends (a call cut short keeps what finished). Carry .harness
# (a copy of ../shared/dynamo-harness, excluded by .git/info/exclude); no wheels needed.
#   t5ours     t5_parity.py on the orchestrator's failing build (T5 base preset, 8 x 512), then
#              PyTorch's harness --accuracy --training on the same model size and batch
#   bertwhere  bert_eager.py (one process, then three fresh ones), then t5_where.py (which random
#              op draws differently under inductor; 2-layer T5 of the base width, sdpa and eager attention)
#   t5harness  PyTorch's harness --accuracy --training on its own T5Config() at batch 4, then
#              t5_parity.py on that build, then bert_eager.py --enqueue (the host's time to enqueue an
#              eager step), then t5_where.py at 12 layers (sdpa) while the call has time
#   t5switch   t5_switch.py: t5_parity.py's 'ours' build with one difference from t5_where.py switched at
#              a time; two processes side by side on the one GPU (one inductor cache), under 300 s in all
set -uo pipefail
cd "$(dirname "$0")/../.."
part=$1
final=${OUT:-benchmarks/out}
here=$PWD/benchmarks/h200-reasons
work=/tmp/gpu-out/$part
mkdir -p "$work" "$final"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
save() { tar -C /tmp/gpu-out -czf "$final/$part.tar.gz" "$part"; }
fresh_cache() { local d; d=$(mktemp -d /tmp/ind.XXXXXX); export TORCHINDUCTOR_CACHE_DIR=$d/inductor TRITON_CACHE_DIR=$d/triton; }
gpu_state() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader >> "$work/gpu-state.csv" 2>&1; }
{ nvidia-smi; python3 -c 'import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)'; nproc; uptime; } > "$work/env.txt" 2>&1
gpu_state
harness() {  # NAME TIMEOUT PRESET BATCH: the harness's accuracy run, its same() calls recorded
  local name=$1 t=$2 preset=$3 bs=$4
  fresh_cache
  echo "=== harness $name: T5_PRESET=$preset --batch-size $bs"
  (cd .harness && SAME_JSON=$work/$name-same.json T5_PRESET=$preset timeout -k 10 "$t" python3 "$here/harness_t5.py" \
    --accuracy --training --amp --amp-dtype bfloat16 --backend inductor --device cuda \
    --only T5ForConditionalGeneration --batch-size "$bs" --output "$work/$name.csv" > "$work/$name.log" 2>&1)
  echo "rc=$?" >> "$work/$name.log"
  tail -3 "$work/$name.log"; cat "$work/$name.csv" 2>/dev/null; cat "$work/$name-same.txt" 2>/dev/null
  gpu_state; save
}
case "$part" in
  t5ours)
    fresh_cache
    timeout -k 10 330 python3 "$here/t5_parity.py" --device cuda --builds ours --budget-s 240 \
      --out "$work/t5-ours" > "$work/t5-ours.log" 2>&1
    echo "rc=$?" >> "$work/t5-ours.log"
    tail -45 "$work/t5-ours.log"; gpu_state; save
    harness harness-ours 220 ours 8 ;;
  bertwhere)
    fresh_cache
    timeout -k 10 150 python3 "$here/bert_eager.py" --device cuda --out "$work/bert" > "$work/bert-main.log" 2>&1
    for i in 1 2 3; do
      timeout -k 10 45 python3 "$here/bert_eager.py" --device cuda --mini --out "$work/bert" > "$work/bert-mini$i.log" 2>&1
    done
    tail -30 "$work/bert-main.log"; grep -h "median\|cpu bench" "$work"/bert-mini*.log; gpu_state; save
    fresh_cache
    timeout -k 10 170 python3 "$here/t5_where.py" --device cuda --out "$work/where" > "$work/where.log" 2>&1
    echo "rc=$?" >> "$work/where.log"
    grep -v "^USDT" "$work/where.log" | tail -12; gpu_state; save ;;
  t5harness)
    t_start=$(date +%s)
    harness harness-t5config 160 "" 4
    fresh_cache
    timeout -k 10 170 python3 "$here/t5_parity.py" --device cuda --builds harness --budget-s 110 \
      --out "$work/t5-harness" > "$work/t5-harness.log" 2>&1
    echo "rc=$?" >> "$work/t5-harness.log"
    tail -45 "$work/t5-harness.log"; gpu_state; save
    timeout -k 10 45 python3 "$here/bert_eager.py" --device cuda --enqueue --out "$work/bert" > "$work/bert-enqueue.log" 2>&1
    tail -4 "$work/bert-enqueue.log"; save
    if (( $(date +%s) - t_start < 300 )); then
      fresh_cache
      timeout -k 10 140 python3 "$here/t5_where.py" --device cuda --layers 12 --impls sdpa --out "$work/where12" \
        > "$work/where12.log" 2>&1
      echo "rc=$?" >> "$work/where12.log"
      grep -v "^USDT" "$work/where12.log" | grep -v "^  [EAC]:" | tail -6; gpu_state; save
    fi ;;
  t5switch)
    fresh_cache
    sw() {  # TAG VARIANTS: one process; no variant starts after 200 s, none runs past 280 s
      timeout -k 5 280 python3 "$here/t5_switch.py" --device cuda --variants "$2" --budget-s 200 --tag "$1" \
        --out "$work/switch" > "$work/switch-$1.log" 2>&1
      echo "rc=$?" >> "$work/switch-$1.log"
    }
    sw p1 base,cudnn_tf32,proc,attn &
    p1=$!
    sw p2 hs,noreorder,where &
    p2=$!
    while kill -0 "$p1" 2>/dev/null || kill -0 "$p2" 2>/dev/null; do
      sleep 5
      nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu,clocks.sm --format=csv,noheader >> "$work/gpu-mem.csv" 2>&1
      save
    done
    wait "$p1" "$p2"
    for t in p1 p2; do grep -v "^USDT" "$work/switch-$t.log" | tail -2; cat "$work/switch/t5_switch_$t.txt" 2>/dev/null | cut -c1-330; done
    gpu_state; save ;;
esac
save
ls -la "$work"
