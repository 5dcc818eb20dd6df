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
if ! .venv/bin/python -c "import orchestrator, hydra, submitit, wandb, pytest, pytest_timeout, xdist, transformers, mypy" 2>/dev/null \
    || [ ! -x .venv/bin/ruff ]; then
  pip install -q -e ".[dev,parquet,hf]"
fi
# timm (`workload=timm`, `+sweep=timm`) needs a torchvision built for this very torch: matched by
# version (torch 2.N: torchvision 0.N+15), from PyTorch's CPU index for a CPU torch (PyPI's Linux
# wheels are CUDA builds: beside a CPU torch they fail to load, "operator torchvision::nms does not
# exist"). Where none that loads is reachable, nothing is left installed and the sweep says so.
if ! .venv/bin/python -c "import timm" 2>/dev/null; then
  tv=$(.venv/bin/python -c "import torch; print(f'0.{int(torch.__version__.split(\".\")[1]) + 15}.*')")
  index=()
  .venv/bin/python -c "import torch, sys; sys.exit(torch.version.cuda is None)" \
    || index=(--index-url https://download.pytorch.org/whl/cpu)
  if pip install -q --no-deps --timeout 20 --retries 1 "torchvision==$tv" "${index[@]}" 2>/dev/null \
      && .venv/bin/python -c "import torchvision" 2>/dev/null; then
    pip install -q timm
  else
    pip uninstall -q -y torchvision 2>/dev/null || true
    echo "setup: no torchvision $tv that loads beside this torch is reachable; workload=timm needs one"
  fi
fi
