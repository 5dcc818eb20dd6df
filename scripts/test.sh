#!/usr/bin/env bash
# The test suite: system packages for the Slurm and browser tests, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
exec .venv/bin/python -m pytest "$@"
