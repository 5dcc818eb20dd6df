"""What a step feeds a model and what training optimizes: positional or named inputs, and the loss.

A workload's inputs are a tuple (positional, `model(*inputs)`) or a dict (keywords,
`model(**inputs)`, as Hugging Face models take them). A positional input may itself be a dict, list
or any pytree of tensors (`forward(batch)` with `batch = {"x": ..., "mask": ...}`): the tuple
`(batch,)` passes it as it is. For `train`, the model is wrapped in
`TaskLoss`: its forward returns the loss its output carries (`loss_of`), or the user's
`workload.loss` function's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn
from torch.utils._pytree import tree_leaves, tree_map

from orchestrator.core.failures import ConfigError

Inputs = tuple[Any, ...] | dict[str, Any]
"""Positional (a tuple of tensors or pytrees of tensors) or keyword (a dict) inputs of one step."""
InputsT = TypeVar("InputsT", bound=Inputs)  # map_inputs keeps the structure it is given
DTYPES = {"float": torch.float32, "long": torch.long, "int": torch.int32, "bool": torch.bool}


def call(model: Callable[..., Any], inputs: Inputs) -> Any:
    """One forward: keywords for named inputs, positions otherwise."""
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def tensors_of(inputs: Inputs) -> list[torch.Tensor]:
    """Every tensor of the inputs, in order, at any depth (a positional dict's values too)."""
    return [t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)]


def map_inputs(inputs: InputsT, fn: Callable[[torch.Tensor], torch.Tensor]) -> InputsT:
    """The same inputs, each tensor at any depth through `fn` (to a device, in fp64, reversed on the
    batch...); other leaves as they are."""
    return tree_map(lambda t: fn(t) if isinstance(t, torch.Tensor) else t, inputs)


def first_tensor(out: Any) -> torch.Tensor | None:
    """The first tensor of an output: itself, a tuple's or list's first, a mapping's first value."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, Mapping):
        out = list(out.values())
    if isinstance(out, tuple | list):
        for item in out:
            if (t := first_tensor(item)) is not None:
                return t
    return None


def loss_of(out: Any) -> torch.Tensor:
    """The loss a model's output carries, by a stated rule: a `loss` entry (a Hugging Face
    `ModelOutput` or any mapping with labels given), else a scalar output as it is, else the mean of
    squares of its first tensor (a stand-in objective for a model that returns no loss)."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    tensor = first_tensor(out)
    if tensor is None:
        raise TypeError(f"the model's output ({type(out).__name__}) holds no tensor to train on")
    if tensor.dim() == 0:
        return tensor
    return tensor.float().square().mean()


