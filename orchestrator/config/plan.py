"""Compose the config and expand the sweep into job specs.

Hydra composes `conf/config.yaml` with the user's overrides (Hydra's own override grammar). The
sweep's axes are the preset's `hydra.sweeper.params` plus any comma-separated CLI override; CLI
overrides of an axis key replace the preset's values. Every point gets its own resolved config,
checked against the schema before anything runs; Hydra composes once per distinct combination of
config-group choices and each point's plain key overrides are applied to that (orchestrator/config/points.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_loader import ConfigLoader
from omegaconf import DictConfig

from orchestrator.config.compose import compose_in_session, hydra_session, parse_overrides
from orchestrator.config.points import PointResolver
from orchestrator.config.schema import MEASURED_SECTIONS, Config
from orchestrator.config.spec import JobSpec, checked_config

# Keys that do not change what a job measures, left out of its id so that a re-run still matches.
ID_EXCLUDED = {("compile", "cache_dir"), ("bench", "timeout_s"), ("env", "name")}


class PlannedJob(TypedDict, total=False):
    """One job of `plan.json`, by its id: what the table and the dashboard label it with."""

    label: str  # the job in words (its axes' values)
    axes: dict[str, Any]  # the values of the sweep's axes that make it
    follow_up_of: str | None  # a follow-up: the job whose verdict named its lever
    lever: str | None  # a follow-up: its stack of levers (`A + B`)


@dataclass
class Plan:
    """The expanded sweep."""

    name: str
    sweep_dir: Path
    jobs: list[JobSpec]
    base: Config
    """The config without sweep axes: launcher, logger, retry and compare settings of the sweep."""


def job_id_of(container: dict[str, Any]) -> str:
    # The interpreter counts where a job names one (both sides of an upgrade A/B in one sweep); a job
    # in the orchestrator's own keeps the id it always had, so earlier sweeps still resume.
    own_env = (container.get("env") or {}).get("python") is not None
    sections = (*MEASURED_SECTIONS, "env") if own_env else MEASURED_SECTIONS
    if container["bench"].get("task") == "generate":  # the other tasks' ids predate the section
        sections = (*sections, "generate")
    measured = {
        section: {k: v for k, v in container[section].items() if (section, k) not in ID_EXCLUDED}
        for section in sections
    }
    blob = json.dumps(measured, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _expand(loader: ConfigLoader, overrides: list[str]) -> tuple[list[str], list[list[str]], DictConfig]:
    """Fixed overrides, the per-job axis overrides (cartesian product), and the fixed composition."""
    parsed = parse_overrides(overrides, loader)
    fixed = [cast(str, o.input_line) for o in parsed if not o.is_sweep_override()]  # parsed: has its line
    cli_axes = {o.get_key_element(): o for o in parsed if o.is_sweep_override()}
    composed = compose_in_session(fixed, return_hydra_config=True)
    preset = composed.hydra.sweeper.params or {}
    preset_lines = [f"{k}={v}" for k, v in preset.items()]
    fixed_keys = {o.get_key_element() for o in parsed}
    axes = [o for o in parse_overrides(preset_lines, loader) if o.get_key_element() not in fixed_keys]
    axes += list(cli_axes.values())
    extra = [[str(o) for o in point] for point in composed.sweep.get("points") or []]  # sweep.points
    if not axes:
        return fixed, [[], *extra], composed
    batches = BasicSweeper.split_arguments(axes, max_batch_size=None)
    return fixed, batches[0] + extra, composed


def expand(overrides: list[str]) -> tuple[list[str], list[list[str]]]:
    """Split the CLI into fixed overrides and the list of per-job axis overrides (cartesian product)."""
    with hydra_session() as loader:
        fixed, per_job, _ = _expand(loader, overrides)
    return fixed, per_job


def build_plan(overrides: list[str], cwd: Path | None = None) -> Plan:
    """Compose and expand the sweep. Raises ConfigError before anything runs."""
    with hydra_session() as loader:
        fixed, per_job, composed = _expand(loader, overrides)
        resolver = PointResolver(loader, fixed, composed)
        points: list[tuple[list[str], dict[str, Any]]] = []
        for job_overrides in per_job:
            container = resolver.container(job_overrides)
            checked_config(container)  # check choices and ranges now
            points.append((job_overrides, container))
        # Sweep-level settings (launcher, logger, retry, sweep) are not axes: any job's are the sweep's.
        base = checked_config(points[0][1])
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
            jobs.append(JobSpec(job_id, resolver.axes(job_overrides), container, str(sweep_dir)))
    return Plan(base.sweep.name, sweep_dir, jobs, base)
