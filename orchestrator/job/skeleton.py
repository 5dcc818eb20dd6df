"""The fields every result row has, whatever happened: identity and the settings that make the row."""

from __future__ import annotations

import submitit

from orchestrator.spec import JobSpec


def log_paths() -> dict:
    """Where this job's stdout and stderr go (its submitit logs), for the result row."""
    try:
        paths = submitit.JobEnvironment().paths
        return {"log_stdout": str(paths.stdout), "log_stderr": str(paths.stderr)}
    except (RuntimeError, KeyError):  # not inside a submitit job (called directly, or the debug executor)
        return {}


def result_skeleton(spec: JobSpec) -> dict:
    c = spec.config
    workload, parallel = c["workload"], c["parallel"]
    return {
        "job_id": spec.job_id,
        "sweep": c["sweep"]["name"],
        "label": spec.label,
        "status": "crash",
        "error": None,
        "workload": workload["name"],
        "size": workload["size"] if workload["name"] != "module" else workload["target"],
        "task": c["bench"]["task"],
        "dtype": c["bench"]["dtype"],
        "mode": c["compile"]["mode"],
        "dynamic": c["compile"]["dynamic"],
        "fullgraph": c["compile"]["fullgraph"],
        "backend": c["compile"]["backend"],
        "cache": c["compile"]["cache"],
        "scope": c["compile"].get("scope", "model"),
        "strategy": parallel["strategy"],
        "world_size": 1 if parallel["strategy"] == "none" else parallel["ranks_per_node"] * parallel["nodes"],
        "axes": spec.axes,
        "config": c,
    }
