#!/usr/bin/env bash
# Debian packages the tests use: Slurm + munge (a real single-node cluster) and chromium (the
# dashboard in a real headless browser). Needs root; without it the tests that need them skip.
set -uo pipefail
want=()
command -v slurmctld >/dev/null || want+=(slurmctld slurmd slurm-client munge)
command -v chromium >/dev/null || want+=(chromium)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "not root or no apt-get: skipping ${want[*]} (Slurm/browser tests will skip)"; exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null \
  || echo "could not install ${want[*]} (Slurm/browser tests will skip)"
