#!/usr/bin/env bash
# Fork server on and off, interleaved, on an idle CPU host: the same two jobs (tiny BERT MLM inference,
# eager control and default) per sweep, three rounds. Whether a forked job's timed figures read as an
# interpreter's (issue 36). Results in benchmarks/cpu-time-to-answer/fork-ab/<sweep>/.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/cpu-time-to-answer/fork-ab
for r in 1 2 3; do
  for fork in true false; do
    name=fork-$fork-r$r
    rm -rf "/tmp/fork-ab/$name"
    .venv/bin/python -m orchestrator workload=hf workload.model=BertForMaskedLM workload.size=tiny \
      bench.task=infer bench=quick bench.device=cpu compile.mode=eager,default logger=none \
      verdict.follow_up=false launcher.fork_server=$fork sweep.dir="/tmp/fork-ab/$name" 2>&1 | grep "time:"
    mkdir -p "$out/$name" && cp "/tmp/fork-ab/$name/results.jsonl" "$out/$name/"
  done
done
