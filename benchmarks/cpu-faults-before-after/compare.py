"""Each job of two fault sweeps side by side: its status, the first words of its error, and the figure
keys it holds (a key gained or lost is a field added or removed, not a measured value changed)."""

import json
import sys
from pathlib import Path


def jobs(sweep: Path) -> dict[str, dict]:
    return {
        r["label"].split(":")[-1]: r
        for r in (json.loads(p.read_text()) for p in sweep.glob("jobs/*/result.json"))
    }


before, after = (jobs(Path(d)) for d in sys.argv[1:3])
print(f"{'model':22s} {'before':18s} {'after':18s} keys +/-  error (after)")
for name in sorted(set(before) | set(after)):
    b, a = before.get(name, {}), after.get(name, {})
    nonnull = lambda r: {k for k, v in r.items() if v not in (None, [], {})}  # noqa: E731
    gained, lost = sorted(nonnull(a) - nonnull(b)), sorted(nonnull(b) - nonnull(a))
    error = str(a.get("error") or "").split("\n")[0][:70]
    classes = f"{b.get('status', '-'):18s} {a.get('status', '-'):18s}"
    print(f"{name:22s} {classes} +{len(gained)}/-{len(lost)}  {error}")
    for key in gained:
        print(f"{'':22s} + {key}")
    for key in lost:
        print(f"{'':22s} - {key}")
