"""The models that are benchmarked, behind one small interface.

A `Workload` holds a model whose forward takes `make_inputs(seq_len)` and returns, for `train`,
a scalar loss and, for `infer`, its outputs. `blocks` names the repeated blocks that FSDP2
compiles and shards one by one.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from orchestrator.config import ConfigError, WorkloadConfig


@dataclass
class Workload:
    """A model and its inputs for one task."""

    model: nn.Module
    """forward(*make_inputs()) -> loss (train) or outputs (infer)."""
    make_inputs: Callable[[int | None], tuple[torch.Tensor, ...]]
    """Inputs for one step; the argument overrides the sequence length (dynamic-shape schedule)."""
    batch_size: int
    """Samples per step."""
    seq_len: int | None
    """Tokens per sample, where the workload has tokens."""
    blocks: list[tuple[nn.Module, str, nn.Module]] = field(default_factory=list)
    """(parent, attribute name, block) for each repeated block, for per-block compile and FSDP2."""
    stream: Callable[[int], tuple[torch.Tensor, ...]] | None = None
    """Inputs of training step i from a fixed corpus with something to learn (the convergence
    check); None: seeded `make_inputs`."""

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


class ScalarLoss(nn.Module):
    """Wraps a model whose output is not a loss: loss = mean of squares (a stand-in objective)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = self.inner(*inputs)
        out = out[0] if isinstance(out, tuple | list) else out
        return out.float().square().mean()


def import_target(target: str, path: str | None = None) -> type:
    """`pkg.mod.Class` or `pkg.mod:Class`; a failed import names the module and why."""
    if path and path not in sys.path:
        sys.path.insert(0, path)
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"workload.target={target!r} must look like pkg.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # the user's module: any error while importing it is theirs to see
        raise ConfigError(
            f"{target}: cannot import module {module_name!r}: {type(e).__name__}: {e}"
        ) from None
    if not hasattr(module, attr):
        raise ConfigError(f"{target}: module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def build_workload(cfg: WorkloadConfig, task: str, device: torch.device, seed: int = 0) -> Workload:
    """Build the workload on `device` with seeded weights; inputs are seeded too."""
    from workloads import block, gpt

    torch.manual_seed(seed)
    if cfg.name == "gpt":
        wl = gpt.build(cfg, task, device)
    elif cfg.name == "block":
        wl = block.build(cfg, task, device)
    else:
        wl = build_module(cfg, task, device)
    wl.model.to(device)
    return wl


def build_module(cfg: WorkloadConfig, task: str, device: torch.device) -> Workload:
    cls = import_target(cfg.target or "", cfg.path)
    inner = cls(**(cfg.init_args or {}))
    model = ScalarLoss(inner) if task == "train" else inner
    shapes = [list(s) for s in cfg.inputs]
    if cfg.batch_size:
        for s in shapes:
            s[0] = cfg.batch_size

    def make_inputs(seq_len: int | None = None) -> tuple[torch.Tensor, ...]:
        tensors = []
        for s in shapes:
            s = list(s)
            if seq_len is not None:
                s[1 if len(s) > 1 else 0] = seq_len
            if cfg.input_dtype == "long":
                tensors.append(torch.randint(0, cfg.vocab, s, device=device))
            else:
                tensors.append(torch.randn(s, device=device))
        return tuple(tensors)

    blocks = [(inner, name, m) for name, m in inner.named_children() if isinstance(m, nn.ModuleList)]
    flat = [(lst, str(i), b) for _, _, lst in blocks for i, b in enumerate(lst)]
    return Workload(model, make_inputs, shapes[0][0], shapes[0][1] if len(shapes[0]) > 1 else None, flat)


def check_size(name: str, size: str) -> None:
    """Fail with the valid presets when a size is unknown."""
    from workloads import block, gpt

    presets = {"gpt": gpt.PRESETS, "block": block.PRESETS}.get(name)
    if presets is not None and size not in presets:
        raise ConfigError(
            f"workload.size={size!r} is not a {name} preset; choose one of: {', '.join(presets)}"
        )
