#!/usr/bin/env bash
# One device call of the real-models benchmarks (issue 26): which part is $1. Each part's files are
# packed into $OUT/PART.tar.gz as each step ends (a call cut short keeps what finished).
#   bert    PyTorch's own harness (a copy of ../shared/dynamo-harness carried as .harness/) and the
#           orchestrator, BERT-base MLM 16 x 512 bf16, inference and training, in the same call
#   train   +sweep=hf training (bf16, size small, bench=quick: one process, no probes), and BERT-base
#           training with the optimizer step compiled too (the harness's protocol)
#   last    call_overhead.py (the harness's call and ours, one process), then +sweep=hf train and infer
#   infer   +sweep=hf inference, then +sweep=timm inference while the call has time
# Wheels: ../shared/scripts/device-wheels.sh plotly==7.1.0 (carry .whl and .harness).
set -uo pipefail
cd "$(dirname "$0")/../.."
part=$1
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out
mkdir -p "$work" "$final"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
save() { tar -C "$work" -czf "$final/$part.tar.gz" .; }
sweep() {  # NAME SECONDS "orchestrator overrides": one sweep, its table and results kept
  local dir=/tmp/sweeps/$1
  echo "=== $1: python3 -m orchestrator $3"
  # shellcheck disable=SC2086
  timeout "$2" python3 -m orchestrator $3 sweep.dir="$dir" logger=none sweep.name="$1" 2>&1 | tail -40
  python3 -m orchestrator gather "$dir" > "$work/$1.txt" 2>&1
  mkdir -p "$work/$1"
  cp "$dir/results.csv" "$dir/results.jsonl" "$dir/verdict.json" "$work/$1/" 2>/dev/null
  echo "python3 -m orchestrator $3" > "$work/$1/command.txt"
  save
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
python3 -c 'import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)' \
  > "$work/versions.txt" 2>&1
BERT="workload=hf workload.model=BertForMaskedLM workload.size=default bench.dtype=bf16 bench=quick"
case "$part" in
  bert)
    # The harness first (its own process per run, fresh caches), then the orchestrator's jobs.
    (cd .harness && OUT=$work/harness MODELS="BertForMaskedLM:16" BUDGET_S=210 PER_RUN_TIMEOUT_S=150 \
      MIN_START_TRAIN_S=100 MIN_START_INFER_S=40 bash run.sh > "$work/harness.log" 2>&1)
    (cd .harness && OUT=$work/harness-nocg MODELS="BertForMaskedLM:16" MODES=inference BUDGET_S=70 \
      PER_RUN_TIMEOUT_S=70 MIN_START_INFER_S=40 EXTRA_FLAGS=--disable-cudagraphs bash run.sh \
      > "$work/harness-nocg.log" 2>&1)
    save
    # Inference as the harness feeds it (labels, no mask), without and with CUDA graphs; then with
    # an attention mask of ones; then a server's inputs (no labels, no mask: the default).
    sweep bert-infer 150 "$BERT bench.task=infer workload.labels=true compile.mode=default,reduce-overhead"
    sweep bert-infer-mask 80 "$BERT bench.task=infer workload.labels=true workload.attention_mask=true"
    sweep bert-infer-serve 80 "$BERT bench.task=infer"
    sweep bert-train 100 "$BERT bench.task=train" ;;
  train)
    sweep hf-train 420 "+sweep=hf workload.size=small bench=quick bench.repeats=6 bench.task=train"
    sweep bert-train-optimizer 100 "$BERT bench.task=train compile.optimizer=true" ;;
  last)
    # Why a compiled BERT inference step reads slower here than in the harness: the calls compared
    # in one process; then the suite, training and inference, for what time is left.
    timeout 170 python3 benchmarks/h200-real/call_overhead.py > "$work/call_overhead.jsonl" 2> "$work/call_overhead.err"
    save
    sweep hf 380 "+sweep=hf workload.size=small bench=quick bench.repeats=6" ;;
  infer)
    sweep hf-infer 330 "+sweep=hf workload.size=small bench=quick bench.repeats=6 bench.task=infer"
    sweep timm-infer 200 "+sweep=timm bench=quick bench.repeats=6 bench.task=infer" ;;
esac
save
ls -la "$work"
