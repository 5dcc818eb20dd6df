"""The seed block: Y = GELU(LayerNorm(X @ W + B))."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from orchestrator.config.schema import WorkloadConfig
from workloads.blocks import find_blocks
from workloads.inputs import TaskLoss
from workloads.workload import Workload

# name -> (batch, rows per sample, features in, features out)
PRESETS: dict[str, tuple[int, int, int, int]] = {
    "tiny": (4, 64, 128, 128),
    "small": (8, 256, 512, 512),
    "medium": (8, 1024, 1024, 1024),
    "large": (16, 1024, 4096, 4096),  # 16384 x 4096: matmul-bound
}


class SeedBlock(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.norm = nn.LayerNorm(d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(self.linear(x)))


def build(cfg: WorkloadConfig, task: str, device: torch.device):
    batch, rows, d_in, d_out = PRESETS[cfg.size]
    batch = cfg.batch_size or batch
    rows = cfg.seq_len or rows
    with device:  # initialised where it runs
        inner = SeedBlock(d_in, d_out)
    model = TaskLoss(inner) if task == "train" else inner

    def make_inputs(seq_len: int | None = None) -> tuple[torch.Tensor, ...]:
        return (torch.randn(batch, seq_len or rows, d_in, device=device),)

    blocks, where = find_blocks(inner, cfg.blocks)  # none of its own; the user's named ones checked
    return Workload(model, make_inputs, batch, rows, blocks, blocks_where=where)
