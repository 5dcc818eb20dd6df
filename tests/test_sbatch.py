"""The sbatch script a sweep generates (no cluster needed to write it): multi-node GPU lines, and
GPUs asked for by the device setting, not by what the submitting host has."""

from __future__ import annotations

import pytest
import torch
from conftest import run_cli

from orchestrator.config.plan import build_plan
from orchestrator.launch.slurm import SlurmLauncher


def test_multinode_gpu_sbatch_lines(tmp_path):
    proc = run_cli(
        [
            "launcher=slurm",
            "parallel=fsdp",
            "parallel.nodes=4",
            "parallel.ranks_per_node=8",
            "bench.device=cuda",
            "bench.timeout_s=3000",
            "launcher.partition=gpu",
            "launcher.account=ml",
            "launcher.qos=high",
            "launcher.cpus_per_task=12",
            "launcher.mem_gb=480",
            "launcher.constraint=h100",
            "launcher.exclude=node7",
            "launcher.job_name=cb-fsdp",
            "launcher.setup=[module load cuda/12.4]",
            "launcher.additional_parameters={mail_type: END}",
            "--dry-run",
        ],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = set(proc.stdout.splitlines())
    for expected in (
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --time=50",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=ml",
        "#SBATCH --qos=high",
        "#SBATCH --cpus-per-task=12",
        "#SBATCH --mem=480G",
        "#SBATCH --constraint=h100",
        "#SBATCH --exclude=node7",
        "#SBATCH --job-name=cb-fsdp",
        "#SBATCH --mail-type=END",
        "#SBATCH --signal=USR2@90",
        "module load cuda/12.4",
    ):
        assert expected in lines, (expected, proc.stdout)
    assert any(ln.startswith("srun --unbuffered") for ln in lines)


def sbatch_lines(tmp_path, *overrides: str) -> list[str]:
    """The #SBATCH lines of a sweep's first job, as `--dry-run` prints them (the same function)."""
    plan = build_plan(["launcher=slurm", f"sweep.dir={tmp_path}", *overrides])
    script = SlurmLauncher(plan.base, plan.sweep_dir).sbatch_script(plan.jobs[0])
    return [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]


@pytest.mark.parametrize(
    "overrides,gpus",
    [
        ([], 1),  # device=auto: the login node has no GPU, yet the job asks Slurm for one
        (["parallel=ddp", "parallel.ranks_per_node=4"], 4),  # one GPU per rank
        (["bench.device=cuda"], 1),
        (["launcher.gpus_per_node=8"], 8),
        (["bench.device=cpu"], None),
        (["launcher.gpus_per_node=0"], None),
    ],
)
def test_slurm_gpu_request_follows_the_device_not_the_login_node(tmp_path, overrides, gpus):
    assert not torch.cuda.is_available(), "this test is about a submitting host without GPUs"
    lines = sbatch_lines(tmp_path, *overrides)
    requested = [ln for ln in lines if ln.startswith(("#SBATCH --gpu", "#SBATCH --gres"))]
    assert requested == ([f"#SBATCH --gpus-per-node={gpus}"] if gpus else []), lines
