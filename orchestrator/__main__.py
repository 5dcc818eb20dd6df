"""Command line.

    python -m orchestrator [OVERRIDES...]          run a sweep (e.g. +sweep=modes workload.size=tiny,small)
    python -m orchestrator status DIR              state of a sweep's jobs (detached Slurm sweeps too)
    python -m orchestrator gather DIR              results table of a sweep directory
    python -m orchestrator cancel DIR              cancel a sweep's unfinished jobs
    python -m orchestrator report DIR              (re)write the dashboard of a sweep directory
    python -m orchestrator compare BASE CAND [compare.KEY=VALUE ...]   regressions; exit 1 if any

Exit codes: 0 all jobs ok, 1 some job failed (or a regression), 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import sys

from orchestrator.config import ConfigError

COMMANDS = ("status", "gather", "cancel", "report", "compare")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        if args and args[0] in COMMANDS:
            from orchestrator import sweep_commands

            return getattr(sweep_commands, args[0])(args[1:])
        from orchestrator.sweep import run_sweep

        return run_sweep(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
