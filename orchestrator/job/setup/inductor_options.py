"""`compile.options`: any `torch._inductor.config` key, checked against the installed torch and
applied with `torch._inductor.config.patch` inside the job's compile settings.

`torch.compile(mode=..., options=...)` refuses both at once, so options are never passed to
torch.compile: a patched config reaches every compile of the scope (the job's, the probes',
AOTInductor's), whatever the mode.
"""

from __future__ import annotations

import difflib
from typing import Any

from orchestrator.core.failures import ConfigError


def flatten(options: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{triton: {cudagraph_trees: false}} and {"triton.cudagraph_trees": false} alike, dotted."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def known_options() -> dict[str, Any]:
    """Every inductor config key of the installed torch, dotted, with its default."""
    import torch._inductor.config as inductor_config

    return inductor_config.get_config_copy()


def check_options(options: dict[str, Any]) -> None:
    """Each key exists in the installed torch and its value has the default's type; else one line."""
    known = known_options()
    for key, value in flatten(options).items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"compile.options.{key} is not a torch._inductor.config key in torch {_version()}{hint}"
            )
        default = known[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"compile.options.{key}={value!r} is not valid; it must be true or false")
        if isinstance(default, int | float) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"compile.options.{key}={value!r} is not valid; it must be a number")


def _version() -> str:
    import torch

    return torch.__version__
