"""`workload=module`: the user's own model, by config alone: a class or a factory function
(`workload.target=pkg.mod:Name`, built with `workload.init_args`), with random inputs described by
`workload.inputs` (positional shapes, or named inputs with dtype and range or fill) or made by the
user's function (`workload.make_inputs=pkg.mod:fn`, called `fn(batch_size, seq_len, device)` and
returning a tuple or a dict), trained on the loss its output carries or on `workload.loss=pkg.mod:fn`
(called `fn(output, inputs)`).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from orchestrator.config.schema import WorkloadConfig
from orchestrator.core.failures import ConfigError
from orchestrator.core.user_code import import_target
from workloads.blocks import find_blocks
from workloads.inputs import Inputs, TaskLoss, parse_inputs, random_inputs, tensors_of
from workloads.workload import Workload


def check_init_args(target: Any, init_args: dict | None, key: str = "workload.init_args") -> None:
    """Every key of `init_args` is a parameter of the class or factory (unless it takes **kwargs)."""
    if not init_args:
        return
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):  # a builtin without a signature: its call will say
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = [k for k in init_args if k not in params]
    if unknown:
        valid = ", ".join(n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL)
        raise ConfigError(
            f"{key}.{unknown[0]} is not a parameter of {getattr(target, '__name__', target)}; valid: {valid}"
        )


def check(cfg: WorkloadConfig) -> None:
    """What can be known before anything runs: the target imports, its arguments, the inputs' form."""
    target = import_target(cfg.target or "", "workload.target")
    if not callable(target):
        raise ConfigError(f"workload.target={cfg.target} is not a class or a function")
    if inspect.isclass(target) and not issubclass(target, nn.Module):
        kind = "a torch.autograd.Function" if issubclass(target, torch.autograd.Function) else "a class"
        apply = f" whose forward calls {target.__name__}.apply" if kind != "a class" else ""
        raise ConfigError(
            f"workload.target={cfg.target} is {kind}, not an nn.Module; wrap it in an nn.Module{apply} "
            "(or point at a function that returns one)"
        )
    if cfg.make_inputs and cfg.inputs:
        raise ConfigError(
            "workload.inputs and workload.make_inputs are both set: make_inputs makes the inputs and "
            "inputs would be ignored; keep one"
        )
    check_init_args(target, cfg.init_args)
    for key in ("make_inputs", "loss"):
        name = getattr(cfg, key)
        if name and not callable(import_target(name, f"workload.{key}")):
            raise ConfigError(f"workload.{key}={name} is not a function")
    if not cfg.make_inputs:
        parse_inputs(cfg.inputs, str(cfg.input_dtype))


def build(cfg: WorkloadConfig, task: str, device: torch.device):
    check(cfg)
    inner = import_target(cfg.target or "", "workload.target")(**(cfg.init_args or {}))
    if not isinstance(inner, nn.Module):
        raise ConfigError(f"workload.target={cfg.target} returned a {type(inner).__name__}, not an nn.Module")
    inner.to(device)
    if cfg.make_inputs:
        user_fn = import_target(cfg.make_inputs, "workload.make_inputs")

        def make_inputs(seq_len: int | None = None) -> Inputs:
            made = user_fn(cfg.batch_size, seq_len or cfg.seq_len, device)
            return made if isinstance(made, dict) else tuple(made)
    else:
        specs = parse_inputs(cfg.inputs, str(cfg.input_dtype))

        def make_inputs(seq_len: int | None = None) -> Inputs:
            return random_inputs(specs, device, cfg.vocab, cfg.batch_size, seq_len)

    first = tensors_of(make_inputs(None))[0]
    loss_fn = import_target(cfg.loss, "workload.loss") if cfg.loss else None
    model = TaskLoss(inner, loss_fn) if task == "train" else inner
    blocks, where = find_blocks(inner, cfg.blocks)
    seq = first.shape[1] if first.dim() > 1 else None  # the first input's second dimension
    return Workload(model, make_inputs, first.shape[0], seq, blocks, blocks_where=where)
