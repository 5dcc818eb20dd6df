"""Statistics for paired timings that come in processes (docs/statistics.md says why this way).

Repetitions of one process share its state (memory layout, clocks, code placement), so they are
not independent: a CI from them alone is too narrow to hold for a rerun. The speedup's CI is a
hierarchical bootstrap: resample processes, then repetitions inside each chosen process, and take
the median of the pooled pair ratios each time. With one process it is the ordinary bootstrap and
the result says so (`speedup_ci_scope`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

Z95 = (2.5, 97.5)  # the percentiles of a 95% interval
Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


def _groups(values: list[float], process: list[int] | None) -> list[np.ndarray]:
    arr = np.asarray(values, dtype=float)
    if not process:
        return [arr]
    proc = np.asarray(process)
    return [arr[proc == p] for p in sorted(set(process))]


def _resample(groups: list[np.ndarray], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Medians of `resamples` two-level resamples: processes with replacement, then values in each."""
    if len({len(g) for g in groups}) == 1:  # equal repetitions per process (the usual case): at once
        table = np.stack(groups)
        n_proc, n_rep = table.shape
        procs = rng.integers(0, n_proc, size=(resamples, n_proc, 1))
        reps = rng.integers(0, n_rep, size=(resamples, n_proc, n_rep))
        pooled_medians: np.ndarray = np.median(table[procs, reps].reshape(resamples, -1), axis=1)
        return pooled_medians
    medians = np.empty(resamples)
    for b in range(resamples):
        picked = rng.integers(0, len(groups), size=len(groups))
        pooled = [groups[p][rng.integers(0, len(groups[p]), size=len(groups[p]))] for p in picked]
        medians[b] = np.median(np.concatenate(pooled))
    return medians


def hierarchical_ci(
    values: list[float], process: list[int] | None = None, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Median of `values` with a 95% CI from the two-level bootstrap (one level without processes)."""
    groups = [g for g in _groups(values, process) if len(g)]
    point = float(np.median(np.concatenate(groups)))
    low, high = np.percentile(_resample(groups, np.random.default_rng(seed), resamples), Z95)
    return point, float(low), float(high)


def median_ratio_ci(
    eager: list[float],
    compiled: list[float],
    resamples: int = 2000,
    seed: int = 0,
    process: list[int] | None = None,
) -> tuple[float, float, float]:
    """Speedup as the median of the pair ratios eager/compiled, with its hierarchical 95% CI."""
    ratios = (np.asarray(eager, dtype=float) / np.asarray(compiled, dtype=float)).tolist()
    return hierarchical_ci(ratios, process, resamples, seed)


def unpaired_ratio_ci(
    eager: list[float], compiled: list[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Speedup of sides measured one after the other: ratio of medians, each side resampled alone."""
    rng = np.random.default_rng(seed)
    e, c = [np.asarray(eager, dtype=float)], [np.asarray(compiled, dtype=float)]
    ratios = _resample(e, rng, resamples) / _resample(c, rng, resamples)
    low, high = np.percentile(ratios, Z95)
    return float(np.median(e[0]) / np.median(c[0])), float(low), float(high)


def change_ci(
    base: list[float],
    cand: list[float],
    base_process: list[int] | None = None,
    cand_process: list[int] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Relative change of the median from `base` to `cand` (e.g. pair ratios, or step times of two
    sweeps), with a 95% CI: each side resampled on its own, two-level where it has processes."""
    rng = np.random.default_rng(seed)
    medians = []
    for values, process in ((base, base_process), (cand, cand_process)):
        groups = [g for g in _groups(values, process) if len(g)]
        medians.append((float(np.median(np.concatenate(groups))), _resample(groups, rng, resamples)))
    (b, b_boot), (c, c_boot) = medians
    low, high = np.percentile(c_boot / b_boot - 1, Z95)
    return c / b - 1, float(low), float(high)


def verdict(low: float, high: float, threshold: float, higher_is_better: bool = True) -> str:
    """regression / improvement only when the whole CI of the change is beyond the threshold;
    unchanged when it lies inside (-threshold, +threshold); else inconclusive."""
    if not higher_is_better:
        low, high = -high, -low
    if high < -threshold:
        return "regression"
    if low > threshold:
        return "improvement"
    if -threshold <= low and high <= threshold:
        return "unchanged"
    return "inconclusive"


def percentiles(values: list[float], qs: tuple[int, ...] = (50, 90, 99)) -> dict[int, float]:
    """Percentiles of per-step times (linear interpolation, numpy's default)."""
    if not values:
        return {}
    return {q: float(v) for q, v in zip(qs, np.percentile(np.asarray(values, dtype=float), qs), strict=True)}


def rel_error(values: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """||values - reference|| / ||reference|| over lists of tensors, in float64; NaN stays NaN."""
    num = 0.0
    den = 0.0
    for v, r in zip(values, reference, strict=True):
        v64, r64 = v.detach().double(), r.detach().double().to(v.device)
        num += float((v64 - r64).pow(2).sum())
        den += float(r64.pow(2).sum())
    if math.isnan(num) or math.isnan(den):
        return math.nan
    return math.sqrt(num) / max(math.sqrt(den), 1e-30)


def geomean_ci(
    speedups: list[float], lows: list[float | None], highs: list[float | None]
) -> tuple[float, float | None, float | None]:
    """Geometric mean of the models' speedups and its 95% CI.

    The suite is a fixed set of models (as in PyTorch's dashboard), so the interval carries each
    model's measurement noise, not the spread between models: in log space, each model's CI gives its
    standard error (width / 2z), and the mean of k independent logs has sqrt(sum se^2) / k. A model
    without a CI leaves the suite's CI unknown."""
    logs = [math.log(s) for s in speedups]
    mean = sum(logs) / len(logs)
    if any(lo is None or hi is None or lo <= 0 for lo, hi in zip(lows, highs, strict=True)):
        return math.exp(mean), None, None
    widths = [math.log(hi) - math.log(lo) for lo, hi in zip(lows, highs, strict=True)]  # type: ignore[arg-type]
    se = math.sqrt(sum((w / (2 * Z_95)) ** 2 for w in widths)) / len(logs)
    return math.exp(mean), math.exp(mean - Z_95 * se), math.exp(mean + Z_95 * se)