class TaskLoss(nn.Module):
    """Training: forward returns the wrapped model's loss (`loss_fn(output, inputs)` if given)."""

    def __init__(self, inner: nn.Module, loss_fn: Callable[[Any, Any], torch.Tensor] | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.loss_fn = loss_fn

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = self.inner(*args, **kwargs)
        if self.loss_fn is not None:
            return self.loss_fn(out, kwargs or args)
        return loss_of(out)


@dataclass(frozen=True)
class InputSpec:
    """One random input: its shape (batch first), dtype, and the range or constant of its values."""

    shape: tuple[int, ...]
    dtype: str = "float"
    high: int | None = None
    """Upper bound (exclusive) of random integers; `workload.vocab` when not given."""
    fill: float | None = None
    """A constant instead of random values (an attention mask of ones)."""

    def make(self, shape: list[int], device: torch.device, vocab: int) -> torch.Tensor:
        dtype = DTYPES[self.dtype]
        if self.fill is not None:
            return torch.full(shape, self.fill, dtype=dtype, device=device)
        if dtype.is_floating_point:
            return torch.randn(shape, dtype=dtype, device=device)
        if dtype == torch.bool:
            return torch.rand(shape, device=device) < 0.5
        return torch.randint(0, self.high or vocab, shape, dtype=dtype, device=device)


Spec = InputSpec | dict[str, InputSpec]
"""One input: a tensor, or a dict of tensors passed as one positional argument."""


def parse_inputs(
    spec: Any, dtype: str = "float", key: str = "workload.inputs"
) -> list[tuple[str | None, Spec]]:
    """`[[8, 64], ...]` (positional shapes), `{name: [8, 64] | {shape, dtype, high, fill}}` (named:
    keywords), or a list holding such a mapping (`[{x: [8, 64], mask: {...}}]`: one positional dict,
    `forward(batch)`); `dtype` is a bare shape's; a bad entry is one ConfigError line naming it."""
    if isinstance(spec, Mapping):
        return [(str(name), _one(value, f"{key}.{name}", dtype)) for name, value in spec.items()]
    if spec and isinstance(spec, list | tuple) and all(isinstance(s, list | tuple | Mapping) for s in spec):
        return [
            (
                None,
                _named(s, f"{key}[{i}]", dtype) if isinstance(s, Mapping) else _one(s, f"{key}[{i}]", dtype),
            )
            for i, s in enumerate(spec)
        ]
    raise ConfigError(
        f"{key}={spec!r} is not valid; give a list of shapes ([[8,64]]), named inputs "
        "({x: [8,64]} or {input_ids: {shape: [8,128], dtype: long, high: 1000}}), "
        "or a positional dict ([{x: [8,64], mask: [8,64]}])"
    )


def _named(spec: Mapping, key: str, dtype: str) -> dict[str, InputSpec]:
    if not spec:
        raise ConfigError(f"{key}: a positional dict needs at least one named input")
    return {str(name): _one(value, f"{key}.{name}", dtype) for name, value in spec.items()}


def _one(value: Any, key: str, bare_dtype: str) -> InputSpec:
    if isinstance(value, Mapping):
        unknown = set(value) - {"shape", "dtype", "high", "fill"}
        if unknown or "shape" not in value:
            raise ConfigError(f"{key}: give shape and any of dtype, high, fill (got {sorted(value)})")
        shape, dtype = value["shape"], str(value.get("dtype", "float"))
        if dtype not in DTYPES:
            raise ConfigError(f"{key}.dtype={dtype} is not valid; choose one of: {', '.join(DTYPES)}")
        spec = InputSpec(tuple(_shape(shape, key)), dtype, value.get("high"), value.get("fill"))
        if spec.high is not None and spec.high < 1:
            raise ConfigError(f"{key}.high={spec.high} is not valid; it must be >= 1")
        return spec
    return InputSpec(tuple(_shape(value, key)), bare_dtype)


def _shape(shape: Any, key: str) -> list[int]:
    if (
        not isinstance(shape, list | tuple)
        or not shape
        or not all(isinstance(d, int) and d >= 1 for d in shape)
    ):
        raise ConfigError(f"{key}: shape {shape!r} is not valid; give a list of sizes >= 1, e.g. [8,64]")
    return list(shape)


def random_inputs(
    specs: list[tuple[str | None, Spec]],
    device: torch.device,
    vocab: int,
    batch_size: int | None = None,
    seq_len: int | None = None,
) -> Inputs:
    """One step's inputs: each spec's shape with the batch (dim 0) and sequence length (dim 1)
    replaced where given."""

    def one(spec: InputSpec) -> torch.Tensor:
        shape = list(spec.shape)
        if batch_size is not None:
            shape[0] = batch_size
        if seq_len is not None and len(shape) > 1:
            shape[1] = seq_len
        return spec.make(shape, device, vocab)

    made = [
        (name, {k: one(v) for k, v in spec.items()} if isinstance(spec, dict) else one(spec))
        for name, spec in specs
    ]
    if all(name is not None for name, _ in made):
        return {name: t for name, t in made}  # type: ignore[misc]
    return tuple(t for _, t in made)
