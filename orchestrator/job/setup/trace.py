"""Structured compile logs for `compile.trace=true`: TORCH_TRACE for a job's scope, and tlparse's
report of them where tlparse is installed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def torch_trace(trace_dir: Path | None) -> Iterator[None]:
    """Structured compile logs into `trace_dir` (what TORCH_TRACE does, for this scope; tlparse reads it)."""
    if trace_dir is None:
        yield
        return
    from torch._logging._internal import LazyTraceHandler, TorchLogsFormatter, trace_log

    trace_dir.mkdir(parents=True, exist_ok=True)
    handler = LazyTraceHandler(str(trace_dir))
    handler.setFormatter(TorchLogsFormatter(trace=True))
    level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(level)
        handler.close()


def tlparse_report(trace_dir: Path, out: Path) -> Path | None:
    """tlparse's HTML report of the newest trace log, where tlparse is installed (beside this Python
    or on PATH); None otherwise or when it fails (the raw trace stays either way)."""
    import shutil
    import subprocess
    import sys

    exe = shutil.which("tlparse", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    logs = sorted(trace_dir.glob("*.log"), key=lambda p: p.stat().st_mtime)
    if exe is None or not logs:
        return None
    proc = subprocess.run(
        [exe, str(logs[-1]), "-o", str(out), "--overwrite", "--no-browser"], capture_output=True, timeout=300
    )
    index = out / "index.html"
    return index if proc.returncode == 0 and index.exists() else None
