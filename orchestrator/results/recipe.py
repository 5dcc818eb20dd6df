"""A job's setting handed over as code: the lines a user pastes into their own script (the numerics,
then the `torch.compile(...)` call), and the exact `python -m orchestrator ...` command that measures
that job again (the overrides that take the composed defaults of its workload to its config)."""

from __future__ import annotations

import functools
import shlex
from typing import Any

from omegaconf import OmegaConf

from orchestrator.config.compose import compose_config
from orchestrator.config.plan import ID_EXCLUDED
from orchestrator.config.schema import MEASURED_SECTIONS, CompileConfig
from orchestrator.config.spec import checked_config


def _value_text(value: Any) -> str:
    """A value as Hydra's override grammar reads it back."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value_text(v) for v in value) + "]"
    return str(value)


@functools.cache
def _defaults(workload: str, extra: tuple[str, ...]) -> dict[str, Any]:
    """The composed config of `workload=NAME` (the group's own defaults), as plain containers."""
    return OmegaConf.to_container(compose_config([f"workload={workload}", *extra]), resolve=True)  # type: ignore[return-value]


def reproduce_command(config: dict[str, Any]) -> str:
    """`python -m orchestrator ...` that composes this job's measured config again (its id with it)."""
    cfg = checked_config(config)
    workload = str(cfg.workload.name)
    sections = [*MEASURED_SECTIONS, *(["generate"] if cfg.bench.task == "generate" else [])]
    sections += ["env"] if cfg.env.python else []
    base = _defaults(workload, ())
    overrides = [f"workload={workload}"]
    for section in sections:
        for key, value in (config.get(section) or {}).items():
            if (section, key) in ID_EXCLUDED or (section, key) == ("workload", "name"):
                continue
            if base.get(section, {}).get(key) != value:
                prefix = "" if key in base.get(section, {}) else "+"
                overrides.append(f"{prefix}{section}.{key}={_value_text(value)}")
    return "python -m orchestrator " + " ".join(shlex.quote(o) for o in overrides)


def _kwargs_text(compile_cfg: CompileConfig) -> str:
    kwargs = []
    if compile_cfg.mode != "default":
        kwargs.append(f'mode="{compile_cfg.mode}"')
    if compile_cfg.dynamic is not None:
        kwargs.append(f"dynamic={compile_cfg.dynamic}")
    if compile_cfg.fullgraph:
        kwargs.append("fullgraph=True")
    if compile_cfg.backend != "inductor":
        kwargs.append(f'backend="{compile_cfg.backend}"')
    if compile_cfg.options:
        kwargs.append(f"options={dict(compile_cfg.options)!r}")
    return "".join(f", {k}" for k in kwargs)


def recipe_lines(config: dict[str, Any]) -> list[str]:
    """The lines to paste for this job's setting, runnable as they are around a `model`: the numerics
    it ran at (TF32 matmuls, the math attention kernel's reduced precision), then the compile call."""
    cfg = checked_config(config)
    bench, compiling = cfg.bench, cfg.compile
    lines = ["import torch"]
    if bench.matmul_precision == "high":
        lines.append('torch.set_float32_matmul_precision("high")  # TF32 matmuls: changes results')
    if bench.sdp_reduced_math:
        lines.append(
            "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)  # reduced-precision SDPA math"
        )
    if cfg.workload.attention_mask:
        lines.append(
            "# pass the model an attention_mask (the tokenizer's; ones where nothing is padded): without one,"
            " the mask transformers builds under compile keeps attention off its fused kernels"
        )
    if compiling.mode == "eager":
        return [*lines, "# eager: no torch.compile"]
    if compiling.scope != "model":
        lines.append(f"# measured with compile.scope={compiling.scope}: each repeated block compiled alone")
    lines.append(f"model = torch.compile(model{_kwargs_text(compiling)})")
    if compiling.optimizer:
        lines.append("optimizer.step = torch.compile(optimizer.step)  # the optimizer step compiled too")
    if bench.dtype in ("bf16", "fp16"):
        dtype = {"bf16": "bfloat16", "fp16": "float16"}[str(bench.dtype)]
        lines.append(f"# measured under torch.autocast(device_type, dtype=torch.{dtype}) around each step")
    return lines
