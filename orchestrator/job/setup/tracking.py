"""wandb: one run per job (rank 0), grouped by sweep, and one sweep-level run with the table.

wandb's directories are set for the duration of each run only (wandb reads them from the
environment), so nothing leaks into the process or the jobs it starts. The API key is read by
wandb from its own login or WANDB_API_KEY and is never written into results or configs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from orchestrator.config.spec import JobSpec
from orchestrator.core.env_scope import scoped_environ

if TYPE_CHECKING:  # the sweep's table; a job's process never imports pandas for this module
    import pandas as pd


@contextlib.contextmanager
def wandb_dirs(sweep_dir: Path) -> Iterator[None]:
    """wandb's cache, config and data directories inside the sweep directory, in scope."""
    wandb_dir = sweep_dir / "wandb"
    wandb_dir.mkdir(parents=True, exist_ok=True)
    scoped = {
        "WANDB_CACHE_DIR": str(wandb_dir / ".cache"),
        "WANDB_CONFIG_DIR": str(wandb_dir / ".config"),
        "WANDB_DATA_DIR": str(wandb_dir / ".data"),
    }
    with scoped_environ(scoped):
        yield


def _init(sweep_dir: Path, mode: str, **kwargs: Any):
    import wandb

    wandb_mode = cast(Literal["online", "offline", "disabled"], mode)  # logger.mode's choices
    return wandb.init(
        dir=str(sweep_dir),
        mode=wandb_mode,
        reinit="create_new",
        settings=wandb.Settings(silent=True),
        **kwargs,
    )


def _summary(result: dict) -> dict:
    return {k: v for k, v in result.items() if isinstance(v, int | float | str | bool) and k != "config"}


def log_job(spec: JobSpec, result: dict) -> None:
    logger, sweep_name = spec.cfg.logger, spec.cfg.sweep.name
    sweep_dir = Path(spec.sweep_dir)
    with wandb_dirs(sweep_dir):
        run = _init(
            sweep_dir,
            str(logger.mode),
            project=logger.project,
            entity=logger.entity,
            group=sweep_name,
            job_type=str(spec.cfg.workload.name),
            name=f"{sweep_name}-{spec.job_id}",
            id=f"{spec.job_id}-{os.getpid()}",
            config=spec.config,
        )
        timings = result.get("timings") or {}
        pairs = zip(timings.get("eager_ms", []), timings.get("compiled_ms", []), strict=True)
        for i, (e, c) in enumerate(pairs):
            run.log({"repeat": i, "eager_ms": e, "compiled_ms": c, "ratio": e / c})
        run.summary.update(_summary(result))
        run.finish()


def log_sweep(
    sweep_dir: Path, name: str, df: pd.DataFrame, mode: str, project: str, entity: str | None
) -> None:
    import wandb

    with wandb_dirs(sweep_dir):
        run = _init(
            sweep_dir,
            mode,
            project=project,
            entity=entity,
            group=name,
            job_type="sweep",
            name=f"{name}-table",
        )
        table = df.astype(object).where(df.notna(), None)
        run.log({"results": wandb.Table(dataframe=table.astype(str))})
        failed = int((cast("pd.Series", df.get("status")) != "ok").sum()) if len(df) else 0
        run.summary.update({"jobs": len(df), "failed": failed})
        run.finish()
