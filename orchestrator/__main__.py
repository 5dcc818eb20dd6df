"""Command line: `orchestrator ...` (the console script) or `python -m orchestrator ...`.

    orchestrator [OVERRIDES...]          run a sweep (e.g. +sweep=modes workload.size=tiny,small)
    orchestrator --cfg job|hydra|all     the composed config, as Hydra prints it (--package, --resolve)
    orchestrator --help                  commands, flags, config groups and keys (read from conf/)
    orchestrator status|gather|cancel|report DIR ; orchestrator compare BASE CAND
    orchestrator verdict DIR [verdict.steps=N ...]   the verdict again, for another run

Exit codes: 0 all jobs ok, 1 some job failed (or a regression), 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import sys

from orchestrator.cli_help import COMMANDS
from orchestrator.config import ConfigError


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in COMMANDS:
            from orchestrator import sweep_commands
            from orchestrator.console import set_plain

            if {"-h", "--help"} & set(args[1:]):
                from orchestrator.cli_help import command_help

                print(command_help(args[0]))
                return 0
            set_plain("--plain" in args)
            return getattr(sweep_commands, args[0])([a for a in args[1:] if a != "--plain"])
        from orchestrator.cli import run

        return run(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
