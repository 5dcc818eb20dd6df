"""Inside a job: the worker sets up, runs the protocol's phases, and writes one result.

`worker.py`    the job in its process: device, process group, scoped settings, the result file, wandb
`protocol.py`  the order of the phases (docs/architecture.md) and the two decisions between them
`context.py`   what the phases share: config, workload, device, ranks, one step of each kind, timing
`sides.py`     the one rule for the sides: together, apart, and which fresh processes follow
`skeleton.py`  the result every job has from its start: who it is, where its logs are

`setup/`       what a job sets up before it measures
`phases/`      what a job measures, one module a phase
`processes/`   the processes a job starts, and what they send back

The result's types live in `orchestrator/core/result.py`: every package reads them.
"""
