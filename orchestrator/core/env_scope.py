"""Environment variables set for a scope only, for the libraries that read settings from there
(inductor's and triton's cache directories, wandb's directories)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def scoped_environ(values: dict[str, str]) -> Iterator[None]:
    """Set `values` for the scope, then restore each key as it was (or remove it).

    Key by key, not `mock.patch.dict(os.environ)`: that copies the whole environment, which races
    with threads (triton's async compile) that touch it.
    """
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
