"""Checks that composition cannot make: this machine, the launcher, the user's code, the sweep
directory. Each failure is one ConfigError line, raised before anything is created or launched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from orchestrator.config.plan import Plan
from orchestrator.config.schema import Config, WorkloadConfig
from orchestrator.core.failures import ConfigError
from orchestrator.core.user_code import import_target, user_code
from orchestrator.job.setup.inductor_options import check_options
from orchestrator.job.setup.scope import regions_supported
from orchestrator.launch.launchers import make_launcher
from workloads import check_blocks, check_workload
from workloads.decoding import check_generate


def _check_backend(name: str) -> None:
    if name == "inductor":  # torch.compile's own default
        return
    # Imported here, for a named backend only: torch._dynamo costs every command a second to import.
    from torch._dynamo import list_backends

    known = list_backends(exclude_tags=())
    if ":" not in name and name not in known:
        raise ConfigError(
            f"compile.backend={name!r} is not a registered dynamo backend; choose one of: "
            f"{', '.join(sorted(known))}, or pkg.module:fn for your own"
        )


def _check_compile_extras(plan: Plan) -> None:
    """`compile.options` keys exist in this torch; `compile.scope=regions` has its API here."""
    for job in plan.jobs:
        check_options(job.cfg.compile.options)
        if job.cfg.compile.scope == "regions" and not regions_supported():
            raise ConfigError(
                "compile.scope=regions needs torch.compiler.nested_compile_region; "
                f"torch {torch.__version__} lacks it (choose compile.scope=model or blocks)"
            )


def check_plan(plan: Plan) -> None:
    """Every job of the plan can run here, with this launcher."""
    launcher = make_launcher(plan.base, plan.sweep_dir)
    launcher.check_cluster(plan.base.sweep.dry_run)
    workloads: dict[str, WorkloadConfig] = {}
    by_block: dict[str, str] = {}  # a workload some job compiles or shards block by block, and which
    backends: set[tuple[str, str | None]] = set()
    for job in plan.jobs:
        cfg = job.cfg
        launcher.check(cfg)
        path = cfg.workload.path
        if path and not Path(path).is_dir():
            raise ConfigError(f"workload.path={path} does not exist (or is not a directory)")
        python = cfg.env.python
        if python is not None and not (Path(python).is_file() and os.access(python, os.X_OK)):
            raise ConfigError(f"env.python={python} is not an interpreter here (no such executable file)")
        key = json.dumps(job.config["workload"], sort_keys=True, default=str)
        workloads.setdefault(key, cfg.workload)
        if cfg.parallel.strategy == "fsdp":
            by_block.setdefault(key, "parallel=fsdp")
        elif cfg.compile.scope != "model" and cfg.compile.mode != "eager":
            by_block.setdefault(key, f"compile.scope={cfg.compile.scope}")
        backends.add((cfg.compile.backend, path))
    generating: dict[str, dict[tuple[int, int], Config]] = {}  # per workload: each prompt and length
    for j in plan.jobs:
        if j.cfg.bench.task == "generate":
            key = json.dumps(j.config["workload"], sort_keys=True, default=str)
            generating.setdefault(key, {})[(j.cfg.generate.prompt_len, j.cfg.generate.new_tokens)] = j.cfg
    for key, workload in workloads.items():  # each distinct workload once: its preset, class, arguments
        with user_code(workload.path):  # forgotten after: each job imports its own copy
            check_workload(workload)
            # a causal LM whose positions hold the prompt and its tokens: refused before the meta
            # build below, whose model may warn first (transformers' BERT heads do)
            for cfg in generating.get(key, {}).values():
                check_generate(cfg.workload, cfg.generate)
            check_blocks(workload, by_block.get(key))  # on the model built on the meta device
    for backend, path in backends:
        if ":" in backend:
            with user_code(path):
                import_target(backend, "compile.backend")
        else:
            _check_backend(backend)
    _check_compile_extras(plan)


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
