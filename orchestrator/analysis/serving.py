"""Where compile stops paying as the batch grows: for generation sweeps over `workload.batch_size`,
a line per model (the other axes fixed), then each batch's answer, from the verdict's own answers.

The answer at a batch is the model's verdict there (mode and KV cache named, net of compile over the
declared run); nothing is extrapolated between measured batches.
"""

from __future__ import annotations

import pandas as pd

from orchestrator.analysis.answers import ModelVerdict
from orchestrator.job.result import COL
from orchestrator.results.present import join_values


def batch_lines(df: pd.DataFrame, verdicts: list[ModelVerdict], models: list[str]) -> list[str]:
    """For each model a generation sweep measured at several batches: `serving <model>: compile stops
    paying at batch 64`, then a line per batch (`  batch 1: use default kv_cache=static 2.1x`)."""
    if COL.task not in df or COL.batch_size not in df:
        return []
    rows = df.drop_duplicates(COL.job_id).set_index(COL.job_id)
    rest = [c for c in models if c != COL.batch_size and c in df]
    groups: dict[str, list[tuple[int, ModelVerdict]]] = {}
    for v in verdicts:
        if v.job_id not in rows.index or rows.at[v.job_id, COL.task] != "generate":
            continue
        row = rows.loc[v.job_id]
        name = join_values(rows.loc[[v.job_id]], [c for c in rest if c != COL.task]).iloc[0]
        groups.setdefault(name, []).append((int(row[COL.batch_size]), v))
    out = []
    for name, answers in groups.items():
        if len({batch for batch, _ in answers}) < 2:
            continue
        answers.sort(key=lambda a: a[0])
        said = [f"  batch {batch}: {_answer(v)}" for batch, v in answers]
        # an untrusted answer says neither: compile may or may not pay there
        known = [(str(batch), v.outcome == "compile") for batch, v in answers if v.outcome != "untrusted"]
        unknown = [str(batch) for batch, v in answers if v.outcome == "untrusted"]
        pays = [p for _, p in known]
        paying = [batch for batch, p in known if p]
        not_paying = [batch for batch, p in known if not p]
        if not known:
            end = "no trustworthy answer at any batch measured"
        elif not not_paying or not paying:
            end = f"compile pays at {'every' if paying else 'no'} batch measured"
        elif pays == sorted(pays, reverse=True):  # paying up to a batch, then not
            end = f"compile stops paying at batch {not_paying[0]}"
        else:
            end = f"compile pays at batch {', '.join(paying)}; not at {', '.join(not_paying)}"
        if known and unknown:
            end += f" (batch {', '.join(unknown)}: no trustworthy answer)"
        out += [f"serving {name}: {end}", *said]
    return out


def _answer(v: ModelVerdict) -> str:
    if v.outcome == "compile":
        return f"use {v.choice} {v.speedup:.3g}x" if v.speedup else f"use {v.choice}"
    return "no trustworthy answer" if v.outcome == "untrusted" else "eager"
