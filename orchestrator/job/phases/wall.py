"""Where a job's wall time goes: one clock per job process, one named phase at a time.

The supervisor notes when it starts the worker; the worker's clock counts from that moment, so
`startup` holds the interpreter's start and the imports. Phases may nest: each second is counted once, in
the innermost phase open then.
What no phase claims is `other`; the supervisor adds `teardown` (from the result written to the
process gone: wandb, the process group, the interpreter's exit) and the job's whole wall.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator

from orchestrator.core.result import WallTime
from orchestrator.job.processes.fork_server import measuring, quiet_lock

# The phases, in the order they happen: WallTime's `wall_<phase>_s` fields (what each holds is said there).
PHASES = tuple(
    f.name.removeprefix("wall_").removesuffix("_s")
    for f in dataclasses.fields(WallTime)
    if f.name not in ("wall_other_s", "wall_teardown_s", "job_wall_s", "wall_written_at", "wall_locked_at")
)

# The phases that measure in this process: no spare interpreter of the sweep imports beside them
# (processes/fork_server.py, `measuring`). The others build, wait on other processes, or write.
MEASURING = ("first_calls", "parity", "timed", "profile", "memory", "shapes", "convergence", "random_parity")


class WallClock:
    """Seconds per phase of one job process, each second counted once (in the innermost phase)."""

    def __init__(self, started_at: float | None = None) -> None:
        now = time.time()
        self.started_at = started_at if started_at is not None else now
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.seconds["startup"] = max(now - self.started_at, 0.0)
        self._open: list[str] = []
        self._since = time.perf_counter()
        self.locked_at: float | None = None  # when the job took its device lock (processes/device_lock.py)

    def _charge(self) -> None:
        now = time.perf_counter()
        if self._open:
            self.seconds[self._open[-1]] += now - self._since
        self._since = now

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if name not in self.seconds:
            raise KeyError(f"unknown phase {name!r}; phases: {', '.join(PHASES)}")
        with contextlib.ExitStack() as quiet:
            if name in MEASURING and quiet_lock() is not None:
                with self.phase("wait"):  # for a spare's imports to end: the job's wait, not its phase's
                    quiet.enter_context(measuring())
            self._charge()
            self._open.append(name)
            try:
                yield
            finally:
                self._charge()
                self._open.pop()

    def wall_time(self) -> WallTime:
        """The phases so far; `other` is what none claimed; `job_wall_s` until now (the supervisor
        replaces it with the wall until the process is gone, and adds the teardown)."""
        self._charge()
        total = time.time() - self.started_at
        fields = {f"wall_{name}_s": s for name, s in self.seconds.items()}
        other = max(total - sum(self.seconds.values()), 0.0)
        return WallTime(
            **fields,
            wall_other_s=other,
            job_wall_s=total,
            wall_written_at=time.time(),
            wall_locked_at=self.locked_at,
        )
