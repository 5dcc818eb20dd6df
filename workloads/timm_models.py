"""`workload=timm`: a timm vision model by name (`timm.create_model(name, pretrained=False)`, random
weights), trained on cross-entropy against random labels, at its own input size.

    python -m orchestrator workload=timm workload.model=resnet50 bench.dtype=bf16

timm needs a torchvision that loads beside your torch; where it is not installed, the sweep stops
before anything runs, saying what to install.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from orchestrator.config.schema import WorkloadConfig
from orchestrator.core.failures import ConfigError
from workloads.blocks import find_blocks
from workloads.inputs import Inputs, TaskLoss
from workloads.workload import Workload

BATCH = {"tiny": 2, "small": 16, "base": 64, "default": 64}


def _install_hint() -> str:
    """The pip command for timm and the torchvision matched to this torch (torch 2.N: torchvision
    0.N+15; a CPU torch's from PyTorch's CPU index: PyPI's Linux wheels are CUDA builds)."""
    minor = int(torch.__version__.split(".")[1])
    index = " --index-url https://download.pytorch.org/whl/cpu" if torch.version.cuda is None else ""
    return f"pip install --no-deps 'torchvision==0.{minor + 15}.*'{index} && pip install timm"


def _timm() -> Any:
    try:
        import timm
    except Exception as e:  # an ImportError, or torchvision's own failure to load beside this torch
        raise ConfigError(
            f"workload=timm needs timm and a torchvision built for this torch: {_install_hint()} "
            f"(import failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        ) from None
    return timm


def check(cfg: WorkloadConfig) -> None:
    timm = _timm()
    if not cfg.model or not timm.is_model(cfg.model):
        close = timm.list_models(f"*{cfg.model or ''}*")[:5] if cfg.model else []
        hint = f"; e.g. {', '.join(close)}" if close else " (timm.list_models() lists them)"
        raise ConfigError(f"workload.model={cfg.model} is not a timm model{hint}")


def build(cfg: WorkloadConfig, task: str, device: torch.device):
    check(cfg)
    timm = _timm()
    with device:
        inner = timm.create_model(cfg.model, pretrained=False, **(cfg.config or {}))
    channels, height, _ = inner.pretrained_cfg.get("input_size", (3, 224, 224))
    side = cfg.seq_len or (32 if cfg.size == "tiny" else height)  # workload.seq_len: the image side
    batch = cfg.batch_size or BATCH.get(cfg.size, 64)
    classes = inner.num_classes
    train = task == "train"

    def make_inputs(seq_len: int | None = None) -> Inputs:
        s = seq_len or side
        images = torch.randn(batch, channels, s, s, device=device)
        return (images, torch.randint(0, classes, (batch,), device=device)) if train else (images,)

    def cross_entropy(out: torch.Tensor, inputs: tuple) -> torch.Tensor:
        return F.cross_entropy(out.float(), inputs[1])

    model = TaskLoss(_FirstInput(inner), cross_entropy) if train else inner
    blocks, where = find_blocks(inner, cfg.blocks)
    return Workload(model, make_inputs, batch, None, blocks, blocks_where=where)


class _FirstInput(torch.nn.Module):
    """The model on the images alone (the labels are the loss's)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.inner(images)
