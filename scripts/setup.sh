#!/usr/bin/env bash
# Set up .venv: torch first (a CUDA build where an NVIDIA driver is present, the CPU wheel
# otherwise), then this package with its pinned dependencies. Safe to re-run: it only adds
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip() { .venv/bin/python -m pip "$@"; }
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    pip install -q "torch>=2.11"          # PyPI's default Linux wheel is the CUDA build
  else
    # The CPU build: on these machines the 2.13.0 file on disk; elsewhere PyTorch's CPU index.
    pip install -q torch==2.13.0 2>/dev/null \
      || pip install -q torch --index-url https://download.pytorch.org/whl/cpu
  fi
fi
if ! .venv/bin/python -c "import orchestrator, hydra, submitit, wandb, pytest, pytest_timeout, xdist, transformers" 2>/dev/null \
    || [ ! -x .venv/bin/ruff ]; then
  pip install -q -e ".[dev,parquet,hf]"
fi
