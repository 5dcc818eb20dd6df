#!/usr/bin/env bash
# Stop the single-node cluster of scripts/slurm-up.sh by its PID files.
set -uo pipefail
DIR=${SLURM_TEST_DIR:-/tmp/orchestrator-slurm}
scancel --state=PENDING >/dev/null 2>&1; scancel >/dev/null 2>&1
for name in slurmd slurmctld munged; do
  pidfile="$DIR/run/$name.pid"
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null && for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$pidfile"
done
echo "slurm down"
