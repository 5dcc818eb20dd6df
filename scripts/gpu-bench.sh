#!/usr/bin/env bash
# Run sweeps on a GPU host that lacks Hydra/submitit/wandb (the lent H200): install the carried
# wheels from .whl/ (made by ../shared/scripts/device-wheels.sh), run each sweep given as one
# quoted argument, and copy each sweep's table, full results and dashboard to $OUT/<n>/.
#   bash scripts/gpu-bench.sh "+sweep=modes workload.size=gpt2 bench.dtype=bf16" ...
# VERDICT_STEPS="10000 1000000" also recomputes each sweep's verdict for those run lengths
# (`orchestrator verdict DIR verdict.steps=N`) into verdict-N.txt / verdict-N.json.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 OUT=${OUT:-benchmarks/out}
nvidia-smi -L || true
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
n=0
for args in "$@"; do
  n=$((n + 1)); dir=/tmp/sweeps/$(date +%s)-run$n
  echo "=== run $n: python3 -m orchestrator $args sweep.dir=$dir"
  # shellcheck disable=SC2086
  timeout "${SWEEP_TIMEOUT_S:-540}" python3 -m orchestrator $args sweep.dir=$dir logger=none
  python3 -m orchestrator gather "$dir" >/dev/null  # the table of what finished, even after a timeout
  mkdir -p "$OUT/run$n"
  cp "$dir/results.csv" "$dir/results.jsonl" "$dir/dashboard.html" "$dir/verdict.json" "$OUT/run$n/" 2>/dev/null
  for steps in ${VERDICT_STEPS:-}; do
    python3 -m orchestrator verdict "$dir" verdict.steps="$steps" | tee "$OUT/run$n/verdict-$steps.txt"
    cp "$dir/verdict.json" "$OUT/run$n/verdict-$steps.json"
  done
  echo "python3 -m orchestrator $args" > "$OUT/run$n/command.txt"
done
