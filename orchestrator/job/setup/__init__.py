"""What a job sets up before it measures: its device, its compile settings, what is compiled.

`device.py`            the device a job runs on, and its checks
`compile_settings.py`  the job's compile cache, freezing, options, recompile limit and numerics, in scope
`inductor_options.py`  `compile.options` checked against inductor's config and patched
`scope.py`             what is compiled: the model, its repeated blocks, or regions of them
`parallelize.py`       compile and wrap for none, DDP and FSDP2
`primer.py`            the throwaway compile that keeps a process's one-offs out of `compile_s`
`environment.py`       what the job was measured on: versions, the machine, the git commit
`trace.py`             TORCH_TRACE for a job's scope, and tlparse's report
`tracking.py`          wandb runs: a job's, and the sweep's table
"""
