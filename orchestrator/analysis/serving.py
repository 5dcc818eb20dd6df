"""Generation's verdict for serving: a run counted in requests (`request_run`), and where compile
stops paying as the batch grows: for generation sweeps over `workload.batch_size`, a line per model
(the other axes fixed), then each batch's answer, from the verdict's own answers.

The answer at a batch is the model's verdict there (mode and KV cache named, net of compile over the
declared run); nothing is extrapolated between measured batches.
"""

from __future__ import annotations

from typing import cast

import pandas as pd

from orchestrator.analysis.answers import ModelVerdict
from orchestrator.config.schema import VerdictConfig
from orchestrator.core.numbers import number, present
from orchestrator.core.result import COL
from orchestrator.results.present import duration, join_values, percent
from orchestrator.results.present import sig as _sig

PerRequest = tuple[float, float | None, float | None, float | None]  # eager ms, speedup, CI low, high


def request_run(row: pd.Series, vc: VerdictConfig) -> tuple[float, str, PerRequest] | None:
    """`generate` with the run in requests (`verdict.requests`, or the requests eager serves in
    `verdict.serve_s`): how many, in words, and the figures of a whole request (eager's, the speedup
    and its CI: the prefill and every decode token). None for other jobs and for results from before
    a request's speedup had a CI (their run is in decode steps)."""
    if row.get(COL.task) != "generate" or (vc.requests is None and vc.serve_s is None):
        return None
    eager_ms = number(row.get(COL.eager_e2e_ms))
    keys = (COL.gen_e2e_speedup, COL.gen_e2e_ci_low, COL.gen_e2e_ci_high)
    speedup, low, high = (number(row.get(k)) for k in keys)
    if not eager_ms or speedup is None or low is None or high is None:
        return None
    if vc.requests is not None:
        n, words = float(vc.requests), f"{vc.requests:,} requests"
    else:
        assert vc.serve_s is not None
        n = vc.serve_s / (eager_ms / 1000)  # one request after the other, at full load
        words = f"{duration(vc.serve_s)} of serving ({_sig(n)} requests)"
    return n, words, (eager_ms, speedup, low, high)


def limits_line(row: pd.Series) -> str | None:
    """Where each side stands against the card's limits (docs/limits.md), in words. `generate`: its
    decode against the bandwidth and its prefill against the FLOP/s (job/phases/limits.py),
    `compiled decode at 43% of measured bandwidth (40% of the datasheet's), eager at 6%; ...`; where
    no peak is known, that said with how to get one. Train and infer: the step's MFU, and its bytes
    against the bandwidth where the profile counted them (`bench.profile`), said only where measured.
    None for results from before these were measured."""
    if row.get(COL.task) == "generate":
        if not present(row.get(COL.gen_decode_bytes)):
            return None
        figures = (
            ("decode", "bandwidth", row.get(COL.gen_bandwidth_basis), "decode_mbu", "decode_mbu_spec"),
            ("prefill", "FLOP/s", row.get(COL.gen_flops_basis), "prefill_mfu", "prefill_mfu_spec"),
        )
        return "; ".join(_against(row, *f, unknown_said=True) for f in figures)
    figures = (
        ("step", "FLOP/s", row.get(COL.mfu_basis), "mfu", "mfu_spec"),
        ("step's bytes", "bandwidth", row.get(COL.peak_bytes_basis), "mbu", "mbu_spec"),
    )
    said = [_against(row, *f, unknown_said=False) for f in figures]
    return "; ".join(s for s in said if s) or None


def _against(
    row: pd.Series, what: str, limit: str, basis: object, fig: str, spec_fig: str, unknown_said: bool
) -> str:
    """One figure of both sides against its peak, measured or the datasheet's (the basis says which)."""
    ours = [number(row.get(getattr(COL, f"{side}_{fig}"))) for side in ("compiled", "eager")]
    spec = number(row.get(getattr(COL, f"compiled_{spec_fig}")))
    if ours[0] is None:
        if not unknown_said:
            return ""
        why = basis if isinstance(basis, str) else "no peak known"
        how = "" if "measure_peaks" in why else "; bench.measure_peaks=true measures this node's"
        return f"{what}: no {limit} peak to hold it against ({why}{how})"
    measured = isinstance(basis, str) and basis.startswith("measured")
    against = f"measured {limit}" if measured else f"the datasheet's {limit}"
    text = f"compiled {what} at {percent(ours[0])} of {against}"
    text += f" ({percent(spec)} of the datasheet's)" if measured and spec is not None else ""
    return text + f", eager at {percent(ours[1])}"


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
        row = cast(pd.Series, rows.loc[v.job_id])  # one row: duplicates dropped above
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
    return {"untrusted": "no trustworthy answer", "eager_not_finite": "no answer"}.get(v.outcome, "eager")
