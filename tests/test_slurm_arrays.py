"""Array sizing: no array above MaxArraySize, array_parallelism held over all arrays together.

The real-cluster side (MaxArraySize=5, a 12-job sweep) is in test_slurm.py.
"""

from __future__ import annotations

import itertools

import pytest

from orchestrator.config.schema import LauncherConfig
from orchestrator.launch.slurm_arrays import _refused, max_array_size, plan_arrays


def peak_running(arrays) -> int:
    """Most tasks that can run at once: every lane runs one array at a time, at its %N."""
    heads = [a for a in arrays if a.after is None]
    return sum(min(a.parallelism, len(a.specs)) for a in heads) if heads else 0


def test_twelve_jobs_in_arrays_of_five_are_three_near_equal_arrays():
    arrays = plan_arrays([({"time": 5}, list(range(12)))], max_size=5, parallelism=256)
    assert [a.specs for a in arrays] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert all(a.params == {"time": 5} and a.after is None for a in arrays)
    assert sum(a.parallelism for a in arrays) == 256


def test_parallelism_below_the_number_of_arrays_chains_them_in_lanes():
    arrays = plan_arrays([({}, list(range(12)))], max_size=5, parallelism=2)
    assert [a.parallelism for a in arrays] == [1, 1, 1]
    assert [a.after for a in arrays] == [None, None, 0], "the third array waits for the first"


@pytest.mark.parametrize(
    "sizes,max_size,parallelism",
    list(itertools.product([[1], [7, 3], [1001], [1101], [12, 12, 1], [10_000]], [1, 5, 1001], [1, 3, 256])),
)
def test_every_split_respects_both_limits(sizes, max_size, parallelism):
    groups = [({"shape": g}, [(g, i) for i in range(n)]) for g, n in enumerate(sizes)]
    arrays = plan_arrays(groups, max_size, parallelism)
    assert all(0 < len(a.specs) <= max_size for a in arrays)
    assert [s for a in arrays for s in a.specs] == [s for _, specs in groups for s in specs]
    assert all(a.params == {"shape": a.specs[0][0]} for a in arrays), "one shape per array"
    assert peak_running(arrays) <= parallelism
    assert all(a.after is None or a.after < i for i, a in enumerate(arrays))
    lengths = {}
    for a in arrays:  # near-equal sizes within a shape
        lengths.setdefault(a.specs[0][0], []).append(len(a.specs))
    assert all(max(v) - min(v) <= 1 for v in lengths.values())


def test_configured_size_can_only_lower_the_clusters():
    assert max_array_size(3) <= 3
    assert max_array_size(None) >= 1


def test_a_refused_sbatch_is_one_line_naming_the_settings():
    launcher = LauncherConfig(name="slurm", partition="nope")
    arrays = plan_arrays([({}, list(range(12)))], max_size=5, parallelism=256)
    error = RuntimeError(
        "sbatch: error: invalid partition specified: nope\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified"
    )
    msg = _refused(error, launcher, 1, arrays, 12)
    assert "\n" not in msg
    assert msg.startswith("Slurm refused array 2 of 3 (4 job(s)): sbatch: error: Batch job submission failed")
    assert "check launcher.partition=nope" in msg and "4 of 12 job(s) were queued" in msg
