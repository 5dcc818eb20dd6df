"""The interface every workload fills: a model, how to make one step's inputs, and its shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from workloads.blocks import Block
from workloads.inputs import Inputs


@dataclass
class Workload:
    """A model and its inputs for one task."""

    model: nn.Module
    """forward(*inputs) or forward(**inputs) -> loss (train) or outputs (infer)."""
    make_inputs: Callable[[int | None], Inputs]
    """Inputs for one step; the argument overrides the sequence length (dynamic-shape schedule)."""
    batch_size: int
    """Samples per step."""
    seq_len: int | None
    """Tokens per sample, where the workload has tokens."""
    blocks: list[Block] = field(default_factory=list)
    """(parent, attribute name, block) for each repeated block, for per-block compile and FSDP2."""
    stream: Callable[[int], Inputs] | None = None
    """Inputs of training step i from a fixed corpus with something to learn (the convergence
    check); None: seeded `make_inputs`."""
    blocks_where: str = ""
    """Where the repeated blocks are, in words (`encoder.layer (12 x BertLayer)`); empty: none."""

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())
