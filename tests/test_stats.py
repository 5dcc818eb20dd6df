"""The statistics, on inputs whose answers are known."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.core.stats import (
    hierarchical_ci,
    median_ratio_ci,
    percentiles,
    rel_error,
    unpaired_ratio_ci,
    verdict,
)


def test_speedup_is_the_median_of_pair_ratios():
    eager = [10.0, 20.0, 30.0, 40.0]
    compiled = [5.0, 10.0, 10.0, 40.0]  # ratios 2, 2, 3, 1 -> median 2.0
    point, low, high = median_ratio_ci(eager, compiled, resamples=500, seed=1)
    assert point == 2.0
    assert 1.0 <= low <= point <= high <= 3.0


def test_identical_ratios_have_a_zero_width_interval():
    point, low, high = median_ratio_ci([3.0] * 8, [2.0] * 8, resamples=200)
    assert point == low == high == 1.5


def test_interval_narrows_with_more_pairs_of_the_same_spread():
    rng = torch.Generator().manual_seed(0)

    def draw(n):
        noise = 1 + 0.05 * torch.randn(n, generator=rng)
        return [10.0] * n, (10.0 / (1.2 * noise)).tolist()

    few = median_ratio_ci(*draw(8), resamples=2000)
    many = median_ratio_ci(*draw(200), resamples=2000)
    assert many[2] - many[1] < (few[2] - few[1]) / 2
    assert many[1] < 1.2 < many[2], "the true ratio 1.2 lies inside"


def test_relative_error_norm():
    ref = [torch.tensor([3.0, 4.0])]  # norm 5
    assert rel_error([torch.tensor([3.0, 4.0])], ref) == 0.0
    assert rel_error([torch.tensor([3.0, 5.0])], ref) == pytest.approx(1 / 5)
    assert math.isnan(rel_error([torch.tensor([float("nan"), 4.0])], ref))


def test_process_to_process_spread_widens_the_interval():
    """Three processes, each with its own constant ratio (1.0, 1.1, 1.2): repetitions alone say
    1.1 exactly; the two-level bootstrap knows a rerun may land anywhere from 1.0 to 1.2."""
    ratios = [1.0] * 10 + [1.1] * 10 + [1.2] * 10
    process = [0] * 10 + [1] * 10 + [2] * 10
    pooled = hierarchical_ci(ratios, None, resamples=2000)
    nested = hierarchical_ci(ratios, process, resamples=2000)
    assert pooled[0] == nested[0] == pytest.approx(1.1)
    assert pooled[2] - pooled[1] <= 0.1 + 1e-9, pooled  # at most halfway to the neighbours
    assert nested[1] == pytest.approx(1.0) and nested[2] == pytest.approx(1.2), nested


def test_unpaired_ratio_of_medians():
    point, low, high = unpaired_ratio_ci([20.0, 21.0, 19.0, 20.0], [10.0, 10.0, 10.0, 10.0])
    assert point == 2.0 and 1.9 <= low <= 2.0 <= high <= 2.1


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (-0.20, -0.10, "regression"),
        (0.08, 0.12, "improvement"),
        (-0.02, 0.03, "unchanged"),
        (-0.08, 0.01, "inconclusive"),
        (-0.06, -0.04, "inconclusive"),
    ],
)
def test_verdict_needs_the_whole_ci_beyond_the_threshold(low, high, expected):
    assert verdict(low, high, 0.05) == expected
    # Step time, where lower is better: the mirrored CI means the same thing.
    assert verdict(-high, -low, 0.05, higher_is_better=False) == expected


def test_percentiles_of_step_times():
    got = percentiles([float(v) for v in range(1, 101)])
    assert (
        got[50] == pytest.approx(50.5) and got[90] == pytest.approx(90.1) and got[99] == pytest.approx(99.01)
    )
