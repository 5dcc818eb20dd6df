"""Inside a job: the worker (set up, measure, write one result) and the protocol's phases.

supervisor    the submitit callable: runs the worker in a child, records how a silent death ended
fresh         every fresh process's one entry point (the worker, side processes, probes, aoti loads)
worker        device, process group, caches, the result file, wandb
sides         the one rule for the sides: together, apart, and which fresh processes follow
result        the typed result: one dataclass per phase, composed into JobResult
skeleton      the result every job has from its start: who it is, where its logs are
protocol      the order of the phases (docs/architecture.md) and the two decisions between them
context       what the phases share: config, workload, device, ranks, one step of each kind, timing
graphs        dynamo's explain (breaks, reasons) and the first compiled call (compile cost, graphs)
compile_cost  where a compile's seconds went, and the compile's portable cache artifacts
compile_settings  the job's compile settings, cache and numerics in scope; primer: the one-offs
trace         TORCH_TRACE for a job's scope and tlparse's report
compile_probe the warm and portable compiles, each in a fresh process
parity        compiled against eager (and fp64) outputs and gradients; compared: those tensors by name
speed         FLOPs, warm-up, interleaved timed repetitions, speedup and its CI, throughput, MFU
isolation     was the job alone on its device and host
energy        joules per step from NVML
memory        peak CUDA memory per side, in place (distributed jobs)
processes     the fresh processes: more paired repetitions, each side alone (memory, sides apart)
side_process  one of those fresh processes (kind `side`)
profile       the untimed profiler pass and the roofline
shapes        the dynamic-shape schedule: recompiles and their cost
convergence   eager, compiled and a batch-reversed eager copy over N steps
aoti          export and AOTInductor packages (compile.path=aoti)
parallelize   compile and wrap for none / DDP / FSDP2; scope: what is compiled
inductor_options  compile.options checked and patched
device, peaks, environment  the device a job runs on, its peaks, what it was measured on
tracking      wandb runs (a job's, and the sweep's table)
"""
