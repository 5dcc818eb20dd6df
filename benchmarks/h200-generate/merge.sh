#!/usr/bin/env bash
# The parts of run-gpu.sh (each a tarball of one sweep directory) as one sweep directory, then the
# whole `+sweep=generate` re-run into it: every job is found finished (job ids hash the config), so
# nothing runs, and the table, the verdict (with its serving lines) and results.jsonl are the whole
# sweep's. Run here, after the device calls:  bash benchmarks/h200-generate/merge.sh DIR_OF_TARBALLS [CPU]
set -euo pipefail
cd "$(dirname "$0")/../.."
from=${1:?the folder that holds b1.tar.gz ...}
merged=${MERGED:-benchmarks/h200-generate/sweep}
source benchmarks/merge-parts.sh
unpack_parts "$from" "$merged"
size=""  # the CPU check's parts (run-gpu.sh CPU=1) were sized so:
[ -n "${2:-}" ] && size="workload.size=tiny generate.new_tokens=8 bench.device=cpu workload.config={max_position_embeddings:2048}"
args="+sweep=generate bench=quick $size sweep.dir=$merged logger=none verdict.follow_up=false"
# shellcheck disable=SC2086
require_planned "$merged" $args
# shellcheck disable=SC2086
.venv/bin/python -m orchestrator $args | tee "$merged/table.txt"
