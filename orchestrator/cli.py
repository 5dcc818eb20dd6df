"""The sweep command's flags: Hydra's own (`--cfg`, `--package`, `--resolve`, `--info`, `--help`,
`-sc`), parsed by Hydra's own argument parser so that they keep Hydra's meaning, plus ours."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from hydra._internal.hydra import Hydra
from hydra._internal.utils import get_args_parser
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import OmegaConf

from orchestrator.config import ConfigError
from orchestrator.plan import CONF_DIR, compose_config, expand

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
        if action.dest == "version":
            action.version = f"orchestrator {_version('orchestrator')} (Hydra {_version('hydra-core')})"
        action.help = OWN_HELP.get(action.dest, action.help)
    p.add_argument("--dry-run", action="store_true", help="Print the planned jobs and exit")
    p.add_argument(
        "--plain", action="store_true", help="Plain lines and a compact table (the default off a tty)"
    )

    def error(message: str) -> None:  # one line and exit 2, like every other bad input
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


def _fixed(overrides: list[str]) -> list[str]:
    """The overrides without sweep axes, which Hydra's --cfg/--info compose (as Hydra does: no sweep)."""
    fixed, per_job = expand(overrides)
    axes = sorted({o.split("=", 1)[0] for job in per_job for o in job})
    if axes:
        print(
            f"note: {len(per_job)} job(s); not applied here: the sweep axes {', '.join(axes)} "
            "(give one value each to see that job's config)",
            file=sys.stderr,
        )
    return fixed


def show_cfg(overrides: list[str], cfg_type: str, package: str | None, resolve: bool) -> int:
    """`--cfg job|hydra|all [--package PKG] [--resolve]`: the composed config, printed as Hydra prints it."""
    cfg = compose_config(_fixed(overrides), return_hydra_config=cfg_type != "job")
    if cfg_type == "hydra":  # only the hydra node, without its help texts (Hydra's own helper)
        cfg = Hydra.get_sanitized_hydra_cfg(cfg)
    package = None if package == "_global_" else package
    node: Any = cfg if package is None else OmegaConf.select(cfg, package)
    if node is None:
        choices = ", ".join(str(k) for k in cfg)
        raise ConfigError(f"--package {package} is not in the {cfg_type} config; choose one of: {choices}")
    if not OmegaConf.is_config(node):
        print(node)
        return 0
    if package is not None:
        print(f"# @package {package}")
    if resolve:
        OmegaConf.resolve(node)
    sys.stdout.write(OmegaConf.to_yaml(node))
    return 0


def show_info(overrides: list[str], info: str) -> int:
    """`--info [all|config|defaults|defaults-tree|plugins|searchpath]`: Hydra's own report."""
    fixed = _fixed(overrides)
    with hydra_app() as hydra:
        hydra.show_info(info, config_name="config", overrides=fixed)
    return 0


def run(args: list[str]) -> int:
    """The sweep command: Hydra's flags first, else plan and run the sweep."""
    from orchestrator.console import set_plain

    ns = parser().parse_intermixed_args(args)
    set_plain(ns.plain)
    for dest, why in UNSUPPORTED.items():
        if getattr(ns, dest):
            raise ConfigError(f"{why} (see orchestrator --help)")
    if ns.resolve and ns.cfg is None and not ns.help:
        raise ConfigError("--resolve goes with --cfg or --help")
    if ns.help or ns.hydra_help:
        from orchestrator.cli_help import help_text

        print(help_text(parser(), ns.overrides))
        return 0
    if ns.cfg:
        return show_cfg(ns.overrides, ns.cfg, ns.package, ns.resolve)
    if ns.info:
        return show_info(ns.overrides, ns.info)
    if ns.shell_completion:
        from orchestrator.completion import shell_completion

        return shell_completion(ns.overrides)
    from orchestrator.sweep import run_sweep

    flags = (["-m"] if ns.multirun else []) + (["--dry-run"] if ns.dry_run else [])
    return run_sweep(ns.overrides + flags)
