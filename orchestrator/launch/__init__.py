"""Launch: job specs in, result files out, through submitit (local, Slurm or in-process debug).

executors  the submitit executor and per-job parameters (ranks, GPUs, time limit), sbatch preview
runner     submits, waits with a live progress line, retries; every spec ends with a result
diagnosis  why a job ended without a result file, written as its result
slurm      Slurm state and queue queries (sacct via submitit, scontrol, squeue)
ledger     submitted.json: which scheduler job ran which spec; orphans of a killed orchestrator
"""

from orchestrator.launch.executors import job_parameters, make_executor, sbatch_script, uses_cuda
from orchestrator.launch.ledger import stop_orphans
from orchestrator.launch.runner import Runner

__all__ = ["Runner", "job_parameters", "make_executor", "sbatch_script", "stop_orphans", "uses_cuda"]
