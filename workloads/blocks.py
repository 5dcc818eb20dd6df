"""A model's repeated blocks, wherever they are: what `compile.scope=blocks` compiles one by one and
FSDP2 shards one by one.

Found by structure, at any depth: a `ModuleList` or `Sequential` of two or more children of one
class (transformers' `model.layers`, `bert.encoder.layer`, `transformer.h`, T5's `encoder.block`
and `decoder.block`; timm's `blocks`; a user's own list), not inside another such list. Or named
by the user: `workload.blocks=model.layers` (comma-separated for several).
"""

from __future__ import annotations

import difflib

from torch import nn

from orchestrator.core.failures import ConfigError

Block = tuple[nn.Module, str, nn.Module]
"""(parent, attribute name, block): where a block sits, so that it can be replaced by its compile."""


def _repeated(module: nn.Module) -> bool:
    children = list(module.children())
    return (
        isinstance(module, nn.ModuleList | nn.Sequential)
        and len(children) >= 2
        and len({type(c) for c in children}) == 1
    )


def block_lists(model: nn.Module) -> list[str]:
    """The paths of the model's lists of repeated blocks, outermost only, in module order."""
    found: list[str] = []
    for path, module in model.named_modules():
        if path and _repeated(module) and not any(path.startswith(f"{p}.") for p in found):
            found.append(path)
    return found


def find_blocks(model: nn.Module, paths: str | None = None) -> tuple[list[Block], str]:
    """Every repeated block of `model` and a line saying where they are; `paths` (the user's
    `workload.blocks`) names the lists instead of the search."""
    lists = [p.strip() for p in paths.split(",")] if paths else block_lists(model)
    blocks: list[Block] = []
    described = []
    for path in lists:
        try:
            container = model.get_submodule(path)
        except AttributeError:
            found = ", ".join(block_lists(model)) or "none found"
            names = [n for n, _ in model.named_modules() if n and not n.rpartition(".")[2].isdigit()]
            close = difflib.get_close_matches(path, names, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"workload.blocks={path} is not a module of the model{hint} (repeated blocks: {found})"
            ) from None
        children = list(container.named_children())
        if not children:
            raise ConfigError(f"workload.blocks={path} has no child modules to compile or shard one by one")
        blocks += [(container, name, child) for name, child in children]
        described.append(f"{path} ({len(children)} x {type(children[0][1]).__name__})")
    return blocks, ", ".join(described)
