"""The built-in GPT's KV caches for `bench.task=generate`: one object per layer, with `update(k, v, pos)`
returning the keys and values attention reads.

`StaticKV` is preallocated to the longest sequence (gpt-fast's cache: every decode step has the same
shapes, so one graph serves them all, and CUDA graphs can replay it: its tensors are marked as static
addresses); `DynamicKV` grows by concatenation (a new key length every step).
"""

from __future__ import annotations

import torch


class StaticKV:
    """One layer's keys and values, (batch, heads, max_len, head_dim), written at `pos` in place."""

    def __init__(
        self, batch: int, heads: int, max_len: int, head_dim: int, dtype: torch.dtype, device
    ) -> None:
        self.k = torch.zeros(batch, heads, max_len, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        for t in (self.k, self.v):  # CUDA graphs replay with these addresses instead of copying them in
            torch._dynamo.mark_static_address(t)

    def update(
        self, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.k.index_copy_(2, pos, k.to(self.k.dtype))
        self.v.index_copy_(2, pos, v.to(self.v.dtype))
        return self.k, self.v

    def reset(self) -> None:
        self.k.zero_()
        self.v.zero_()


class DynamicKV:
    """One layer's keys and values so far, grown by each call."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def update(
        self, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v
