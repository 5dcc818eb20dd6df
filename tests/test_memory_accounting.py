"""Memory accounting: the bytes a side keeps between steps, on a model whose sizes are known."""

from __future__ import annotations

import torch
from torch import nn

from orchestrator.job.context import Side
from orchestrator.job.phases.memory import state_bytes


def test_state_bytes_counts_weights_grads_and_optimizer_state():
    model = nn.Linear(10, 20)  # 200 + 20 = 220 fp32 parameters = 880 bytes
    side = Side(model)
    assert state_bytes(side) == 880, "weights only"
    model(torch.randn(3, 10)).sum().backward()
    assert state_bytes(side) == 2 * 880, "weights and gradients"
    side.optimizer = torch.optim.AdamW(model.parameters())
    side.optimizer.step()
    # AdamW keeps exp_avg and exp_avg_sq per parameter (fp32) and a scalar `step` tensor per parameter.
    steps = sum(s["step"].nbytes for s in side.optimizer.state.values())
    assert state_bytes(side) == 4 * 880 + steps


def test_half_precision_parameters_count_their_own_size():
    side = Side(nn.Linear(8, 8, bias=False).to(torch.bfloat16))
    assert state_bytes(side) == 64 * 2
