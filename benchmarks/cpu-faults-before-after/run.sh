#!/usr/bin/env bash
# Issue 59's "no figure measured today changes": the fault sweep of tests/test_faults.py (its user
# models, hang aside) at the commit before this round (a792be7) and at HEAD, each from a git worktree,
# then each job's status, failure class and figure keys side by side (compare.py).
#   bash benchmarks/cpu-faults-before-after/run.sh   (from the repo root, after `make setup`; about 10 min)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/faults-before-after}
rm -rf "$out"; mkdir -p "$out"
models=MLP,Stacked,Raises,FakeOOM,ExitsAbruptly,KillsItself,Segfaults,DiffersWhenCompiled,WrongGradWhenCompiled,NaNWhenCompiled,EmptyOutput
targets=$(echo "$models" | sed 's/\([A-Za-z]*\)/user_models:\1/g')
for rev in a792be7 HEAD; do
  git worktree add -f "$out/tree-$rev" "$rev" >/dev/null 2>&1
  (cd "$out/tree-$rev" && PYTHONPATH=. "$OLDPWD/.venv/bin/python" -m orchestrator workload=module \
    workload.path=tests 'workload.inputs=[[4,32]]' "workload.target=$targets" bench.repeats=3 \
    bench.steps_per_repeat=1 bench.warmup=1 bench.bootstrap=200 logger=none compile.probes=false \
    verdict.follow_up=false verdict.profile=false launcher.max_requeues=0 bench.timeout_s=600 \
    compile.cache=shared "sweep.dir=$out/sweep-$rev" > "$out/log-$rev.txt" 2>&1 || true)
  git worktree remove --force "$out/tree-$rev"
done
.venv/bin/python benchmarks/cpu-faults-before-after/compare.py "$out/sweep-a792be7" "$out/sweep-HEAD" | tee "$out/compare.txt"
