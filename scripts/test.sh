#!/usr/bin/env bash
# The test suite: system packages for the Slurm and browser tests, then pytest in two worker
# processes, each test file whole on one worker (its module fixtures, the one Slurm cluster of
# test_slurm.py, run once). Two, not one per core: the suite's tests are single-threaded Python and
# subprocesses, so two workers fill 2 cores (about 1.7 of them; 18:28 against 29:19 one after the other
# on CI's kind of machine: benchmarks/ci-suite-time); more would run more compiles side by side on a
# larger host than the timing tests were sized for. TEST_WORKERS=0 runs them in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile "$@"
