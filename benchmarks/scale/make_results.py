"""Write N result files of the real schema into a sweep directory, as a finished sweep leaves them.

The plan is the real one (build_plan) of a sweep with N points; each job's result is
`result_skeleton` (what the worker writes for every job) filled with the measured fields of a real
result.json (template_result.json, from a tiny CPU run), its figures jittered per job.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from orchestrator.config.plan import build_plan
from orchestrator.core.files import PLAN_FILE
from orchestrator.core.result import flat
from orchestrator.job.skeleton import result_skeleton

TEMPLATE = Path(__file__).with_name("template_result.json")
SCALED = ("eager_ms", "compiled_ms", "compile_s", "first_call_s", "wall_s")


def sweep_args(n: int) -> list[str]:
    """A sweep of exactly n points (n a multiple of 200): 5 modes x 5 sizes x 2 tasks x 2 dtypes x
    2 strategies (`parallel`, a config group: none and ddp) x n/200 seeds."""
    assert n % 200 == 0, n
    return [
        "+sweep=modes",
        "workload.size=tiny,small,gpt2,gpt2-medium,gpt2-large",
        "bench.task=train,infer",
        "bench.dtype=fp32,bf16",
        "parallel=none,ddp",
        f"bench.seed=range({n // 200})",
        "logger=none",
    ]


def make_results(n: int, sweep_dir: Path) -> list[str]:
    """Plan the n-point sweep into sweep_dir and write every job's config.yaml and result.json."""
    plan = build_plan([*sweep_args(n), f"sweep.dir={sweep_dir}"])
    template = json.loads(TEMPLATE.read_text())
    rng = random.Random(0)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    jobs = {j.job_id: {"label": j.label, "axes": j.axes} for j in plan.jobs}
    (sweep_dir / PLAN_FILE).write_text(json.dumps({"name": plan.name, "jobs": jobs}))
    for job in plan.jobs:
        result = dict(template)
        result.update(flat(result_skeleton(job).identity))
        result.update({k: template[k] * rng.uniform(0.8, 1.2) for k in SCALED})
        result["speedup"] = result["eager_ms"] / result["compiled_ms"]
        result["status"] = "ok" if rng.random() > 0.02 else "crash"
        job.job_dir.mkdir(parents=True, exist_ok=True)
        (job.job_dir / "config.yaml").write_text(json.dumps(job.config))  # JSON is YAML
        (job.job_dir / "result.json").write_text(json.dumps(result, indent=2))
    return [j.job_id for j in plan.jobs]
