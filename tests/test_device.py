"""The job's device decision (orchestrator/job/setup/device.py) on this machine, which has no CUDA."""

from __future__ import annotations

import socket

import pytest
import torch

from orchestrator.job.setup.device import DeviceMissingError, check_device, expects_cuda, job_device

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="about a host without CUDA")


def test_auto_under_slurm_expects_cuda_and_cpu_never_does():
    assert expects_cuda("auto", "slurm") and expects_cuda("cuda", "local")
    assert not expects_cuda("auto", "local") and not expects_cuda("cpu", "slurm")


@pytest.mark.parametrize(
    "device,launcher,why",
    [
        ("auto", "slurm", "bench.device=auto under launcher=slurm asks Slurm for one"),
        ("cuda", "slurm", "bench.device=cuda"),
        ("cuda", "local", "bench.device=cuda"),
    ],
)
def test_a_job_that_expected_cuda_fails_in_one_line(device, launcher, why):
    assert job_device(device) == torch.device("cpu"), "what this process really has"
    with pytest.raises(DeviceMissingError) as e:
        check_device(device, launcher)
    assert str(e.value) == (
        f"expected a GPU ({why}) but CUDA sees none on {socket.gethostname()}; "
        "set bench.device=cpu to benchmark the CPU"
    )


@pytest.mark.parametrize("device,launcher", [("auto", "local"), ("auto", "debug"), ("cpu", "slurm")])
def test_cpu_jobs_pass(device, launcher):
    check_device(device, launcher)
    assert job_device(device) == torch.device("cpu")
