"""The sweep command's flags: Hydra's own (`--cfg`, `--package`, `--resolve`, `--info`, `--help`,
`-sc`), parsed by Hydra's own argument parser so that they keep Hydra's meaning, plus ours; and
Hydra's application object, which `--info`, `--help` and completion ask."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import NoReturn

from hydra._internal.hydra import Hydra
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException

from orchestrator.config.compose import CONF_DIR
from orchestrator.core.failures import ConfigError

# The commands on a sweep directory (orchestrator/cli/commands.py), in the order help lists them.
COMMANDS = ("status", "gather", "cancel", "report", "compare", "verdict")

# Hydra flags that do not apply here, and why.
UNSUPPORTED = {
    "run": "--run: every command line is a sweep (one job when nothing is swept); drop --run",
    "config_path": "--config-path: the configs are conf/ of this package; set ORCHESTRATOR_CONF=DIR instead",
    "config_name": "--config-name: the root config is conf/config.yaml; set ORCHESTRATOR_CONF=DIR instead",
    "config_dir": "--config-dir: set ORCHESTRATOR_CONF=DIR to use another conf directory",
    "experimental_rerun": "--experimental-rerun: re-run the same command; finished jobs are skipped",
}


# Where the orchestrator's behaviour differs from a plain Hydra app's, its help says so.
OWN_HELP = {
    "version": "Show the orchestrator's and Hydra's versions and exit",
    "hydra_help": "The same as --help",
    "multirun": "Accepted, not needed: comma lists and +sweep=NAME already sweep",
}


def parser() -> argparse.ArgumentParser:
    """Hydra's parser (its flags, names and help strings), plus the orchestrator's own flags."""
    p = get_args_parser()
    p.prog = "orchestrator"
    p.description = "compile-bench orchestrator"
    for action in p._actions:  # argparse keeps no public handle on an added action
        if action.dest == "version" and isinstance(action, argparse._VersionAction):
            action.version = f"orchestrator {_version('orchestrator')} (Hydra {_version('hydra-core')})"
        action.help = OWN_HELP.get(action.dest, action.help)
    p.add_argument("--dry-run", action="store_true", help="Print the planned jobs and exit")
    p.add_argument(
        "--plain", action="store_true", help="Plain lines and a compact table (the default off a tty)"
    )

    def error(message: str) -> NoReturn:  # one line and exit 2, like every other bad input
        raise ConfigError(f"{message} (see orchestrator --help)")

    p.error = error  # type: ignore[method-assign]
    return p


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


@contextlib.contextmanager
def hydra_app() -> Iterator[Hydra]:
    """Hydra's application object over the project's conf dir (for --info, --help, -sc)."""
    from hydra import initialize_config_dir

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="orchestrator"):
            yield GlobalHydra.instance().hydra  # type: ignore[misc]
    except HydraException as e:
        raise ConfigError(str(e).strip().splitlines()[0]) from None
    finally:
        GlobalHydra.instance().clear()
