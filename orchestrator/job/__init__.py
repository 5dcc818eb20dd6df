"""Inside a job: the worker (set up, measure, write one result) and the protocol's phases.

supervisor   the submitit callable: runs the worker in a child, records how a silent death ended
worker       device, process group, caches, the result file, wandb
skeleton     the fields every result row has, whatever happened
protocol     the order of the phases (DESIGN.md section 3), nothing else
context      what the phases share: config, workload, device, ranks, one step of each kind, timing
graphs       dynamo's explain (breaks, reasons) and the first compiled call (compile cost, graphs)
parity       compiled against eager (and fp64) outputs and gradients
speed        FLOPs, warm-up, interleaved timed repetitions, speedup and its CI, throughput, MFU
memory       peak CUDA memory per side
shapes       the dynamic-shape schedule: recompiles and their cost
parallelize  compile and wrap for none / DDP / FSDP2
environment  versions, device, host, git revision, peak FLOP/s
"""
