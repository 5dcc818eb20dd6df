#!/usr/bin/env bash
# Issue 56 on the GPU: the best setting, found by stacking levers, against a brute-force grid.
#   PART=grid   BERT-base MLM inference, bf16, 16 x 512 (+sweep=hf bench=quick): every combination of
#               compile.mode default/reduce-overhead x bench.matmul_precision highest/high (TF32) x
#               bench.sdp_reduced_math false/true, follow-ups off: the best any stack of these could reach
#   PART=stack  BERT, RoBERTa, DistilBERT and GPT-2 classification inference at the product's settings
#               (compile.mode=default; no eager control, to fit one call) with stacked follow-ups on
#               (verdict.max_follow_ups, default 3)
#   MODELS=A,B  the stack part's models instead (BertForMaskedLM alone fits one call beside the grid)
#   LIMIT=seconds the sweep's limit (default 540); RESUME=DIR a returned folder to go on from
#   device: PART=grid WHEELS=.whl-lite bash benchmarks/h100-best-setting/run-gpu.sh   carry [".whl-lite"]
#   CPU check first: PY=.venv/bin/python CPU=1 PART=grid bash benchmarks/h100-best-setting/run-gpu.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
final=${OUT:-benchmarks/out}
part=${PART:?PART=grid or stack}
work=/tmp/gpu-out-best/$part
mkdir -p "$work" "$final"
[ -n "${RESUME:-}" ] && cp -r "$RESUME"/. "$work"/
py=${PY:-python3}
case "$part" in
  grid) args="+sweep=hf bench=quick bench.task=infer workload.model=BertForMaskedLM compile.mode=default,reduce-overhead bench.matmul_precision=highest,high bench.sdp_reduced_math=false,true verdict.follow_up=false" ;;
  stack) args="+sweep=hf bench=quick bench.task=infer compile.mode=default workload.model=${MODELS:-BertForMaskedLM,RobertaForMaskedLM,DistilBertForMaskedLM,GPT2ForSequenceClassification}" ;;
  *) echo "unknown PART=$part"; exit 2 ;;
esac
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  site=/tmp/site; where=""
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else  # tiny sizes on the CPU: that the part runs, not its figures
  site=""; where="workload.size=tiny bench.device=cpu"
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
echo "python -m orchestrator $args sweep.dir=SWEEP logger=none" > "$work/command.txt"
echo "=== $part: python -m orchestrator $args" | tee -a "$work/log.txt"
start=$(date +%s)
# shellcheck disable=SC2086
PYTHONPATH=$site:$root timeout "${LIMIT:-540}" $py -m orchestrator $args $where sweep.dir="$work/sweep" logger=none \
  2>&1 | tail -80 | tee -a "$work/log.txt"
echo "wall $(( $(date +%s) - start )) s" | tee -a "$work/log.txt"
tar -C "$work" --exclude=sweep/dashboard.html --exclude='*.lock' --exclude='*.pkl' -czf "$final/$part.tar.gz" .
