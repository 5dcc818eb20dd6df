"""The statistics, on inputs whose answers are known."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrator.stats import median_ratio_ci, rel_error


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
