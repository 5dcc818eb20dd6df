"""The fields every result row has, whatever happened: identity and the settings that make the row."""

from __future__ import annotations

from enum import StrEnum

import submitit

from orchestrator.config.spec import JobSpec
from orchestrator.core.result import FIELDS, Identity, JobResult, Outcome


def log_paths() -> dict:
    """Where this job's stdout and stderr go (its submitit logs), for the result row."""
    try:
        paths = submitit.JobEnvironment().paths
        return {"log_stdout": str(paths.stdout), "log_stderr": str(paths.stderr)}
    except (RuntimeError, KeyError):  # not inside a submitit job (called directly, or the debug executor)
        return {}


def result_skeleton(spec: JobSpec) -> JobResult:
    """A result that knows who the job is and where its logs are, and says `crash` until measured."""
    cfg = spec.cfg
    identity = Identity(
        job_id=spec.job_id, sweep=cfg.sweep.name, label=spec.label, axes=spec.axes, config=spec.config,
        follow_up_of=spec.follow_up_of, lever=spec.lever,
    )  # fmt: skip
    for rf in FIELDS.values():  # each setting from the config key it comes from
        if rf.source:
            section, key = rf.source.split(".")
            if section == "generate" and cfg.bench.task != "generate":
                continue  # the serving settings name generation jobs only
            setattr(identity, rf.key, _plain(getattr(getattr(cfg, section), key)))
    if cfg.workload.name == "module":
        identity.size = cfg.workload.target  # a user's model is named by its class
    identity.world_size = cfg.parallel.world_size
    return JobResult(identity=identity, outcome=Outcome(**log_paths()))


def _plain(value: object) -> object:
    """A config value as JSON has it (a choice's StrEnum member as its string)."""
    return str(value) if isinstance(value, StrEnum) else value
