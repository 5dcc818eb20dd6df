"""Bug report draft (PyTorch's template): wrong gradients from torch.compile in training when forward
increments an integer buffer in place and then reads it. Standalone: torch only. The compiled
backward uses the counter as if it had been incremented twice (gradient 2x eager's), while the
buffer itself ends right (1 on both sides). aot_eager shows it too: AOT autograd, not inductor.

Run: python benchmarks/upstream/counter_buffer_grad.py   (exit 1 when a backend's gradients differ)
Seen (torch 2.13.0+cpu, Python 3.11, Debian 12): aot_eager and inductor both 2x eager's gradient.
Expected: the same gradient as eager (the forward multiplies by calls == 1)."""

import copy
import platform
import sys

import torch
from torch import nn


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # a step counter, as a scheduler or a running statistic keeps
        return self.lin(x) * self.calls


print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}")
torch.manual_seed(0)
x = torch.randn(2, 4)
eager = Counter()
expected_out = eager(x)
expected_out.sum().backward()
wrong = False
for backend in ("aot_eager", "inductor"):
    torch._dynamo.reset()
    model = copy.deepcopy(eager)
    model.zero_grad()
    model.calls.zero_()
    out = torch.compile(model, backend=backend)(x)
    out.sum().backward()
    same_out = torch.allclose(out, expected_out)
    ratio = (model.lin.weight.grad / eager.lin.weight.grad).mean().item()
    print(
        f"{backend:9s}: output {'equal to' if same_out else 'differs from'} eager's; weight grad / eager's "
        f"= {ratio:.3g} (expected 1); calls {model.calls.item()} (eager {eager.calls.item()})"
    )
    wrong |= abs(ratio - 1) > 1e-5
sys.exit(1 if wrong else 0)
