"""Follow-up jobs: where a model's verdict names a measured cause with a remedy, one more job per
model measures the named setting with that lever applied, so that the verdict gives both answers
(at the user's settings, and with the lever). The user's own jobs are never changed.

One follow-up per model, for its largest cause with a lever; none where the sweep already measures
that lever for the model, or where it does nothing on the device (CUDA graphs on a CPU). Follow-up
rows carry `follow_up_of` and `lever`; the suite summary, `compare` and the upgrade A/B leave them out.
"""

from __future__ import annotations

import copy

import pandas as pd

from orchestrator.analysis.answers import Verdict
from orchestrator.config.plan import job_id_of
from orchestrator.config.spec import JobSpec, to_job_config
from orchestrator.job.result import COL, keys_of

# Levers that do nothing on a CPU: CUDA graphs, TF32, the math attention kernel's reduced precision.
CUDA_ONLY = ("compile.mode=reduce-overhead", "bench.matmul_precision=high", "bench.sdp_reduced_math=true")


def main_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The sweep's own jobs: follow-ups left out."""
    return df[df[COL.follow_up_of].isna()] if COL.follow_up_of in df else df


def _measured_already(rows: pd.DataFrame, lever: str) -> bool:
    """Whether a job of the model already runs with the lever's value."""
    key, _, value = lever.partition("=")
    column = {
        "compile.dynamic": COL.dynamic,
        "compile.mode": COL.mode,
        "bench.matmul_precision": COL.num_matmul_precision,
        "bench.sdp_reduced_math": COL.num_sdp_reduced_math,
        "generate.cache": COL.kv_cache,
    }.get(key)
    if column is None or column not in rows:
        return False
    return any(str(v).lower() == value.lower() for v in rows[column])


def _applied(config: dict, lever: str) -> dict:
    """The job's config with the lever's one override."""
    key, _, value = lever.partition("=")
    section, name = key.split(".")
    out = copy.deepcopy(config)
    out[section][name] = {"true": True, "false": False}.get(value, value)
    to_job_config(out)  # checked as any config is: a lever that does not apply fails here, loudly
    return out


def follow_up_specs(verdict: Verdict, df: pd.DataFrame, sweep_dir: str) -> list[JobSpec]:
    """One follow-up job per model whose named setting has a measured cause with a lever that the
    sweep does not measure already and that acts on the device."""
    rows = main_rows(df).set_index(COL.job_id, drop=False)
    done = set(df[COL.follow_up_of].dropna()) if COL.follow_up_of in df else set()
    out = []
    for v in verdict.models:
        if v.job_id is None or v.job_id not in rows.index or v.job_id in done:
            continue
        row = rows.loc[v.job_id]
        same = [c for c in keys_of("model") if c in rows]  # the model's jobs: its settings alike
        model = rows[(rows[same].astype(str) == row[same].astype(str)).all(axis=1)]
        on_cpu = not row.get(COL.env_cuda)
        for cause in v.causes:
            lever = cause.lever
            if lever is None or (on_cpu and lever in CUDA_ONLY) or _measured_already(model, lever):
                continue
            config = _applied(row[COL.config], lever)
            axes = dict(row[COL.axes]) if isinstance(row.get(COL.axes), dict) else {}
            spec = JobSpec(job_id_of(config), axes, config, sweep_dir, follow_up_of=v.job_id, lever=lever)
            out.append(spec)
            break
    return out
