#!/usr/bin/env bash
# The same sweep before architecture round 4 (1a007ae, checked out beside this one) and after: a
# failure (user_models:Raises), the profile, the shape schedule with compile.dynamic=false (so that
# recompiles name the lever compile.dynamic=true: a follow-up job), and DDP (two gloo ranks), on the CPU.
#   git worktree add /tmp/before 1a007ae
#   SIDE=before bash benchmarks/cpu-arch-round4/run.sh /tmp/before ; SIDE=after bash ... (or both)
# then: python benchmarks/cpu-arch-round3/same_rows.py OUT/before OUT/after   (round 3's comparison, unchanged)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
after=$(cd "$here/../.." && pwd)
before=${1:?the checkout of the commit before}
out=${OUT:-$here/out}
python=${PYTHON:-$after/.venv/bin/python}
mkdir -p "$out"
for side in ${SIDE:-before after}; do
  code=$([ "$side" = before ] && echo "$before" || echo "$after")
  (cd "$out" && PYTHONPATH="$code" OMP_NUM_THREADS=1 "$python" -m orchestrator workload=module "workload.path=$after/tests" \
    "workload.inputs=[[4,8,32]]" "workload.shapes=[6,10]" compile.dynamic=false bench.task=infer \
    workload.target=user_models:MLP,user_models:Raises parallel=none,ddp parallel.ranks_per_node=2 \
    bench.profile=true bench.repeats=3 bench.steps_per_repeat=1 bench.warmup=1 logger=none \
    compile.probes=false sweep.report=false "sweep.dir=$out/$side" > "$out/$side.log" 2>&1) || true
  tail -14 "$out/$side.log"
done
