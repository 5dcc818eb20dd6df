"""Compile scope: what `torch.compile` wraps.

`model`: the whole model, one call. `blocks`: each repeated block on its own and the rest eager,
as torchtitan and torchtune do (and as FSDP2 needs); one compiled frame serves every block of one
class, so it compiles once however deep the model is. `regions`: the whole model, each block's
forward a `torch.compiler.nested_compile_region` (compiled once, reused for every block), where
the installed torch has it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import torch
from torch import nn

from orchestrator.core.failures import CompileError
from workloads import Workload

SCOPES = ("model", "blocks", "regions")


def regions_supported() -> bool:
    return hasattr(torch.compiler, "nested_compile_region")


def copied_blocks(model: nn.Module, workload: Workload) -> Iterator[tuple[nn.Module, str, nn.Module]]:
    """(parent, attribute, block) in `model`, a deep copy of the workload's model: found by the
    paths the workload's blocks have in the original."""
    paths = {id(b): n for n, b in workload.model.named_modules()}
    for _, _, orig_block in workload.blocks:
        parent_path, _, attr = paths[id(orig_block)].rpartition(".")
        parent = model.get_submodule(parent_path) if parent_path else model
        yield parent, attr, parent.get_submodule(attr)


def set_child(parent: nn.Module, attr: str, module: nn.Module) -> None:
    """Replace a child (a list's item by its index) with `module`, its compiled form."""
    if attr.isdigit():
        cast("nn.ModuleList | nn.Sequential", parent)[int(attr)] = module
    else:
        setattr(parent, attr, module)


def compiled(module: nn.Module, kwargs: dict) -> nn.Module:
    """torch.compile of a module: an OptimizedModule, an nn.Module (torch's stubs say a callable)."""
    return cast(nn.Module, torch.compile(module, **kwargs))


def compile_scoped(model: nn.Module, workload: Workload, kwargs: dict, scope: str) -> nn.Module:
    """`model` (a copy of the workload's) compiled with `kwargs` over `scope`."""
    if scope == "model":
        return compiled(model, kwargs)
    blocks = list(copied_blocks(model, workload))
    if not blocks:
        raise CompileError(
            f"compile.scope={scope}: the model has no repeated blocks (a ModuleList or Sequential of one "
            "class); name them with workload.blocks=PATH, or use compile.scope=model"
        )
    if scope == "blocks":
        for parent, attr, block in blocks:
            set_child(parent, attr, compiled(block, kwargs))
        return model
    if not regions_supported():
        raise CompileError(
            "compile.scope=regions needs torch.compiler.nested_compile_region "
            f"(torch {torch.__version__} lacks it)"
        )
    # The documented form, a class whose forward is decorated, on a subclass made per block class
    # (the workload's own class stays as it is): compiled once, reused by every block.
    region = torch.compiler.nested_compile_region
    marked: dict[type, type] = {}
    for _, _, block in blocks:
        cls = type(block)
        if cls not in marked:
            marked[cls] = type(cls.__name__, (cls,), {"forward": region(cls.forward)})
        block.__class__ = marked[cls]
    return compiled(model, kwargs)
