"""Bug report draft (PyTorch's template): wrong gradients from torch.compile (inductor) in training when
repeated blocks are a `torch.compiler.nested_compile_region` (what `compile.scope=regions` does) and a
LayerNorm follows them. Standalone: torch only. Two residual MLP blocks between an embedding and a
cross-entropy head, one training step, each parameter's gradient against eager's.

Run: python benchmarks/upstream/regions_grad.py   (exit 1 when a compiled gradient is off)
Seen (torch 2.13.0+cpu, Python 3.11, Debian 12): with the final LayerNorm, inductor's worst gradient is
0.27 off eager's; aot_eager matches exactly, and without the final LayerNorm inductor matches (5e-7).
Expected: every gradient within 1e-4 of eager's."""

import copy
import platform
import sys

import torch
import torch.nn.functional as F
from torch import nn

V, C, T, B = 256, 64, 64, 8


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln, self.fc, self.out = nn.LayerNorm(C), nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    @torch.compiler.nested_compile_region
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(F.gelu(self.fc(self.ln(x))))


class Net(nn.Module):
    def __init__(self, final_norm: bool) -> None:
        super().__init__()
        self.wte, self.head = nn.Embedding(V, C), nn.Linear(C, V, bias=False)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.ln_f = nn.LayerNorm(C) if final_norm else nn.Identity()

    def forward(self, idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        for b in self.blocks:
            x = b(x)
        return F.cross_entropy(self.head(self.ln_f(x)).view(-1, V), y.reshape(-1))


print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}")
wrong = False
for final_norm, backend in ((False, "inductor"), (True, "aot_eager"), (True, "inductor")):
    torch.manual_seed(0)
    torch._dynamo.reset()
    eager = Net(final_norm)
    compiled = copy.deepcopy(eager)
    idx = torch.randint(0, V, (B, T + 1))
    x, y = idx[:, :-1], idx[:, 1:]
    eager(x, y).backward()
    torch.compile(compiled, backend=backend)(x, y).backward()
    errors = {
        n: ((q.grad - p.grad).norm() / p.grad.norm()).item()
        for (n, p), (_, q) in zip(eager.named_parameters(), compiled.named_parameters(), strict=True)
    }
    name = max(errors, key=errors.__getitem__)
    norm = "final LayerNorm" if final_norm else "no final norm"
    print(f"{norm:15s} {backend:9s}: worst gradient {name} relative error {errors[name]:.3g}")
    wrong |= errors[name] > 1e-4
sys.exit(1 if wrong else 0)
