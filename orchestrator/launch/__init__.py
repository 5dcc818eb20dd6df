"""Launch: job specs in, result files out, through submitit (local, Slurm or in-process debug).

launcher      the interface: executor, per-job parameters, capacity, watching, cancelling
local         the `local` and `debug` launchers of this host
launchers     every launcher by its name
runner        submits, waits with a live progress line, retries; every spec ends with a result
checks        what composition cannot know: this machine, the launcher, the user's code
diagnosis     why a job ended without a result file, written as its result
slurm         the `slurm` launcher; its state and queue queries (sacct via submitit, scontrol, squeue)
slurm_arrays  arrays no larger than the cluster allows, array_parallelism held over all of them
ledger        submitted.json: which scheduler job ran which spec; orphans of a killed orchestrator
"""
