"""Where the orchestrator's output goes: rich on a terminal; plain lines in CI logs, Slurm logs, pipes."""

from __future__ import annotations

from rich.console import Console

_plain = False


def set_plain(plain: bool) -> None:
    """`--plain`: plain lines even on a terminal."""
    global _plain
    _plain = plain


def make_console() -> Console:
    """A rich console on a terminal; without one (or with --plain): no colour and no wrapping, so a
    long path stays on its line and a log reads as it was written."""
    if _plain or not Console().is_terminal:
        return Console(force_terminal=False, no_color=True, highlight=False, soft_wrap=True, emoji=False)
    return Console()
