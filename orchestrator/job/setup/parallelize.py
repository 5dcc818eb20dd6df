"""Compile and wrap a model for a strategy, in the order that actually captures graphs.

DDP: compile, then wrap (`torch.compile(DDP(m))` captured no graph on torch 2.13 CPU).
FSDP2: compile each block, `fully_shard` each block, then the root (compiling the root captured
nothing), whatever `compile.scope` says; otherwise `compile.scope` picks what is compiled
(job/setup/scope.py). The same code serves 1..N GPUs and several nodes; only the backend name differs.
"""

from __future__ import annotations

import copy
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from orchestrator.config.schema import CompileConfig
from orchestrator.core.user_code import import_target
from orchestrator.job.setup.scope import compile_scoped, compiled, copied_blocks, set_child
from workloads import Workload


def compile_kwargs(cfg: CompileConfig) -> dict:
    """Keyword arguments of torch.compile for this config."""
    backend: object = cfg.backend
    if ":" in cfg.backend:  # the user's own backend, pkg.mod:fn
        backend = import_target(cfg.backend, "compile.backend")
    kwargs: dict = {"backend": backend, "dynamic": cfg.dynamic, "fullgraph": cfg.fullgraph}
    if cfg.mode != "default":
        kwargs["mode"] = cfg.mode
    return kwargs


def init_distributed(device: torch.device, timeout_s: float, backend: str = "auto") -> tuple[int, int]:
    """Join the process group from submitit's environment (Slurm or local); returns (rank, world).
    Ranks beyond the visible GPUs share them round-robin (the GPU code path on fewer GPUs)."""
    import submitit

    env = submitit.helpers.TorchDistributedEnvironment()
    # the local launcher hands the job MASTER_PORT (launch/local.py); the environment reads it, and
    # writes back the same value
    env.export(set_cuda_visible_devices=False, overwrite=True)
    if device.type == "cuda":
        torch.cuda.set_device(local_device(device).index)
    dist.init_process_group(dist_backend(device, backend), timeout=timedelta(seconds=timeout_s))
    return env.rank, env.world_size


def ranks_per_gpu() -> int:
    """Ranks of this node on one GPU: 1, or more where ranks share the visible GPUs."""
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    return max(1, -(-local_world // max(torch.cuda.device_count(), 1)))


def dist_backend(device: torch.device, backend: str) -> str:
    """nccl for one GPU per rank; gloo on CPU and for ranks that share a GPU (nccl refuses
    two ranks on one device), unless the user named one."""
    if backend != "auto":
        return backend
    return "nccl" if device.type == "cuda" and ranks_per_gpu() == 1 else "gloo"


def local_device(device: torch.device) -> torch.device:
    """This rank's device: cuda:(LOCAL_RANK mod visible GPUs) under a process group, else `device`."""
    if device.type == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % max(torch.cuda.device_count(), 1))
    return device


def same_weights_on_every_rank(model: nn.Module) -> None:
    """Rank 0's initial weights on every rank. A seeded init on the device can differ between GPU
    models (the launch shape of the RNG kernels follows the device), and FSDP2 shards, without a
    broadcast, whatever each rank holds."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            dist.broadcast(tensor, src=0)


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A tensor's whole value: an FSDP2 DTensor gathered from every rank (all ranks call this), any
    other tensor as it is. Over gloo on CUDA (ranks sharing a GPU) DTensor's own gather, a functional
    all-gather, died in gloo::allgather with SIGSEGV (torch 2.11 on the H200,
    benchmarks/h200-crashes/), while FSDP2's own collectives ran: there the shards travel through
    host memory."""
    if not hasattr(t, "full_tensor"):
        return t
    if t.device.type == "cuda" and dist.get_backend() == "gloo":
        return gather_through_host(t).to(t.device)
    return t.full_tensor()


def gather_through_host(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value, gathered as CPU tensors over the same process group."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor

    mesh = DeviceMesh.from_group(t.device_mesh.get_group(), "cpu")  # type: ignore[attr-defined]
    local = t.to_local().cpu()  # type: ignore[attr-defined]
    host = DTensor.from_local(local, mesh, t.placements, shape=t.shape, stride=t.stride())  # type: ignore[attr-defined]
    return host.full_tensor()


def prepare(
    workload: Workload,
    strategy: str,
    compile_cfg: CompileConfig | None,
    device: torch.device,
    dtype: str,
    copy_model: bool = True,
) -> nn.Module:
    """The workload's model (a copy unless `copy_model` is False), compiled (unless compile_cfg is
    None) and wrapped for `strategy`."""
    model = copy.deepcopy(workload.model) if copy_model else workload.model
    kwargs = compile_kwargs(compile_cfg) if compile_cfg else None
    if strategy == "fsdp":
        return _fsdp(model, workload, kwargs, dtype)
    if kwargs is not None:
        model = compile_scoped(model, workload, kwargs, str(compile_cfg.scope))  # type: ignore[union-attr]
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [device.index] if device.type == "cuda" else None
        model = DDP(model, device_ids=ids)
    return model


def _fsdp(model: nn.Module, workload: Workload, kwargs: dict | None, dtype: str) -> nn.Module:
    """Each repeated block compiled (where asked) and sharded on its own, then the root sharded.
    A model without repeated blocks is refused: sharding only the root is not FSDP2's per-block
    protocol, and its figures would not say so."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    blocks = list(copied_blocks(model, workload))  # the copy's blocks, by their paths in the original
    if not blocks:
        raise ValueError(
            "parallel.strategy=fsdp shards each repeated block: none found in the model "
            "(a ModuleList or Sequential of one class); name them with workload.blocks=PATH"
        )
    param_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for parent, attr, block in blocks:
        if kwargs is not None:
            block = compiled(block, kwargs)
            set_child(parent, attr, block)
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model
