#!/usr/bin/env bash
# The same sweep before (the commit before architecture round 3, checked out beside this one) and after:
# a failure (user_models:Raises), the profile, the shape schedule and DDP, on the CPU.
#   bash benchmarks/cpu-arch-round3/run.sh BEFORE_CHECKOUT   (e.g. git worktree add /tmp/before c78c90f)
# then: python benchmarks/cpu-arch-round3/same_rows.py OUT/before OUT/after
# EXTRA="..." adds overrides (round 4: EXTRA=compile.dynamic=false, so that a follow-up job runs too);
# SIDE=before or SIDE=after runs one side.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
after=$(cd "$here/../.." && pwd)
before=${1:?the checkout of the commit before}
out=${OUT:-$here/out}
python=${PYTHON:-$after/.venv/bin/python}
mkdir -p "$out"
for side in ${SIDE:-before after}; do
  code=$([ "$side" = before ] && echo "$before" || echo "$after")
  (cd "$out" && PYTHONPATH="$code" "$python" -m orchestrator workload=module "workload.path=$after/tests" \
    "workload.inputs=[[4,8,32]]" "workload.shapes=[6,10]" bench.task=infer \
    workload.target=user_models:MLP,user_models:Raises parallel=none,ddp parallel.ranks_per_node=2 \
    bench.profile=true bench.repeats=3 bench.steps_per_repeat=1 bench.warmup=1 logger=none \
    compile.probes=false sweep.report=false ${EXTRA:-} "sweep.dir=$out/$side" > "$out/$side.log" 2>&1) || true
  tail -12 "$out/$side.log"
done
