#!/usr/bin/env bash
# Issue 58, item 3 on the GPU: where a job's fixed cost goes, and the fork server's slow eager settled.
#   PART=diag    diag.py: start-up imports, the primer's parts, each CPU's speed, then a fork and an
#                interpreter pinned to the same CPUs (fastest, median, slowest), three rounds (about 3 min)
#   PART=subset  the fixed subset (BERT and ViT inference, Llama training, bench=quick), each job's wall_*
#                phases, per start in HOWS (default "interpreters ahead"; also "forks"), AFTER: more
#                overrides for every sweep, ROUNDS: times through HOWS, interleaved (about 3 min a start)
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
    # one sweep: BERT and ViT inference, and Llama training as a point beside them
    S="workload=hf workload.size=$size bench=quick bench.dtype=bf16 compile.mode=default verdict.follow_up=false"
    ALL="$S workload.model=BertForMaskedLM,ViTForImageClassification bench.task=infer"
    ALL="$ALL sweep.points=[[\"workload.model=LlamaForCausalLM\",\"bench.task=train\"]]"
    names=()
    for round in $(seq "${ROUNDS:-1}"); do for how in ${HOWS:-interpreters ahead}; do
      name=$how; [ "${ROUNDS:-1}" = 1 ] || name=$how-r$round
      names+=("$work/$name/results.jsonl")
      case $how in
        interpreters) extra="launcher.fork_server=false" ;;  # the GPU default: each process a new interpreter
        ahead) extra="launcher.fork_server=false launcher.start_ahead=true" ;;  # interpreters started ahead
        forks) extra="launcher.fork_server=true" ;;
        *) echo "unknown HOWS entry $how"; exit 2 ;;
      esac
      sweep "$name" "${LIMIT:-270}" "$ALL $extra ${AFTER:-}"
    done; done
    $py benchmarks/h100-fixed-cost/steps.py "${names[@]}" | tee "$work/steps.md" ;;
  *) echo "unknown PART=$part"; exit 2 ;;
esac
save
ls -la "$work"
