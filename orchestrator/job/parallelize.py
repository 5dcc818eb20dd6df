"""Compile and wrap a model for a strategy, in the order that actually captures graphs.

DDP: compile, then wrap (`torch.compile(DDP(m))` captured no graph on torch 2.13 CPU).
FSDP2: compile each block, `fully_shard` each block, then the root (compiling the root captured
nothing), whatever `compile.scope` says; otherwise `compile.scope` picks what is compiled
(job/scope.py). The same code serves 1..N GPUs and several nodes; only the backend name differs.
"""

from __future__ import annotations

import copy
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from orchestrator.config import CompileConfig
from workloads import Workload


def compile_kwargs(cfg: CompileConfig) -> dict:
    """Keyword arguments of torch.compile for this config."""
    backend: object = cfg.backend
    if ":" in cfg.backend:  # the user's own backend, pkg.mod:fn
        from workloads import import_target

        backend = import_target(cfg.backend)
    kwargs: dict = {"backend": backend, "dynamic": cfg.dynamic, "fullgraph": cfg.fullgraph}
    if cfg.mode != "default":
        kwargs["mode"] = cfg.mode
    return kwargs


def init_distributed(device: torch.device, timeout_s: float) -> tuple[int, int]:
    """Join the process group from submitit's environment (Slurm or local); returns (rank, world)."""
    import submitit

    env = submitit.helpers.TorchDistributedEnvironment()
    env.export(set_cuda_visible_devices=False)
    if device.type == "cuda":
        torch.cuda.set_device(env.local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return env.rank, env.world_size


def local_device(device: torch.device) -> torch.device:
    """This rank's device: cuda:LOCAL_RANK under a process group, else `device`."""
    if device.type == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return device


def prepare(
    workload: Workload, strategy: str, compile_cfg: CompileConfig | None, device: torch.device, dtype: str
) -> nn.Module:
    """A copy of the workload's model, compiled (unless compile_cfg is None) and wrapped for `strategy`."""
    model = copy.deepcopy(workload.model)
    kwargs = compile_kwargs(compile_cfg) if compile_cfg else None
    if strategy == "fsdp":
        return _fsdp(model, workload, kwargs, dtype)
    if kwargs is not None:
        from orchestrator.job.scope import compile_scoped

        model = compile_scoped(model, workload, kwargs, str(compile_cfg.scope))  # type: ignore[union-attr]
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        model = DDP(model, device_ids=ids)
    return model


def _fsdp(model: nn.Module, workload: Workload, kwargs: dict | None, dtype: str) -> nn.Module:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    param_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    # The deep copy has its own blocks: find them by their paths in the original.
    paths = {id(b): n for n, b in workload.model.named_modules()}
    for _, _, orig_block in workload.blocks:
        path = paths[id(orig_block)]
        parent_path, _, attr = path.rpartition(".")
        parent = model.get_submodule(parent_path) if parent_path else model
        block = getattr(parent, attr) if not attr.isdigit() else parent[int(attr)]
        if kwargs is not None:
            block = torch.compile(block, **kwargs)
            if attr.isdigit():
                parent[int(attr)] = block
            else:
                setattr(parent, attr, block)
        fully_shard(block, mp_policy=mp)
    if kwargs is not None and not workload.blocks:  # no repeated blocks: compile the whole model
        model = torch.compile(model, **kwargs)
    fully_shard(model, mp_policy=mp)
    return model
