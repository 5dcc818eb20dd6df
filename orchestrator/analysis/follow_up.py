"""Follow-up jobs: where a model's verdict names a measured cause with a remedy, more jobs measure
the named setting with levers applied, one step at a time (analysis/stack.py: each step stacks the
lever of the largest cause still slowing the best job so far), so that the verdict gives the best
setting found beside the answer at the user's settings. The user's own jobs are never changed.

None where the sweep already measures that lever for the model, or where it does nothing on the
device (CUDA graphs on a CPU). Follow-up rows carry `follow_up_of` (the named setting's job) and
`lever` (the stack: `A + B`); the suite summary, `compare` and the upgrade A/B leave them out. What a
lever moved is read from both jobs' own figures (`lever_effect`).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, cast

import pandas as pd

from orchestrator.analysis.answers import Cause, FollowUp, Verdict
from orchestrator.analysis.causes import causes, kind_split, slowing
from orchestrator.analysis.stack import SEPARATOR, walk
from orchestrator.config.plan import job_id_of
from orchestrator.config.spec import JobSpec, to_job_config
from orchestrator.core.numbers import number
from orchestrator.core.result import COL, keys_of


def main_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The sweep's own jobs: follow-ups left out."""
    return df[df[COL.follow_up_of].isna()] if COL.follow_up_of in df else df


def _applied(config: dict[str, Any], levers: list[str]) -> dict[str, Any]:
    """The job's config with the levers' overrides, in order (a later value of a key wins)."""
    out = copy.deepcopy(config)
    for lever in levers:
        key, _, value = lever.partition("=")
        section, name = key.split(".")
        out[section][name] = {"true": True, "false": False}.get(value, value)
    to_job_config(out)  # checked as any config is: a lever that does not apply fails here, loudly
    return out


def follow_up_specs(verdict: Verdict, df: pd.DataFrame, sweep_dir: str, budget: int) -> list[JobSpec]:
    """The next step of each model's stacked walk (analysis/stack.py) that has no job yet: the named
    setting with the stack's levers, up to `budget` steps a model (`verdict.max_follow_ups`)."""
    rows = main_rows(df).set_index(COL.job_id, drop=False)
    follow = df[df[COL.follow_up_of].notna()] if COL.follow_up_of in df else df.iloc[0:0]
    out = []
    for v in verdict.models:
        if v.job_id is None or v.job_id not in rows.index:
            continue
        row = cast(pd.Series, rows.loc[v.job_id])  # one row: job ids are unique
        same = [c for c in keys_of("model") if c in rows]  # the model's jobs: its settings alike
        model = rows[(rows[same].astype(str) == row[same].astype(str)).all(axis=1)]
        _, levers = walk(row, follow[follow[COL.follow_up_of] == v.job_id], model, budget)
        if levers is None:
            continue
        config = _applied(row[COL.config], levers)
        axes = dict(row[COL.axes]) if isinstance(row.get(COL.axes), dict) else {}
        lever = SEPARATOR.join(levers)
        out.append(JobSpec(job_id_of(config), axes, config, sweep_dir, follow_up_of=v.job_id, lever=lever))
    return out


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


def other_machine(a: pd.Series, b: pd.Series) -> bool:
    """Whether two jobs ran on different machines (or across a reboot), as their host names and boot
    ids say; False where either result did not record its boot (written before `env_boot`)."""
    boots = a.get(COL.env_boot), b.get(COL.env_boot)
    if not all(isinstance(x, str) for x in boots):
        return False
    return (a.get(COL.env_host), boots[0]) != (b.get(COL.env_host), boots[1])


def lever_effect(named: pd.Series, follow: pd.Series, cause: str) -> tuple[str, Cause | None]:
    """What the lever moved, each figure measured in both jobs (the named setting's, then with the
    lever): the kind of kernel its cause named (`matmul_slower`: matmul kernels a compiled step), and
    both sides' steps (a launch-bound eager step moves with the host between jobs, and the speedup
    with it); and what still slows the follow-up's step, if anything: its cause with the most
    milliseconds, else its first untimed one."""
    said = []
    kind = cause.rsplit("_", 1)[0] if cause.endswith(("_slower", "_faster")) else None
    splits = kind_split(named, "compiled"), kind_split(follow, "compiled")
    if kind and all(splits):  # both profiled: a kind gone from one side took 0 ms there
        was, now = (split.get(kind, 0.0) for split in splits)
        if was or now:
            said.append(f"{kind} kernels {_ms(now)} a compiled step (was {_ms(was)})")
    steps = []
    for side in ("compiled", "eager"):
        key = getattr(COL, f"{side}_ms")
        was, now = number(named.get(key)), number(follow.get(key))
        if was and now:
            steps.append(f"{side} {_ms(now)} (was {_ms(was)})")
    said += ["steps: " + ", ".join(steps)] if steps else []
    if said and other_machine(named, follow):
        said.append("measured on another machine than the named setting's job: its figures cross machines")
    slower = slowing(causes(follow))
    # the most milliseconds first (a recompile in the warm-up is ranked first by `causes`, untimed)
    timed = sorted((c for c in slower if c.ms_per_step), key=lambda c: -(c.ms_per_step or 0.0))
    first = timed or slower
    still = first[0] if first else None
    return ("with it: " + "; ".join(said)) if said else "", still


def chosen(ran: pd.DataFrame, found: list[Cause]) -> pd.Series:
    """The follow-up of a model to report, of those that ran (an older sweep's causes may have named
    another lever): the one for its largest cause whose lever ran, else the last."""
    for lever in [c.lever for c in found if c.lever]:  # the largest first, as follow_up_specs takes them
        rows = ran[ran[COL.lever] == lever]
        if len(rows):
            return rows.iloc[-1]
    return ran.iloc[-1]


def with_effect(answer: FollowUp, named: pd.Series, follow: pd.Series) -> FollowUp:
    """A passed follow-up's answer with what its lever moved and what still slows its step."""
    moved, still = lever_effect(named, follow, answer.cause)
    if still:
        return dataclasses.replace(answer, moved=moved, still=still.text, next_lever=still.lever)
    return dataclasses.replace(answer, moved=moved)


def follow_up_lines(f: FollowUp) -> list[str]:
    """What the lever moved, and what still slows the follow-up's step (with the next lever)."""
    return [line for line in (f.moved, still_line(f.still, f.next_lever) if f.still else "") if line]


def still_line(still: str, next_lever: str | None) -> str:
    """What still slows a step, with the lever to stack next where one is known."""
    return f"still: {still}" + (f" (next lever: {next_lever})" if next_lever else "")
