#!/usr/bin/env bash
# One device call of the trust benchmarks (issues 12, 16, 18): which part is $1. Each sweep's files
# are added to one archive, $OUT/PART.tar.gz, as soon as that sweep ends (a call cut short keeps what
# finished; the device tool brings back at most 8 files). Wheels: scripts/gpu-bench.sh says.
#   memory    per-side memory of eager/default/reduce-overhead against memory_alone.py; 6.7b training
#   big       reduce-overhead's memory again; +sweep=parallel with 2 ranks sharing one GPU; 2.7b training
#   beyond    compile.scope model/blocks; the seed block with inductor options; AOTInductor
#   crashes   where the AOTI load and the shared-GPU FSDP2 jobs die: probes and the fsdp rows, each
#             process with its native stack printed on a fatal signal (benchmarks/h200-crashes/)
#   aoti      the AOTI sweep, GPT-2 small inference at batch 1 and 16 ($AOTI_EXTRA: more overrides;
#             $AOTI_CAP_S: the sweep's seconds, 250 by default)
#   fixes     the shared-GPU fsdp rows with FSDP2's collectives staged through host memory; why the
#             AOTI .so dies in std::regex (the toolchain's facts); the AOTI probe with the shared
#             libstdc++ linked first; then the AOTI sweep with that link option
set -uo pipefail
cd "$(dirname "$0")/../.."
part=$1
final=${OUT:-benchmarks/out}
work=/tmp/gpu-out
mkdir -p "$work" "$final"
GPT2="workload.size=gpt2 bench.dtype=bf16"
FAST="compile.probes=false bench.processes=1 bench.warmup=2 bench.repeats=4"
# The archive holds the sweeps' logs too: a crash's native stack is in the job's stderr log.
save() {
  find /tmp/sweeps -name '*_log.*' 2>/dev/null | tar -czf "$work/logs.tar.gz" -T - 2>/dev/null
  tar -C "$work" -czf "$final/$part.tar.gz" .
}
bench() {  # NAME SECONDS "orchestrator overrides"
  OUT=$work/$1 SWEEP_TIMEOUT_S=$2 bash scripts/gpu-bench.sh "$3 sweep.name=$1"
  save
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,memory.total --format=csv > "$work/gpu.csv" 2>&1
case "$part" in
  memory)
    # The independent measurement (plain torch, one side per process), beside the sweep: memory is
    # per process, so they do not disturb each other's figures (the sweep's timings are not used).
    (
      export PYTHONPATH=/tmp/site:$PWD
      for mode in eager default reduce-overhead; do
        timeout 150 python3 benchmarks/h200-trust/memory_alone.py --size gpt2 --mode "$mode"
      done > "$work/memory_alone.jsonl" 2>"$work/memory_alone.err"
    ) &
    bench memory 200 "$GPT2 compile.mode=eager,default,reduce-overhead $FAST"
    wait
    save
    bench gpt-6.7b 380 "workload.size=6.7b bench.dtype=bf16 $FAST bench.timeout_s=360" ;;
  big)
    bench memory-ro 130 "$GPT2 compile.mode=reduce-overhead $FAST"
    bench parallel-shared 290 "+sweep=parallel $GPT2 workload.batch_size=8 workload.seq_len=512 $FAST \
      parallel.ranks_per_node=2 launcher.gpus_per_node=1 bench.timeout_s=150"
    bench gpt-2.7b 170 "workload.size=2.7b bench.dtype=bf16 $FAST bench.timeout_s=160" ;;
  beyond)
    PYTHONPATH=/tmp/site:$PWD timeout 45 python3 benchmarks/h200-parallel-1gpu/gloo_cuda_probe.py \
      > "$work/gloo_cuda_probe.jsonl" 2> "$work/gloo_cuda_probe.err"
    NOMEM="compile.probes=false bench.processes=1 bench.memory=false"
    bench scope 130 "$GPT2 compile.scope=model,blocks bench.profile=true $NOMEM bench.warmup=2 \
      bench.repeats=6 bench.steps_per_repeat=10"
    bench block-options 90 "workload=block workload.size=large bench.task=infer bench.dtype=bf16 \
      ++compile.options={},{coordinate_descent_tuning:true},{epilogue_fusion:false} $NOMEM bench.repeats=8 \
      bench.steps_per_repeat=200"
    # One cache for both batches (the second packages warm); if loading the package kills the process
    # (SIGSEGV on this machine before), package the weights as a blob beside the .so instead.
    AOTI="$GPT2 bench.task=infer compile.path=aoti workload.batch_size=1,16 workload.seq_len=128 $NOMEM \
      bench.repeats=8 bench.steps_per_repeat=50 compile.cache=shared compile.cache_dir=/tmp/aoti-cache"
    bench aoti 160 "$AOTI"
    if grep -q "killed a fresh process" "$work/aoti/run1/results.csv"; then
      bench aoti-blob 120 "$AOTI +compile.options.aot_inductor.package_constants_in_so=false \
        +compile.options.aot_inductor.package_constants_on_disk_format=binary_blob"
    fi ;;
  crashes)
    gcc -shared -fPIC -O1 -o /tmp/native_trace.so benchmarks/h200-crashes/native_trace.c
    export LD_PRELOAD=/tmp/native_trace.so
    PYTHONPATH=/tmp/site:$PWD timeout 100 python3 benchmarks/h200-parallel-1gpu/gloo_cuda_probe.py \
      bfloat16 fsdp2 > "$work/gloo_cuda_probe.jsonl" 2> "$work/gloo_cuda_probe.err"
    save
    PYTHONPATH=/tmp/site:$PWD NATIVE_TRACE=/tmp/native_trace.so timeout 240 python3 \
      benchmarks/h200-crashes/aoti_probe.py > "$work/aoti_probe.jsonl" 2> "$work/aoti_probe.err"
    save
    bench parallel-fsdp 200 "+sweep=parallel parallel=fsdp $GPT2 workload.batch_size=8 workload.seq_len=512 \
      $FAST parallel.ranks_per_node=2 launcher.gpus_per_node=1 bench.timeout_s=150" ;;
  fixes)
    bench parallel-fsdp 150 "+sweep=parallel parallel=fsdp $GPT2 workload.batch_size=8 workload.seq_len=512 \
      $FAST parallel.ranks_per_node=2 launcher.gpus_per_node=1 bench.timeout_s=120"
    bash benchmarks/h200-crashes/regex_so.sh > "$work/regex_so.txt" 2>&1
    PYTHONPATH=/tmp/site:$PWD AOTI_OPTIONS='{"aot_inductor.custom_op_libs": [":libstdc++.so.6"]}' timeout 120 \
      python3 benchmarks/h200-crashes/aoti_probe.py mlp-cuda \
      > "$work/aoti_probe_fix.jsonl" 2> "$work/aoti_probe_fix.err"
    save
    if grep -q '"case": "mlp-cuda".*"stage": "done"' "$work/aoti_probe_fix.jsonl"; then
      AOTI_EXTRA="+compile.options.aot_inductor.custom_op_libs=[':libstdc++.so.6']" bash "$0" aoti
    fi ;;
  aoti-last)
    # Three CPU packagings beside the GPU sweep: as inductor links it, the shared libstdc++ first, g++-12.
    probe() {  # NAME AOTI_OPTIONS
      PYTHONPATH=/tmp/site:$PWD AOTI_OPTIONS=$2 timeout 230 python3 benchmarks/h200-crashes/aoti_probe.py \
        mlp-cpu-legacy-so > "$work/aoti_probe_$1.jsonl" 2> "$work/aoti_probe_$1.err"
    }
    probe plain '{}' & probe shared-first '{"aot_inductor.custom_op_libs": [":libstdc++.so.6"]}' &
    probe gxx12 '{"cpp.cxx": ["g++-12"]}' &
    AOTI_EXTRA="+compile.options.aot_inductor.custom_op_libs=[':libstdc++.so.6']" bash "$0" aoti
    wait ;;
  aoti)
    bench aoti "${AOTI_CAP_S:-250}" "$GPT2 bench.task=infer compile.path=aoti workload.batch_size=1,16 workload.seq_len=128 \
      compile.probes=false bench.processes=1 bench.memory=false bench.repeats=8 bench.steps_per_repeat=50 \
      compile.cache=shared compile.cache_dir=/tmp/aoti-cache ${AOTI_EXTRA:-}" ;;
esac
save
ls -la "$final"
