"""The user's own code (`workload.target`, `compile.backend=pkg.mod:fn`, `workload.make_inputs`, ...):
imported by dotted path, with `workload.path` on `sys.path` only for the scope that needs it.

A scope puts the directory first on `sys.path`, and on the way out removes it and forgets the
modules imported from it, so that the next job in the same process (the debug launcher, or the
orchestrator's own checks) imports its own version of the code, never a previous job's.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.core.failures import ConfigError


def _under(module: object, root: Path) -> bool:
    file: str | None = getattr(module, "__file__", None)
    return bool(file and Path(file).resolve().is_relative_to(root))


@contextlib.contextmanager
def user_code(path: str | None) -> Iterator[None]:
    """`path` importable for the scope; afterwards off `sys.path`, its modules forgotten."""
    if not path:
        yield
        return
    root = Path(path).resolve()
    before = set(sys.modules)
    sys.path.insert(0, path)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(path)
        for name in [n for n in sys.modules if n not in before and _under(sys.modules[n], root)]:
            del sys.modules[name]


def import_target(target: str, key: str = "workload.target") -> Any:
    """`pkg.mod.Name` or `pkg.mod:Name` (a class, a function, any attribute); a failed import names
    the config key, the module and why, in one line."""
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"{key}={target!r} must look like pkg.module:Name")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # the user's module: any error while importing it is theirs to see
        raise ConfigError(
            f"{key}={target}: cannot import module {module_name!r}: {type(e).__name__}: {e}"
        ) from None
    if not hasattr(module, attr):
        raise ConfigError(f"{key}={target}: module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)
