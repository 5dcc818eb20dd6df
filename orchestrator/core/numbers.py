"""The small formulas every layer uses, each in one place: a figure as a number or None, a flag
that says False, the geometric mean, and what a compile costs back (seconds saved per step and the
steps until the compile is paid back)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any


def present(value: Any) -> bool:
    """Whether a figure was recorded: not None, not NaN (a float or numpy's)."""
    if value is None:
        return False
    try:
        return not math.isnan(value)
    except TypeError:  # not a number: a string, a list, a bool is present
        return True


def text(value: Any, default: str) -> str:
    """A text field's value, or `default` where it is absent (None, or NaN in a table's column)."""
    return value if isinstance(value, str) and value else default


def number(value: Any) -> float | None:
    """A measured figure as a float, whatever its type (int, float, numpy's after a table round trip);
    None when it is absent, NaN, a bool or not a number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or type(value).__name__ == "bool_":
        return None
    f = float(value)
    return None if math.isnan(f) else f


def is_false(value: Any) -> bool:
    """A boolean field that says False (a bool, or numpy's, after a table round trip)."""
    return present(value) and not bool(value)


def geomean(values: Iterable[Any]) -> float | None:
    """Geometric mean of the positive figures among `values`; None when there are none."""
    logs = [math.log(v) for v in map(number, values) if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def saved_per_step_s(eager_ms: Any, speedup: Any) -> float | None:
    """Seconds a compiled step saves: eager's step time x (1 - 1/speedup). The speedup is the
    paired estimate (median of the pair ratios), so this is what the verdict and the tables use."""
    e, s = number(eager_ms), number(speedup)
    return e / 1000 * (1 - 1 / s) if e is not None and s else None


def payback_steps(cost: Any, saved_per_step: Any) -> float | None:
    """Steps until a one-off cost (compile seconds, or joules) is paid back by what each step saves;
    None when nothing is saved."""
    c, saved = number(cost), number(saved_per_step)
    return c / saved if c is not None and saved is not None and saved > 0 else None
