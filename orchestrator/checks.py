"""Checks that composition cannot make: this machine, the launcher, the user's code, the sweep
directory. Each failure is one ConfigError line, raised before anything is created or launched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from orchestrator.config import ConfigError
from orchestrator.launch import uses_cuda
from orchestrator.plan import Plan


def _check_backend(name: str) -> None:
    from torch._dynamo import list_backends

    known = list_backends(exclude_tags=())
    if ":" not in name and name not in known:
        raise ConfigError(
            f"compile.backend={name!r} is not a registered dynamo backend; choose one of: "
            f"{', '.join(sorted(known))}, or pkg.module:fn for your own"
        )


def _check_compile_extras(plan: Plan) -> None:
    """`compile.options` keys exist in this torch; `compile.scope=regions` has its API here."""
    from orchestrator.job.inductor_options import check_options
    from orchestrator.job.scope import regions_supported

    for job in plan.jobs:
        check_options(job.cfg.compile.options)
        if job.cfg.compile.scope == "regions" and not regions_supported():
            raise ConfigError(
                "compile.scope=regions needs torch.compiler.nested_compile_region; "
                f"torch {torch.__version__} lacks it (choose compile.scope=model or blocks)"
            )


def check_plan(plan: Plan) -> None:
    """Every job of the plan can run here, with this launcher."""
    from workloads import check_size, import_target

    launcher = plan.base.launcher.name
    dry_run = plan.base.sweep.dry_run
    if launcher == "slurm" and not dry_run and shutil.which("sbatch") is None:
        raise ConfigError(
            "launcher=slurm but sbatch is not on PATH (run on a Slurm login node, or launcher=local)"
        )
    gpus = torch.cuda.device_count()
    cores = os.cpu_count() or 1
    targets: set[tuple[str, str | None]] = set()
    backends: set[str] = set()
    for job in plan.jobs:
        cfg = job.cfg
        check_size(cfg.workload.name, cfg.workload.size)
        world, ranks = cfg.parallel.world_size, cfg.parallel.ranks_per_node
        if launcher == "debug" and world > 1:
            raise ConfigError(
                f"parallel.strategy={cfg.parallel.strategy} needs launcher=local or slurm (debug: in-process)"
            )
        if cfg.bench.device == "cuda" and not gpus and launcher != "slurm":
            raise ConfigError(
                "bench.device=cuda but this machine has no GPU; choose bench.device=cpu or auto"
            )
        if launcher == "local" and uses_cuda(cfg) and world > gpus and not plan.base.launcher.gpus_per_node:
            raise ConfigError(
                f"parallel.ranks_per_node={ranks} needs {world} GPUs; this machine has {gpus} "
                f"(launcher.gpus_per_node={gpus or 1} lets ranks share them: the code path, not scaling)"
            )
        if launcher == "local" and not uses_cuda(cfg) and world > cores:
            raise ConfigError(
                f"parallel.ranks_per_node={ranks} starts {world} CPU ranks; this machine has {cores} cores "
                f"(at most one rank per core)"
            )
        path = cfg.workload.path
        if path and not Path(path).is_dir():
            raise ConfigError(f"workload.path={path} does not exist (or is not a directory)")
        if cfg.workload.name == "module":
            targets.add((cfg.workload.target or "", path))
        if ":" in cfg.compile.backend:
            targets.add((cfg.compile.backend, path))
        else:
            backends.add(cfg.compile.backend)
    for target, path in targets:
        import_target(target, path)
    _check_compile_extras(plan)
    for backend in backends:
        _check_backend(backend)
    if plan.base.sweep.detach and launcher != "slurm":
        raise ConfigError(f"sweep.detach=true needs launcher=slurm (got launcher={launcher})")


def check_sweep_dir(sweep_dir: Path) -> None:
    """Create the sweep directory, or say in one line why it cannot be used."""
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise ConfigError(f"sweep.dir={sweep_dir} is a file, not a directory")
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        probe = sweep_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"sweep.dir={sweep_dir} cannot be written: {e.strerror or e}") from None
