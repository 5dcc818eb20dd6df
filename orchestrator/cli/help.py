"""`orchestrator --help`: the commands, the flags, and the config groups and keys, read from conf/
through Hydra (so the help never drifts from the configs)."""

from __future__ import annotations

import argparse
import textwrap

from orchestrator.cli import commands
from orchestrator.cli.flags import COMMANDS, hydra_app
from orchestrator.config.compose import CONF_DIR, compose_config

USAGE = """\
usage: orchestrator [OVERRIDES...] [FLAGS]          run a sweep, e.g. +sweep=modes workload.size=tiny,small
       orchestrator COMMAND DIR                     a command on a sweep directory (below)
       orchestrator compare BASE CAND [compare.KEY=VALUE ...]
       orchestrator compare DIR [compare.KEY=VALUE ...]   the upgrade A/B of a sweep over env.python
       orchestrator verdict DIR [verdict.KEY=VALUE ...]
(`python -m orchestrator` is the same command.)"""

WIDTH = 110  # of the help text
EXIT_CODES = "Exit codes: 0 all jobs ok, 1 some job failed (or a regression), 2 bad input, 130 interrupted."
HIDDEN = {"run", "config_path", "config_name", "config_dir", "experimental_rerun", "overrides"}
COMPLETION = (
    'shell completion of the orchestrator command: eval "$(orchestrator -sc install=bash)" '
    "(zsh too; fish: orchestrator -sc install=fish | source; uninstall=SHELL removes it)"
)


def _wrap(text: str, head: str, indent: int | None = None) -> list[str]:
    """`head` then `text`, wrapped at WIDTH under itself (or at `indent`)."""
    pad = " " * (len(head) if indent is None else indent)
    return textwrap.wrap(text, WIDTH, initial_indent=head, subsequent_indent=pad) or [head.rstrip()]


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def commands_text() -> str:
    lines = ["Commands on a sweep directory (COMMAND --help for one):"]
    for name in COMMANDS:
        lines.append(f"  {name:<9} {_first_line(getattr(commands, name).__doc__)}")
    return "\n".join(lines)


def flags_text(p: argparse.ArgumentParser) -> str:
    lines = ["Flags (Hydra's with Hydra's meaning, then the orchestrator's):"]
    for action in p._actions:  # argparse has no public list of its actions
        if action.dest in HIDDEN:
            continue
        names = ", ".join(action.option_strings)
        text = COMPLETION if action.dest == "shell_completion" else str(action.help)
        lines += _wrap(text, f"  {names:<28} ")
    return "\n".join(lines)


def description(group: str, option: str) -> str:
    """The first comment line of a config file (not its `# @package` line)."""
    path = CONF_DIR / group / f"{option}.yaml"
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.startswith("#") and not line.startswith("# @package"):
            text = line.lstrip("# ").strip()
            return text.rsplit(". ", 1)[0] + "." if text.endswith(":") and ". " in text else text
    return ""


def config_groups() -> dict[str, list[str]]:
    """Each config group of conf/ and its options, as Hydra lists them (Hydra's own groups left out)."""
    with hydra_app() as hydra:
        groups = [g for g in hydra.list_all_config_groups() if g != "hydra" and not g.startswith("hydra/")]
        return {g: sorted(hydra.config_loader.get_group_options(g)) for g in sorted(groups)}


def groups_text(overrides: list[str]) -> str:
    choices = compose_config([], return_hydra_config=True).hydra.runtime.choices
    lines = ["Config groups (from conf/): GROUP=OPTION picks one (* the default); +sweep=NAME adds a preset"]
    for group, options in config_groups().items():
        lines.append(f"  {group}:")
        for option in options:
            mark = "*" if choices.get(group) == option else " "
            lines += _wrap(description(group, option), f"    {option:<27}{mark} ")
    cfg = compose_config(overrides)
    lines.append("Config keys: KEY=VALUE sets one, KEY=A,B sweeps it; all of them with values: --cfg job")
    for section, node in cfg.items():
        keys = ", ".join(str(k) for k in node) if hasattr(node, "keys") else str(node)
        lines += _wrap(keys, f"  {section!s}: ", indent=4)
    return "\n".join(lines)


def help_text(p: argparse.ArgumentParser, overrides: list[str]) -> str:
    return "\n\n".join([USAGE, commands_text(), flags_text(p), groups_text(overrides), EXIT_CODES])


def command_help(name: str) -> str:
    doc = textwrap.dedent(getattr(commands, name).__doc__ or "").strip()
    usage = {"compare": "BASE CAND | DIR [compare.KEY=VALUE ...]", "verdict": "DIR [verdict.KEY=VALUE ...]"}
    args = usage.get(name, "DIR")
    return f"usage: orchestrator {name} {args}\n\n{doc}"
