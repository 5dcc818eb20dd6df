"""Compose the config and expand the sweep into job specs.

Hydra composes `conf/config.yaml` with the user's overrides (Hydra's own override grammar). The
sweep's axes are the preset's `hydra.sweeper.params` plus any comma-separated CLI override; CLI
overrides of an axis key replace the preset's values. Every point of the cartesian product is
composed again on its own, so each job config is checked against the schema before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from orchestrator.config import MEASURED_SECTIONS, Config, ConfigError
from orchestrator.spec import JobSpec, omegaconf_message, to_job_config

CONF_DIR = Path(os.environ.get("ORCHESTRATOR_CONF", Path(__file__).resolve().parent.parent / "conf"))

# Keys that do not change what a job measures, left out of its id so that a re-run still matches.
ID_EXCLUDED = {("compile", "cache_dir"), ("bench", "timeout_s")}

ConfigStore.instance().store(name="schema", node=Config)


@dataclass
class Plan:
    """The expanded sweep."""

    name: str
    sweep_dir: Path
    jobs: list[JobSpec]
    base: Config
    """The config without sweep axes: launcher, logger, retry and compare settings of the sweep."""


def job_id_of(container: dict[str, Any]) -> str:
    measured = {
        section: {k: v for k, v in container[section].items() if (section, k) not in ID_EXCLUDED}
        for section in MEASURED_SECTIONS
    }
    blob = json.dumps(measured, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _hydra_message(e: Exception) -> str:
    """One line out of Hydra's multi-line composition errors."""
    if isinstance(e, MissingConfigException):
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        options = getattr(e, "options", None) or [ln for ln in lines[2:] if not ln.startswith("Available")]
        missing = getattr(e, "missing_cfg_file", "") or lines[0]
        group, _, name = missing.rpartition("/")
        if options and group:
            return f"{group}={name} is not an option of {group}; choose one of: {', '.join(options)}"
        return lines[0]
    cause = e.__cause__ or e.__context__
    if isinstance(cause, ConfigError):
        return str(cause)
    if isinstance(cause, OmegaConfBaseException):
        return omegaconf_message(cause)
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines else type(e).__name__


def compose_config(overrides: list[str], return_hydra_config: bool = False) -> DictConfig:
    """Hydra composition with the project's conf dir; errors become one ConfigError line."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=overrides, return_hydra_config=return_hydra_config)
    except (HydraException, OmegaConfBaseException) as e:
        msg = omegaconf_message(e) if isinstance(e, OmegaConfBaseException) else _hydra_message(e)
        raise ConfigError(msg) from None
    finally:
        GlobalHydra.instance().clear()


def _parse(overrides: list[str]) -> list[Any]:
    try:
        return OverridesParser.create().parse_overrides(overrides)
    except HydraException as e:
        raise ConfigError(f"cannot parse overrides: {str(e).splitlines()[0]}") from None


def expand(overrides: list[str]) -> tuple[list[str], list[list[str]]]:
    """Split the CLI into fixed overrides and the list of per-job axis overrides (cartesian product)."""
    parsed = _parse(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    cli_axes = {o.get_key_element(): o for o in parsed if o.is_sweep_override()}
    preset = compose_config(fixed, return_hydra_config=True).hydra.sweeper.params or {}
    preset_lines = [f"{k}={v}" for k, v in preset.items()]
    fixed_keys = {o.get_key_element() for o in parsed}
    axes = [o for o in _parse(preset_lines) if o.get_key_element() not in fixed_keys]
    axes += list(cli_axes.values())
    if not axes:
        return fixed, [[]]
    batches = BasicSweeper.split_arguments(axes, max_batch_size=None)
    return fixed, batches[0]


def _axes_of(job_overrides: list[str]) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for o in _parse(job_overrides):
        axes[o.get_key_element().lstrip("+~")] = o.value()
    return axes


def build_plan(overrides: list[str], cwd: Path | None = None) -> Plan:
    """Compose and expand the sweep. Raises ConfigError before anything runs."""
    fixed, per_job = expand(overrides)
    points: list[tuple[list[str], dict[str, Any]]] = []
    for job_overrides in per_job:
        container = OmegaConf.to_container(
            compose_config(fixed + job_overrides), resolve=True, enum_to_str=True
        )
        to_job_config(container)  # type: ignore[arg-type]  # check choices and ranges now
        points.append((job_overrides, container))  # type: ignore[arg-type]
    # Sweep-level settings (launcher, logger, retry, sweep) are not axes: any job's are the sweep's.
    base = to_job_config(points[0][1])
    sweep_dir = Path(base.sweep.dir or f"sweeps/{base.sweep.name}")
    if not sweep_dir.is_absolute():
        sweep_dir = (cwd or Path.cwd()) / sweep_dir
    jobs: list[JobSpec] = []
    seen: set[str] = set()
    for job_overrides, container in points:
        job_id = job_id_of(container)
        if job_id in seen:  # two override sets that resolve to one config run once
            continue
        seen.add(job_id)
        jobs.append(JobSpec(job_id, _axes_of(job_overrides), container, str(sweep_dir)))
    return Plan(base.sweep.name, sweep_dir, jobs, base)
