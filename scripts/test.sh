#!/usr/bin/env bash
# The test suite: system packages for the Slurm and browser tests, then pytest in two worker
# processes, each test file whole on one worker (its module fixtures, the one Slurm cluster of
# test_slurm.py, run once). Two, not one per core: the suite's tests are single-threaded Python and
# subprocesses, so two workers fill 2 cores (about 1.7 of them; 18:28 against 29:19 one after the other
# on CI's kind of machine: benchmarks/ci-suite-time); more would run more compiles side by side on a
# larger host than the timing tests were sized for. TEST_WORKERS=0 runs them in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
# The type check first (pyproject.toml's [tool.mypy]: strict on core/, results/ and analysis/): a
# type error fails the suite in a minute. TYPECHECK=0 leaves it out (one test file, run again).
[ "${TYPECHECK:-1}" = 0 ] || .venv/bin/mypy
bash scripts/system-deps.sh
workers=${TEST_WORKERS:-2}
# One intra-op thread per worker's process (a user's own OMP_NUM_THREADS stands): torch's default of
# one per core makes two workers' ops wait on each other's descheduled threads. Beside another
# sweep, a one-matmul model's step read 11.7 ms with it and 0.05 ms with one thread, as alone
# (benchmarks/ci-suite-time).
[ "$workers" = 0 ] || export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
