"""A job spec and its typed config: what a worker needs, without Hydra.

The orchestrator pickles one `JobSpec` per job for submitit; a worker turns its plain config back
into the checked dataclasses of `orchestrator.config` with OmegaConf alone.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from orchestrator.config.schema import Config
from orchestrator.core.failures import ConfigError


@dataclass
class JobSpec:
    """One point of the sweep: everything a worker needs, picklable."""

    job_id: str
    """Stable hash of the measured part of the resolved config."""
    axes: dict[str, Any]
    """The axis values that make this job (for tables)."""
    config: dict[str, Any]
    """The whole resolved config as plain containers."""
    sweep_dir: str
    """The sweep directory (absolute)."""
    follow_up_of: str | None = None
    """A follow-up job (analysis/follow_up.py): the job whose verdict named the lever it measures."""
    lever: str | None = None
    """A follow-up job: the one override (`compile.dynamic=true`) that makes it from that job."""

    @property
    def job_dir(self) -> Path:
        return Path(self.sweep_dir) / "jobs" / self.job_id

    @functools.cached_property
    def cfg(self) -> Config:
        """The checked, typed config: built once per process from `config`."""
        return checked_config(self.config)

    @property
    def label(self) -> str:
        own = " ".join(f"{k}={v}" for k, v in self.axes.items()) or self.job_id
        return f"{own} with {self.lever}" if self.lever else own


def to_job_config(container: dict[str, Any]) -> Config:
    """Typed, checked config from plain containers (runs each dataclass's __post_init__)."""
    try:
        cfg = OmegaConf.merge(OmegaConf.structured(Config), container)
        return OmegaConf.to_object(cfg)  # type: ignore[return-value]
    except ConfigError:
        raise
    except OmegaConfBaseException as e:
        raise ConfigError(omegaconf_message(e)) from None


# Each section of Config and its dataclass (the field's default factory).
_SECTIONS = {f.name: cast(Callable[..., Any], f.default_factory) for f in dataclasses.fields(Config)}


def checked_config(container: dict[str, Any]) -> Config:
    """`to_job_config` for a composed container: the dataclasses built directly, in the order
    OmegaConf builds them, so the same __post_init__ checks run; anything unexpected (an unknown
    key, a wrong type) takes the full structured merge, which names it."""
    try:
        return Config(**{name: section(**container[name]) for name, section in _SECTIONS.items()})
    except ConfigError:
        raise
    except Exception:  # the exact path below says what is wrong
        return to_job_config(container)


def omegaconf_message(e: OmegaConfBaseException) -> str:
    """One line naming the key out of OmegaConf's multi-line errors."""
    key = getattr(e, "full_key", None) or ""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    bad_choice = re.match(r"Invalid value (.+), expected one of \[(.*)\]", first)
    if bad_choice and key:
        return f"{key}={bad_choice.group(1)} is not valid; choose one of: {bad_choice.group(2)}"
    if "not in" in first and key.startswith("compile.options."):  # a dict: new keys take a plus
        plus = f"+{key}=VALUE or '+compile.options={{...}}'"
        return f"unknown key {key}: add inductor options with a plus, {plus}"
    if "not in" in first and key:
        section, _, leaf = key.rpartition(".")
        valid = _valid_keys(section)
        where = f"; valid keys of {section or 'the config'}: {', '.join(valid)}" if valid else ""
        return f"unknown key {key}{where}"
    return f"{key}: {first}" if key else first


def _valid_keys(section: str) -> list[str]:
    node: Any = Config
    for part in section.split(".") if section else []:
        fields = {f.name: f for f in dataclasses.fields(node)}
        if part not in fields:
            return []
        node = cast(Callable[[], Any], fields[part].default_factory)()  # MISSING: TypeError, as before
    return [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
