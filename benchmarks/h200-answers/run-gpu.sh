#!/usr/bin/env bash
# Issue 33 on the GPU: `+sweep=hf bench=quick` per task with the eager-against-eager control
# (compile.mode=eager,default), the profile pass (verdict.profile) and follow-ups on, so that every model's verdict
# carries its measured cause and, where a cause has a remedy, the follow-up job's answer. 48 jobs and
# their follow-ups do not fit one 10-minute call: each PART is a subset of the models for one task,
# its own sweep directory (kept on the machine: the same PART again on a warm machine resumes it),
# packed into $OUT/PART.tar.gz as it ends; merge.sh puts the parts together here.
#   PART=infer-a  inference: BERT, RoBERTa, DistilBERT, ALBERT, GPT-2 LM, GPT-2 classification
#   PART=infer-b  inference: Llama, Mistral, Qwen2, T5, BART, ViT
#   PART=train-a  training: BERT, RoBERTa, DistilBERT, ALBERT
#   PART=train-b  training: GPT-2 LM, GPT-2 classification, Llama, Mistral
#   PART=train-c  training: Qwen2, BART, ViT
#   PART=train-t5 training: T5 (its random-ops check compiles twice: 150-235 s a job on the H200)
#   LIMIT=seconds the sweep's limit (default 560)
#   RESUME=DIR    a part's returned folder (unpacked, in the working tree so that it travels) to go on from
#   device: PART=... WHEELS=.whl-lite bash benchmarks/h200-answers/run-gpu.sh   carry [".whl-lite"]
#   CPU check first: PY=.venv/bin/python CPU=1 PART=... bash benchmarks/h200-answers/run-gpu.sh
#                    (tiny sizes, two models a part: that each part runs, not its figures)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
final=${OUT:-benchmarks/out}
part=${PART:?PART=infer-a, infer-b, train-a, train-b, train-c or train-t5}
work=/tmp/gpu-out-answers/$part
mkdir -p "$work" "$final"
# A part's returned folder (with its sweep/) to go on from on a fresh machine: its finished jobs are skipped
[ -n "${RESUME:-}" ] && cp -r "$RESUME"/. "$work"/
py=${PY:-python3}
case "$part" in
  infer-a) task=infer; models=BertForMaskedLM,RobertaForMaskedLM,DistilBertForMaskedLM,AlbertForMaskedLM,GPT2LMHeadModel,GPT2ForSequenceClassification ;;
  infer-b) task=infer; models=LlamaForCausalLM,MistralForCausalLM,Qwen2ForCausalLM,T5ForConditionalGeneration,BartForConditionalGeneration,ViTForImageClassification ;;
  train-a) task=train; models=BertForMaskedLM,RobertaForMaskedLM,DistilBertForMaskedLM,AlbertForMaskedLM ;;
  train-b) task=train; models=GPT2LMHeadModel,GPT2ForSequenceClassification,LlamaForCausalLM,MistralForCausalLM ;;
  train-c) task=train; models=Qwen2ForCausalLM,BartForConditionalGeneration,ViTForImageClassification ;;
  train-t5) task=train; models=T5ForConditionalGeneration ;;
  *) echo "unknown PART=$part"; exit 2 ;;
esac
if [ -z "${CPU:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHEELS:-.whl-lite}/*.whl
  site=/tmp/site; where=""
  nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
else  # tiny, the first two models of the part
  site=""; where="workload.size=tiny bench.device=cpu"
  models=$(echo "$models" | cut -d, -f1-2)
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
$py -c 'import torch, transformers; print(torch.__version__, transformers.__version__)' > "$work/versions.txt" 2>&1
args="+sweep=hf bench=quick compile.mode=eager,default bench.task=$task workload.model=$models $where"
echo "python -m orchestrator $args sweep.dir=SWEEP logger=none" > "$work/command.txt"
echo "=== $part: python -m orchestrator $args" | tee -a "$work/log.txt"
# shellcheck disable=SC2086
PYTHONPATH=$site:$root timeout "${LIMIT:-560}" $py -m orchestrator $args sweep.dir="$work/sweep" logger=none \
  2>&1 | tail -60 | tee -a "$work/log.txt"
# The dashboard (MBs of plotly) is drawn again at the merge; every job's result and log come back.
tar -C "$work" --exclude=sweep/dashboard.html --exclude='*.lock' -czf "$final/$part.tar.gz" .
