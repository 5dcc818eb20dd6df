#!/usr/bin/env bash
# The parts of run-gpu.sh as one sweep directory, then `+sweep=hf` re-run into it with follow-ups off:
# every planned job is found finished (job ids hash the config), so nothing runs here; then `verdict`
# over every job there (it re-measures nothing) gives the verdicts with their causes and the follow-ups
# that ran. The table, the verdicts and results.jsonl are the whole sweep's. It refuses, naming them,
# when a planned job or a follow-up the merged verdict asks for did not come back.
#   bash benchmarks/h200-answers/merge.sh DIR_OF_TARBALLS [CPU]
set -euo pipefail
cd "$(dirname "$0")/../.."
from=${1:?the folder that holds infer-a.tar.gz ...}
merged=${MERGED:-benchmarks/h200-answers/sweep}
source benchmarks/merge-parts.sh
unpack_parts "$from" "$merged"
where=""
[ -n "${2:-}" ] && where="workload.size=tiny bench.device=cpu workload.model=${CPU_MODELS:?the models the CPU parts ran}"
args="+sweep=hf bench=quick compile.mode=eager,default $where sweep.dir=$merged logger=none"
# shellcheck disable=SC2086
require_planned "$merged" $args
# The 48 jobs' table (plan.json: the 48 jobs). follow_up=false: a lever the code of today ranks first
# for a model whose follow-up ran with another would be measured here, on the wrong machine. Exit 1
# says a job failed (its row and reason are in the table); any other code stops the merge.
# shellcheck disable=SC2086
.venv/bin/python -m orchestrator $args verdict.follow_up=false | tee "$merged/table.txt" || [ $? -eq 1 ]
.venv/bin/python - "$merged" <<'PY'
import json, sys
from pathlib import Path

from orchestrator.analysis.follow_up import follow_up_specs
from orchestrator.analysis.verdict import compute
from orchestrator.config.schema import VerdictConfig
from orchestrator.results.table import gather

sweep = Path(sys.argv[1])
jobs = json.loads((sweep / "plan.json").read_text())["jobs"]
df = gather(sweep, jobs)
wanted = follow_up_specs(compute(df, jobs, VerdictConfig()), df, str(sweep))
absent = [s.job_id for s in wanted if not (sweep / "jobs" / s.job_id / "result.json").exists()]
if absent:
    sys.exit(f"not merged, follow-ups missing: {' '.join(absent)}")
print(f"{len(wanted)} follow-up(s), all back")
PY
# The verdict over every job there, follow-ups included (`verdict` re-measures nothing).
.venv/bin/python -m orchestrator verdict "$merged" | tee -a "$merged/table.txt"
