"""Shell completion, Hydra's way: `-sc install=bash|zsh|fish` prints Hydra's script for the
`orchestrator` command; the script asks `orchestrator -sc query=SHELL` with COMP_LINE set, which
Hydra's completer answers from conf/ (groups, options, keys), plus the subcommands and flags."""

from __future__ import annotations

import os
import sys

from omegaconf import OmegaConf

from orchestrator.cli.flags import COMMANDS, hydra_app, parser
from orchestrator.core.failures import ConfigError

SHELLS = ("bash", "zsh", "fish")


def flags() -> list[str]:
    return sorted(name for a in parser()._actions for name in a.option_strings if name.startswith("--"))


def complete(plugin, line: str) -> list[str]:  # noqa: ANN001 (a Hydra CompletionPlugin)
    """Candidates for the last word of `line` (the command line without the program name)."""
    words = line.split()
    current = "" if not line or line.endswith(" ") else words.pop()
    if words and words[0] in COMMANDS:
        return []  # a sweep directory: the shell's own file completion (-o default) takes over
    if current.startswith("-"):
        return [f for f in flags() if f.startswith(current)]
    overrides = [w for w in words if "=" in w and not w.startswith("-")]
    # Hydra's completer (a protected method: the public query() prints instead of returning).
    found = plugin._query(config_name="config", line=" ".join([*overrides, current]))
    if not words:
        found += [c for c in COMMANDS if c.startswith(current)]
    return sorted(set(found))


def shell_completion(args: list[str]) -> int:
    """`-sc install=SHELL`, `-sc uninstall=SHELL` or `-sc query=SHELL` (what the script calls)."""
    try:
        request = OmegaConf.to_container(OmegaConf.from_dotlist(args))
    except Exception:  # noqa: BLE001 (OmegaConf's many parse errors)
        request = {}
    commands = [k for k in ("install", "uninstall", "query") if k in request]  # type: ignore[operator]
    shell = request.get(commands[0]) if len(commands) == 1 else None  # type: ignore[union-attr]
    if shell not in SHELLS:
        raise ConfigError(
            "--shell-completion needs one of install=SHELL, uninstall=SHELL or query=SHELL; SHELL is one "
            f"of: {', '.join(SHELLS)} (got {' '.join(args) or 'nothing'})"
        )
    with hydra_app() as hydra:
        plugin = hydra.get_shell_to_plugin_map(hydra.config_loader)[shell][0]
        if commands[0] == "query":
            line = plugin.strip_python_or_app_name(os.environ.get("COMP_LINE") or "orchestrator ")
            print(("\n" if shell == "fish" else " ").join(complete(plugin, line)))
            return 0
        # Hydra names the program after sys.argv[0]; register the console script whatever ran this.
        argv0, sys.argv[0] = sys.argv[0], "orchestrator"
        try:
            plugin.install() if commands[0] == "install" else plugin.uninstall()
        finally:
            sys.argv[0] = argv0
    return 0
