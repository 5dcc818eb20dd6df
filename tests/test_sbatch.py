"""The sbatch script a multi-node GPU sweep generates (no cluster needed to write it)."""

from __future__ import annotations

from conftest import run_cli


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
