"""compile.scope=regions, reproduced outside the orchestrator: the tiny GPT of workloads/gpt.py, its
blocks a torch.compiler.nested_compile_region, inductor on the CPU (torch 2.13.0), one training step;
prints the six worst gradient errors against eager (seen: 1.5e3 to 3.2e3). aot_eager and inference
match; two such blocks alone, under a square-mean loss, match too (2.9e-07). Run from the repo root:
PYTHONPATH=. python benchmarks/cpu-readme-check/regions_repro.py"""

import copy

import torch

from workloads.gpt import GPT, PRESETS

torch.manual_seed(0)
size = PRESETS["tiny"]
eager = GPT(size, max_seq=size.seq_len)
comp = copy.deepcopy(eager)
blk = type(comp.blocks[0])
Marked = type(blk.__name__, (blk,), {"forward": torch.compiler.nested_compile_region(blk.forward)})
for b in comp.blocks:
    b.__class__ = Marked
cm = torch.compile(comp)
idx = torch.randint(0, size.vocab, (size.batch_size, size.seq_len + 1))
x, y = idx[:, :-1], idx[:, 1:]
eager(x, y).backward()
cm(x, y).backward()
worst = []
for (n, p), (_, q) in zip(eager.named_parameters(), comp.named_parameters(), strict=True):
    if p.grad is None:
        continue
    worst.append((((q.grad - p.grad).norm() / p.grad.norm()).item(), n))
for e, n in sorted(worst)[-6:]:
    print(n, f"{e:.3g}")
