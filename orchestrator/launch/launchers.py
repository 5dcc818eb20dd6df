"""Every launcher by its name (`launcher.name`, or the one a sweep directory's ledger recorded)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.schema import Config
from orchestrator.launch.launcher import Launcher
from orchestrator.launch.local import DebugLauncher, LocalLauncher
from orchestrator.launch.slurm import SlurmLauncher

LAUNCHERS: dict[str, type[Launcher]] = {c.name: c for c in (LocalLauncher, DebugLauncher, SlurmLauncher)}


def launcher_class(name: str | None) -> type[Launcher]:
    """The launcher of a name (`launcher.name`, or the one a sweep's ledger recorded; none: local)."""
    return LAUNCHERS[name or "local"]


def make_launcher(base: Config, sweep_dir: Path) -> Launcher:
    return launcher_class(str(base.launcher.name))(base, sweep_dir)
