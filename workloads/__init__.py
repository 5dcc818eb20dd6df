"""The models that are benchmarked, behind one small interface.

A `Workload` holds a model whose forward takes `make_inputs(seq_len)` (a tuple: positional; a dict:
keywords) and returns, for `train`, a scalar loss and, for `infer`, its outputs. The model is in
training mode for `train` and in eval mode for `infer` (dropout off, BatchNorm's running statistics
used, not updated). `blocks` names the repeated blocks that `compile.scope=blocks` compiles and
FSDP2 shards one by one.

gpt, block     the built-in decoder and the seed block
module         your own nn.Module (a class or a factory), its inputs and loss by config
hf             any transformers model class, offline, random weights (its config: hf_config)
timm_models    any timm model
inputs         positional or named inputs; the training loss of any output
blocks         the repeated blocks, found at any depth or named
workload       the Workload every one of them returns
decoding       what bench.task=generate drives: a decoder over a KV cache (kv_cache: the built-in gpt's)
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from orchestrator.config.schema import WorkloadConfig
from orchestrator.core.failures import ConfigError
from workloads import block, gpt, hf, module, timm_models
from workloads.workload import Workload

__all__ = ["Workload", "build_workload", "check_blocks", "check_workload"]


BUILDERS = {
    "gpt": gpt.build,
    "block": block.build,
    "module": module.build,
    "hf": hf.build,
    "timm": timm_models.build,
}


def build_workload(cfg: WorkloadConfig, task: str, device: torch.device, seed: int = 0) -> Workload:
    """Build the workload on `device` with seeded weights, in the mode its task means; inputs are
    seeded too."""
    check_workload(cfg)
    torch.manual_seed(seed)
    wl = BUILDERS[str(cfg.name)](cfg, task, device)
    wl.model.to(device)
    wl.model.train(task == "train")
    return wl


def check_workload(cfg: WorkloadConfig) -> None:
    """What can be known of a workload before anything runs (its preset, its class, its arguments);
    one ConfigError line otherwise."""
    if cfg.name in ("gpt", "block"):
        of_name: dict[str, Mapping[str, object]] = {"gpt": gpt.PRESETS, "block": block.PRESETS}
        presets = of_name[str(cfg.name)]
        if cfg.size not in presets:
            raise ConfigError(
                f"workload.size={cfg.size!r} is not a {cfg.name} preset; choose one of: {', '.join(presets)}"
            )
    elif cfg.name == "module":
        module.check(cfg)
    elif cfg.name == "hf":
        hf.check(cfg)
    elif cfg.name == "timm":
        timm_models.check(cfg)


# What a shape mismatch says (a matmul on a CPU, on the meta device; a view; a broadcast).
SHAPE_ERRORS = (
    "cannot be multiplied",
    "must have same reduction dim",
    "size mismatch",
    "must match the size",
    "is invalid for input of size",
)


def _forward_on_meta(cfg: WorkloadConfig, wl: Workload) -> None:
    """One forward of the model built on the meta device; a shape error is refused, anything else (an
    op with no meta kernel, a value read on the host) is left for the job to find."""
    from workloads.inputs import call

    try:
        with torch.no_grad():
            call(wl.model, wl.make_inputs(None))
    except RuntimeError as e:
        said = str(e).splitlines()[0] if str(e) else ""
        if any(s in said for s in SHAPE_ERRORS):
            raise ConfigError(
                f"workload.size={cfg.size} cannot size {cfg.model}: a forward fails ({said}); a key must "
                "follow the preset's (+workload.config={key: value}), or use workload.size=default"
            ) from None


def check_blocks(cfg: WorkloadConfig, needed_by: str | None = None) -> None:
    """`workload.blocks` names modules of the model, and a model some job compiles or shards block by
    block (`needed_by`: the setting that does, `compile.scope=blocks` or `parallel=fsdp`) has repeated
    blocks: checked before a sweep runs (not in the job, whose own build finds them missing anyway),
    on a model built on the meta device (no memory, no weights). A model that cannot be built there is
    checked when its job builds it. A transformers model sized by a preset also runs one forward there:
    a key the preset could not make follow another (SigLIP's text `projection_size` once kept 768 beside
    a hidden size of 64) fails it with a shape error, refused in one line."""
    sized_hf = cfg.name == "hf" and cfg.size != "default"
    if not cfg.blocks and not needed_by and not sized_hf:
        return
    try:
        with torch.device("meta"):
            wl = BUILDERS[str(cfg.name)](cfg, "infer", torch.device("meta"))
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 (user code that needs real tensors to build: its job will say)
        return
    if sized_hf:
        _forward_on_meta(cfg, wl)
    if needed_by and not wl.blocks:
        other = "parallel=ddp" if needed_by.startswith("parallel") else "compile.scope=model"
        model = cfg.target or cfg.model or cfg.name
        raise ConfigError(
            f"{needed_by} needs repeated blocks (a ModuleList or Sequential of one class): {model} has "
            f"none; name them with workload.blocks=PATH, or use {other}"
        )
