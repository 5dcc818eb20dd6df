#!/usr/bin/env bash
# One device call of the trust-gate check on the H200 (issue 27): which part is $1. Each sweep's
# table, results, verdict and dashboard land in $OUT/PART.tar.gz as each sweep ends.
#   clean   +sweep=modes workload.size=gpt2 bench.dtype=bf16 at product defaults, the GPU alone:
#           the verdict should name a setting (and the sweep's time by phase is kept)
#   prime   the primer's parts timed in fresh processes (prime_parts.py)
#   busy    eager and default on the same model while a second process runs bf16 matmuls on the same
#           GPU for the whole sweep: the verdict should refuse ("no trustworthy answer")
# Wheels: ../shared/scripts/device-wheels.sh plotly==7.1.0 nvidia-ml-py (carry .whl).
set -uo pipefail
cd "$(dirname "$0")/../.."
part=$1
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out
mkdir -p "$work" "$final"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
save() { tar -C "$work" -czf "$final/$part.tar.gz" .; }
sweep() {  # NAME SECONDS "orchestrator overrides"
  local dir=/tmp/sweeps/$1
  echo "=== $1: python3 -m orchestrator $3"
  # shellcheck disable=SC2086
  /usr/bin/time -f "sweep wall %e s" timeout "$2" python3 -m orchestrator $3 sweep.dir="$dir" logger=none sweep.name="$1" 2>&1 | tail -60 | tee "$work/$1.log"
  python3 -m orchestrator gather "$dir" > "$work/$1.txt" 2>&1
  mkdir -p "$work/$1"
  cp "$dir/results.csv" "$dir/results.jsonl" "$dir/verdict.json" "$dir/dashboard.html" "$work/$1/" 2>/dev/null
  echo "python3 -m orchestrator $3" > "$work/$1/command.txt"
  save
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)' > "$work/versions.txt" 2>&1
GPT2="workload.size=gpt2 bench.dtype=bf16"
case "$part" in
  prime)
    # The primer's parts, in three fresh processes (the first pays any per-machine one-off).
    for i in 1 2 3; do timeout 150 python3 benchmarks/h200-gate/prime_parts.py cuda; done > "$work/prime_parts.jsonl" 2> "$work/prime_parts.err"
    cat "$work/prime_parts.jsonl" ;;
  clean)
    sweep modes-gpt2 ${CAP_S:-540} "+sweep=modes $GPT2 ${EXTRA:-}" ;;
  busy)
    # The co-tenant: 8192^2 bf16 matmuls back to back, its own CUDA context, for the whole sweep.
    python3 -c "
import torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
while True:
    for _ in range(50):
        b = a @ a
    torch.cuda.synchronize()
" &
    load=$!
    sweep busy-gpt2 ${CAP_S:-300} "$GPT2 compile.mode=eager,default ${EXTRA:-}"
    kill $load ;;
esac
save
ls -la "$work"
