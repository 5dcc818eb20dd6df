"""What a job measures, one module a phase (the order: `job/protocol.py`).

`graphs.py`             dynamo's explain (graphs, breaks, reasons), the compiled fraction, the first calls
`compile_cost.py`       where a compile's seconds went, its portable cache artifacts, recompile-limit warnings
`parity.py`             compiled against eager (and fp64): outputs, gradients, buffers; the tolerance by dtype
`compared.py`           the tensors parity compares, by name, and the worst of them
`random_parity.py`      models with random ops: against their eager-kernel twin
`speed.py`              FLOPs, warm-up, interleaved timed repetitions, speedup and its CI, throughput, MFU
`isolation.py`          whether the job was alone on its device and host
`energy.py`             joules per step from NVML
`memory.py`             peak memory per side, in place (distributed jobs)
`profile.py`            the untimed profiler pass and the roofline
`shapes.py`             the dynamic-shape schedule: recompiles and their cost
`convergence.py`        eager, compiled and a batch-reversed eager copy over N training steps
`aoti.py`               export and AOTInductor packages (`compile.path=aoti`)
`generation.py`         `bench.task=generate`: a prompt's prefill, then one token at a time
`generation_checks.py`  generation's checks: the cache path, teacher-forced parity, peak memory
`limits.py`             a served decode's bytes and MBU, a prefill's FLOPs and MFU
`peaks.py`              peak FLOP/s and bandwidth (datasheet, or measured per node); a figure's share
`wall.py`               the job's wall time by phase, each second counted once
"""
