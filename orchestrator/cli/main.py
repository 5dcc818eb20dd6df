"""Command line: `orchestrator ...` (the console script) or `python -m orchestrator ...`.

    orchestrator [OVERRIDES...]          run a sweep (e.g. +sweep=modes workload.size=tiny,small)
    orchestrator --cfg job|hydra|all     the composed config, as Hydra prints it (--package, --resolve)
    orchestrator --help                  commands, flags, config groups and keys (read from conf/)
    orchestrator status|gather|cancel|report DIR ; orchestrator compare BASE CAND
    orchestrator verdict DIR [verdict.steps=N ...]   the verdict again, for another run

Exit codes: 0 all jobs ok, 1 some job failed (or a regression), 2 bad input, 130 interrupted.

The sweep, the commands and the help are imported when asked for: they bring torch, pandas and
plotly (seconds), and a shell's completion query (`-sc query=...`, one per Tab) must answer without.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra._internal.hydra import Hydra
from omegaconf import OmegaConf

from orchestrator.cli.completion import shell_completion
from orchestrator.cli.console import set_plain
from orchestrator.cli.flags import COMMANDS, UNSUPPORTED, hydra_app, parser
from orchestrator.config.compose import compose_config
from orchestrator.config.plan import expand
from orchestrator.core.failures import ConfigError


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in COMMANDS:
            from orchestrator.cli import commands
            from orchestrator.cli.help import command_help

            if {"-h", "--help"} & set(args[1:]):
                print(command_help(args[0]))
                return 0
            set_plain("--plain" in args)
            return getattr(commands, args[0])([a for a in args[1:] if a != "--plain"])
        return run(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


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
    ns = parser().parse_intermixed_args(args)
    set_plain(ns.plain)
    for dest, why in UNSUPPORTED.items():
        if getattr(ns, dest):
            raise ConfigError(f"{why} (see orchestrator --help)")
    if ns.resolve and ns.cfg is None and not ns.help:
        raise ConfigError("--resolve goes with --cfg or --help")
    if ns.help or ns.hydra_help:
        from orchestrator.cli.help import help_text

        print(help_text(parser(), ns.overrides))
        return 0
    if ns.cfg:
        return show_cfg(ns.overrides, ns.cfg, ns.package, ns.resolve)
    if ns.info:
        return show_info(ns.overrides, ns.info)
    if ns.shell_completion:
        return shell_completion(ns.overrides)
    from orchestrator.cli.sweep import run_sweep

    return run_sweep(ns.overrides, multirun=ns.multirun, dry_run=ns.dry_run)
