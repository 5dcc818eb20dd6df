"""Small statistics for paired timings."""

from __future__ import annotations

import math

import numpy as np


def median_ratio_ci(
    eager: list[float], compiled: list[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Speedup as the median of the pair ratios eager/compiled, with a bootstrap 95% CI."""
    ratios = np.asarray(eager) / np.asarray(compiled)
    point = float(np.median(ratios))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ratios), size=(resamples, len(ratios)))
    medians = np.median(ratios[idx], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return point, float(low), float(high)


def rel_error(values: list, reference: list) -> float:
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
