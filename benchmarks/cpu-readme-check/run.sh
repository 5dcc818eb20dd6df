#!/usr/bin/env bash
# A fresh clone's README, tried on this 2-core CPU host: the quick start (make run) and one command
# from each section that runs on a CPU in minutes. Each command's output goes to OUT/NN-name.txt with
# its exit code and wall seconds. Usage: bash benchmarks/cpu-readme-check/run.sh CLONE_DIR OUT_DIR
set -uo pipefail
clone=$1; out=$2
mkdir -p "$out"
cd "$clone"
n=0
try() {  # NAME COMMAND...: run it as a user would, keep what it printed
  n=$((n + 1)); local name; name=$(printf "%02d-%s" "$n" "$1"); shift
  local t0=$SECONDS
  { echo "\$ $*"; "$@"; echo "exit=$?"; } > "$out/$name.txt" 2>&1
  echo "$name: exit $(tail -1 "$out/$name.txt" | cut -d= -f2), $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}
py=.venv/bin/python
try quick-start make run                                                       # Quick start
try sweeps-dry-run $py -m orchestrator +sweep=modes workload.size=tiny,small --dry-run   # Sweeps
try hydra-cfg $py -m orchestrator bench.dtype=bf16 --cfg job --package bench   # Hydra's flags
try bad-value $py -m orchestrator compile.mode=fast                            # a bad value: exit 2
try verdict-again $py -m orchestrator verdict sweeps/modes verdict.steps=1000000   # The verdict
try real-model $py -m orchestrator workload=hf workload.model=WhisperForConditionalGeneration bench=quick bench.task=infer sweep.dir=sweeps/whisper   # Real models
try own-model-dict $py -m orchestrator workload=module workload.path=tests workload.target=user_models:TakesOneDict 'workload.inputs=[{x: [8,32], scale: {shape: [8,1], fill: 1}}]' bench=quick sweep.dir=sweeps/one-dict
try bad-blocks $py -m orchestrator workload=hf workload.model=BertForMaskedLM workload.blocks=bert.encoder.layers   # refused: exit 2
try results-gather $py -m orchestrator gather sweeps/modes                     # Results
try compare $py -m orchestrator compare sweeps/modes sweeps/one-dict           # Results: compare (other models: nothing paired)
try beyond-scope $py -m orchestrator +sweep=scope bench=quick sweep.dir=sweeps/scope   # Beyond the modes
try when-it-fails $py -m orchestrator workload=module workload.path=tests workload.target=user_models:Raises 'workload.inputs=[[8,32]]' bench=quick sweep.dir=sweeps/readme-fail   # When things fail: exit 1
try status $py -m orchestrator status sweeps/readme-fail
