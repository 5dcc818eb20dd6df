"""wandb: one run per job (rank 0), grouped by sweep, and one sweep-level run with the table."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from orchestrator.plan import JobSpec

# Never written into results or configs, nor passed on to a job's environment file.
SECRET_ENV = ("WANDB_API_KEY",)


def _wandb_env(sweep_dir: Path, mode: str) -> None:
    os.environ["WANDB_DIR"] = str(sweep_dir)
    os.environ["WANDB_CACHE_DIR"] = str(sweep_dir / "wandb" / ".cache")
    os.environ["WANDB_CONFIG_DIR"] = str(sweep_dir / "wandb" / ".config")
    os.environ["WANDB_DATA_DIR"] = str(sweep_dir / "wandb" / ".data")
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_SILENT", "true")
    (sweep_dir / "wandb").mkdir(parents=True, exist_ok=True)


def _summary(result: dict) -> dict:
    return {k: v for k, v in result.items() if isinstance(v, int | float | str | bool) and k != "config"}


def log_job(spec: JobSpec, result: dict) -> None:
    import wandb

    logger = spec.config["logger"]
    sweep_dir = Path(spec.sweep_dir)
    _wandb_env(sweep_dir, logger["mode"])
    run = wandb.init(
        project=logger["project"],
        entity=logger["entity"],
        group=spec.config["sweep"]["name"],
        job_type=spec.config["workload"]["name"],
        name=f"{spec.config['sweep']['name']}-{spec.job_id}",
        id=f"{spec.job_id}-{os.getpid()}",
        config=spec.config,
        dir=str(sweep_dir),
        reinit="create_new",
    )
    timings = result.get("timings") or {}
    for i, (e, c) in enumerate(zip(timings.get("eager_ms", []), timings.get("compiled_ms", []), strict=True)):
        run.log({"repeat": i, "eager_ms": e, "compiled_ms": c, "ratio": e / c})
    run.summary.update(_summary(result))
    run.finish()


def log_sweep(
    sweep_dir: Path, name: str, df: pd.DataFrame, mode: str, project: str, entity: str | None
) -> None:
    import wandb

    _wandb_env(sweep_dir, mode)
    run = wandb.init(
        project=project,
        entity=entity,
        group=name,
        job_type="sweep",
        name=f"{name}-table",
        dir=str(sweep_dir),
        reinit="create_new",
    )
    table = df.astype(object).where(df.notna(), None)
    run.log({"results": wandb.Table(dataframe=table.astype(str))})
    run.summary.update({"jobs": len(df), "failed": int((df.get("status") != "ok").sum()) if len(df) else 0})
    run.finish()
