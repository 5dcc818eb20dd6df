"""The verdict: per model, the compile setting (or eager) that saves the most time over the run the
user declares (`verdict.steps`, `verdict.serve_s` of serving, or generate's `verdict.requests`), net
of its compile cost (cold or warm), among the settings that passed; 'no measurable gain' when the
speedup's CI includes 1; and the risks of the setting it names. Written to `verdict.json`, printed,
and shown on the dashboard. One job, the verdict; its lines of text are built here too.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd

from orchestrator.analysis.answers import BestFound, FollowUp, ModelVerdict, PathStep, Verdict
from orchestrator.analysis.causes import cause_line, causes, cudagraph_skips_text, top_break_reason
from orchestrator.analysis.follow_up import (
    chosen,
    follow_up_lines,
    lever_effect,
    main_rows,
    still_line,
    with_effect,
)
from orchestrator.analysis.known_issues import known_issue
from orchestrator.analysis.serving import batch_lines, limits_line, request_run
from orchestrator.analysis.stack import best_of, walk
from orchestrator.analysis.suite import MEMORY_RATIO, passed_job, setting_text, suite_lines, suite_summary
from orchestrator.analysis.trust import distrust, remedy
from orchestrator.config.schema import VerdictConfig
from orchestrator.core.failures import failure_message
from orchestrator.core.files import write_json_atomic
from orchestrator.core.numbers import is_false, number, payback_steps, saved_per_step_s, text
from orchestrator.core.result import COL
from orchestrator.core.stats import geomean_ci
from orchestrator.results.present import (
    PLAIN_WIDTH,
    axis_text,
    ci_text,
    duration,
    in_mode_order,
    join_values,
    model_columns,
    with_axes,
)
from orchestrator.results.present import sig as _sig
from orchestrator.results.recipe import recipe_lines, reproduce_command

VERDICT_FILE = "verdict.json"
THIN_MARGIN = 0.5  # a parity error past this fraction of its limit is a thin margin


def run_length(row: pd.Series, vc: VerdictConfig) -> tuple[float, str]:
    """Steps of the declared run for this job, and the words for it."""
    eager_ms = number(row.get(COL.eager_ms))
    task = row.get(COL.task)
    if vc.serve_s is not None and task in ("infer", "generate") and eager_ms:
        calls = vc.serve_s / (eager_ms / 1000)  # what eager serves in that time at full load
        unit = "decode steps, prefill left out" if task == "generate" else "calls"
        return calls, f"{duration(vc.serve_s)} of serving ({_sig(calls)} {unit})"
    return float(vc.steps), f"{vc.steps:,} steps"


def compile_cost(row: pd.Series, cache: str) -> tuple[float, str]:
    """Seconds of compiling the run pays (recompiles over the shape schedule included), and which."""
    recompile = number(row.get(COL.dyn_compile_s)) or 0.0
    first = number(row.get(COL.compile_s)) or 0.0
    if cache == "warm":
        warm = number(row.get(COL.compile_warm_s))
        return (warm, "warm") if warm is not None else (first, "compile_s: no warm probe")
    cold = number(row.get(COL.compile_cold_s))
    return (cold + recompile, "cold") if cold is not None else (first + recompile, "compile_s: shared cache")


def assess(row: pd.Series, vc: VerdictConfig) -> ModelVerdict:
    """A passed compiled job's figures for the run: net seconds saved (point and CI), payback steps."""
    requests = request_run(row, vc)  # generate: whole requests, the prefill's gain or loss in them
    steps, run = requests[:2] if requests else run_length(row, vc)
    cost, cost_kind = compile_cost(row, vc.cache)
    eager_ms = row.get(COL.eager_ms)
    speedup, low, high = (number(row.get(k)) for k in (COL.speedup, COL.speedup_ci_low, COL.speedup_ci_high))
    if requests:
        eager_ms, speedup, low, high = requests[2]

    def net(s: float | None) -> float | None:  # seconds saved over the run at speedup s, net of the cost
        saved = saved_per_step_s(eager_ms, s)
        return steps * saved - cost if saved is not None else None

    per_step = saved_per_step_s(eager_ms, speedup)
    return ModelVerdict(
        speedup=speedup,
        ci=[low, high],
        measurable=low is not None and low > 1,
        steps=steps,
        run=run,
        compile_s=cost,
        compile_kind=cost_kind,
        saved_per_step_ms=per_step * 1000 if per_step is not None else None,
        saved_per_step_ci_ms=[
            s * 1000 if (s := saved_per_step_s(eager_ms, x)) is not None else None for x in (low, high)
        ],
        net_saved_s=net(speedup),
        net_saved_ci_s=[net(low), net(high)],
        payback_steps=payback_steps(cost, per_step),
        unit="requests" if requests else "steps",
    )


def parity_margin(row: pd.Series) -> tuple[float | None, float | None, str]:
    """The parity error and limit of the rule that passed the job: within the tolerance of eager, or
    the fp64 rule (a job passed by one rule is not judged against the other's limit)."""
    if row.get(COL.parity_rule) == "within tol of eager":
        return number(row.get(COL.parity_vs_eager)), number(row.get(COL.parity_tol)), "tolerance of eager"
    return (
        number(row.get(COL.parity_err)),
        number(row.get(COL.parity_limit)),
        text(row.get(COL.parity_rule), "limit"),
    )


def risks(row: pd.Series) -> list[str]:
    """What could go wrong with this setting, in a few words each."""
    out = []
    if (number(row.get(COL.graph_breaks)) or 0) > 0:
        top = top_break_reason(row)
        top = f" (top: {top})" if top else ""
        fraction = number(row.get(COL.compiled_fraction))
        eager = (
            f" leaving {1 - fraction:.0%} of the forward eager"
            if fraction is not None and fraction < 0.95
            else ""
        )
        out.append(f"{row[COL.graph_breaks]:.0f} graph break(s){eager}{top}")
    if (number(row.get(COL.dyn_recompiles)) or 0) > 0:
        out.append(
            f"{row[COL.dyn_recompiles]:.0f} recompile(s) over the "
            f"{number(row.get(COL.dyn_shapes)) or 0:.0f}-shape "
            f"schedule (+{duration(number(row.get(COL.dyn_compile_s)))})"
        )
    if isinstance(row.get(COL.gen_recompile_limit), str):  # generation: part of a request ran eager
        out.append("recompile limit hit within a request: the rest of that frame ran eager")
    if (skipped := cudagraph_skips_text(row)) is not None:
        out.append(skipped)
    ratio = number(row.get(COL.memory_ratio))
    if ratio is not None and ratio > MEMORY_RATIO:
        out.append(f"memory up {ratio:.2f}x ({_sig(number(row.get(COL.compiled_peak_gib)))} GiB)")
    err, limit, rule = parity_margin(row)
    if err is not None and limit and err / limit > THIN_MARGIN:
        out.append(f"parity margin thin: error {err / limit:.0%} of its limit ({rule})")
    if is_false(row.get(COL.conv_ok)):
        out.append(
            f"convergence drift: loss off by up to {_sig(number(row.get(COL.conv_divergence)))} "
            f"(eager vs eager {_sig(number(row.get(COL.conv_baseline_divergence)))})"
        )
    return out


def decide(part: pd.DataFrame, settings: list[str], vc: VerdictConfig) -> ModelVerdict:
    """One model's verdict from its jobs (its name is set by the caller)."""
    compiled = part[part[COL.mode] != "eager"]
    passed = compiled[
        pd.Series([passed_job(r) for _, r in compiled.iterrows()], index=compiled.index, dtype=bool)
    ]
    failed = [
        f"{setting_text(r, settings)} ({'; '.join(filter(None, [r[COL.status], known_issue(r)]))})"
        for _, r in compiled.drop(passed.index).iterrows()
    ]
    eager_at_fault = part[part[COL.status] == "eager_not_finite"]
    if passed.empty and len(eager_at_fault):  # no compiled setting can be judged: eager is NaN or Inf
        said = eager_at_fault.iloc[0].get(COL.parity_error) or failure_message(eager_at_fault.iloc[0])
        why = f"no answer: {said}; fix that first"
        return ModelVerdict(
            jobs=len(part), failed=failed, choice="no answer", outcome="eager_not_finite", why=why
        )
    if passed.empty:
        why = f"no compiled setting passed: {', '.join(failed)}" if len(compiled) else (
            "no compiled setting in this sweep"
        )  # fmt: skip
        return ModelVerdict(jobs=len(part), failed=failed, choice="eager", outcome="none_passed", why=why)
    figures = {i: assess(r, vc) for i, r in passed.iterrows()}
    gains = [i for i in figures if figures[i].measurable]
    pick = max(gains or figures, key=lambda i: (figures[i].net_saved_s if gains else figures[i].speedup) or 0)
    # pandas-stubs: iterrows gives a Hashable label, which loc does not take
    f, row = figures[pick], passed.loc[pick]  # type: ignore[call-overload]
    setting, ci = setting_text(row, settings), ci_text(*f.ci)
    gain = f"{f.speedup:.3g}x [{ci}]"
    if gains and (f.net_saved_s or 0) > 0:
        choice, outcome = setting, "compile"
        why = (
            f"saves {duration(f.net_saved_s)} over {f.run} net of {duration(f.compile_s)} "
            f"{f.compile_kind} compile ({gain}; pays back after {_sig(f.payback_steps)} {f.unit})"
        )
    elif gains:
        choice, outcome = "eager", "eager_cost"
        payback = f"pays back only after {_sig(f.payback_steps)} {f.unit}" if f.payback_steps else ""
        why = (
            f"compile cost never paid back over {f.run}: {setting} is {gain} but its "
            f"{duration(f.compile_s)} {f.compile_kind} compile {payback}"
        )
    elif f.ci[1] is not None and f.ci[1] < 1:
        choice, outcome, why = "eager", "slower", f"compiled is slower: best {setting} {gain}"
    else:
        choice, outcome = "eager", "no_gain"
        why = f"no measurable gain: best {setting} {gain}, its CI includes 1"
    reasons = distrust(part, row, vc, (f.speedup, *f.ci))
    if reasons:  # the measurements cannot carry an answer: say why, and what to do, first
        said = "; ".join(reason for _, reason in reasons)
        choice, outcome = "no trustworthy answer", "untrusted"
        why = (
            f"no trustworthy answer: {said}; to get one: {remedy(reasons)} (best measured: {setting} {gain})"
        )
    found = causes(row)
    return dataclasses.replace(
        f, jobs=len(part), failed=failed, choice=choice, outcome=outcome, why=why, setting=setting,
        causes=found, cause=cause_line(found, f.speedup, f.ci, outcome),
        job_id=row[COL.job_id], risks=risks(row), distrust=[r for _, r in reasons],
        numerics=row.get(COL.numerics) if isinstance(row.get(COL.numerics), str) else None,
        limits=limits_line(row),
    )  # fmt: skip


def follow_up_answer(row: pd.Series, vc: VerdictConfig) -> FollowUp:
    """A follow-up job's answer: its figures over the same run, or how it ended."""
    out = FollowUp(lever=str(row[COL.lever]), job_id=row[COL.job_id], status=str(row[COL.status]))
    if not passed_job(row):
        return dataclasses.replace(out, why=f"with {out.lever}: {row[COL.status]} ({failure_message(row)})")
    f = assess(row, vc)
    gain = f"{f.speedup:.3g}x [{ci_text(*f.ci)}]"
    net = f"saves {duration(f.net_saved_s)}" if (f.net_saved_s or 0) > 0 else "saves nothing"
    payback = f", pays back after {_sig(f.payback_steps)} {f.unit}" if f.payback_steps else ""
    why = f"with {out.lever}: {gain}; {net} over {f.run} net of {duration(f.compile_s)} compile{payback}"
    # the main answer's checks that read one job: alone when timed, a CI narrow enough
    doubts = [reason for _, reason in distrust(pd.DataFrame([row]), row, vc, (f.speedup, *f.ci))]
    if doubts:
        why += f"; not trusted: {'; '.join(doubts)}"
    return dataclasses.replace(
        out, speedup=f.speedup, ci=f.ci, net_saved_s=f.net_saved_s, payback_steps=f.payback_steps, why=why
    )


NUMERICS_LEVERS = ("bench.matmul_precision=", "bench.sdp_reduced_math=")  # levers that change results


def stacked_answer(
    named: pd.Series, ran: pd.DataFrame, model: pd.DataFrame, vc: VerdictConfig, setting: str
) -> tuple[list[PathStep], BestFound | None]:
    """The stacked follow-ups' path (analysis/stack.py), replayed over the steps that ran, and the best
    setting found with its recipe; None where no step gained."""
    steps, _ = walk(named, ran, model, max(vc.max_follow_ups, len(ran)))
    path = []
    for s in steps:
        moved = lever_effect(s.before, s.row, s.cause)[0] if passed_job(s.row) else ""
        path.append(
            PathStep(
                levers=s.levers, lever=s.levers[-1], job_id=str(s.row[COL.job_id]), outcome=s.outcome,
                status=str(s.row[COL.status]), speedup=number(s.row.get(COL.speedup)),
                ci=[number(s.row.get(COL.speedup_ci_low)), number(s.row.get(COL.speedup_ci_high))],
                moved=moved,
            )
        )  # fmt: skip
    best = best_of(steps)
    if best is None:
        return path, None
    f, config = assess(best.row, vc), best.row[COL.config]
    still = lever_effect(best.before, best.row, best.cause)[1]
    numerics = [lv for lv in best.levers if lv.startswith(NUMERICS_LEVERS)]
    err, limit, rule = parity_margin(best.row)
    said = f"error {_sig(err)} within its limit {_sig(limit)} ({rule})" if err is not None else "passed"
    return path, BestFound(
        levers=best.levers, setting=" + ".join([setting, *best.levers]), job_id=str(best.row[COL.job_id]),
        speedup=f.speedup, ci=f.ci, net_saved_s=f.net_saved_s, payback_steps=f.payback_steps,
        numerics=numerics, parity=said, recipe=recipe_lines(config), reproduce=reproduce_command(config),
        still=still.text if still else "", next_lever=still.lever if still else None,
    )  # fmt: skip


def compute(df: pd.DataFrame, plan: Mapping[str, Any], vc: VerdictConfig) -> Verdict:
    """The verdict of every model of a results table (its sweep's `plan` names the swept axes), and
    the suite summary where there are several. Follow-up jobs (analysis/follow_up.py) do not take
    part in a model's answer or the suite: each is the answer with its lever, beside it."""
    follow = df[df[COL.follow_up_of].notna()] if COL.follow_up_of in df else df.iloc[0:0]
    df, swept = with_axes(main_rows(df), plan)
    df = in_mode_order(df)
    models = model_columns(df, swept)
    settings = [COL.mode] + [c for c in swept if c != COL.mode and c not in models]
    # A model is named by what tells it apart; what all models share is said once (`shared`).
    varying = [c for c in models if df[c].map(axis_text).nunique() > 1]
    names = join_values(df, varying or models)
    fixed = [c for c in models if c not in varying]
    shared = join_values(df.iloc[:1], fixed).iloc[0] if varying and fixed else ""
    parts = {name or "all": part for name, part in df.groupby(names, sort=False)}
    verdicts = [dataclasses.replace(decide(part, settings, vc), model=name) for name, part in parts.items()]
    for v in verdicts:  # the answer with its lever, where a follow-up of the named setting ran
        ran = follow[follow[COL.follow_up_of] == v.job_id]
        if len(ran):
            row = chosen(ran, v.causes)
            answer = follow_up_answer(row, vc)
            kinds = [c.kind for c in v.causes if c.lever == answer.lever]
            v.follow_up = dataclasses.replace(answer, cause=kinds[0] if kinds else "")
            named = df[df[COL.job_id] == v.job_id].iloc[0]
            if passed_job(row):  # what the lever moved, and what is left
                v.follow_up = with_effect(v.follow_up, named, row)
            v.path, v.best = stacked_answer(named, ran, parts[v.model], vc, v.setting or "")
    suite = suite_summary(df.assign(_model=names), settings) if len(verdicts) > 1 else None
    serving = batch_lines(df, verdicts, models)
    return Verdict(vc.steps, vc.serve_s, str(vc.cache), shared, verdicts, suite, serving, vc.requests)


def lines(verdict: Verdict) -> list[str]:
    """One line per model (a second with its risks and failures, if any), then the suite's; each wrapped
    at PLAIN_WIDTH (never cut: the answer is read whole), its continuation indented under it."""
    serving = f"{duration(verdict.serve_s)} of serving (infer, generate) or " if verdict.serve_s else ""
    requests = f"{verdict.requests:,} requests (generate) or " if verdict.requests else ""
    head = f"verdict for {serving}{requests}{verdict.steps:,} steps, {verdict.cache} compile"
    numerics = {v.numerics for v in verdict.models if v.numerics}
    head += f"; numerics: {numerics.pop()}" if len(numerics) == 1 else ""  # else per model, below
    out = [head + (f"; every model: {verdict.shared}" if verdict.shared else "")]
    for v in verdict.models:
        head = {"compile": f"use {v.choice}: ", "untrusted": "", "eager_not_finite": ""}.get(
            v.outcome, "eager: "
        )
        at = f" (at {v.numerics})" if v.numerics and len(numerics) > 1 else ""
        if v.best:  # the best found first, then the path to it, then the answer at the user's settings
            out += [f"verdict {v.model}: {best_text(v.best, verdict)}", *path_lines(v.path)]
            out += [f"    {still_line(v.best.still, v.best.next_lever)}"] if v.best.still else []
            out.append(f"  your settings: {head}{v.why}{at}")
        else:
            out.append(f"verdict {v.model}: {head}{v.why}{at}")
        label = "risks" if v.outcome == "compile" else f"risks of {v.setting}"
        more = (
            ([v.cause] if v.cause else [])
            + [c.text for c in v.causes if c.affects == "profile"]  # what the profile could not tell
            + ([v.limits] if v.limits else [])
            + ([f"{label}: {'; '.join(v.risks)}"] if v.risks else [])
            + ([f"failed: {', '.join(v.failed)}"] if v.failed else [])
        )
        out += [f"  {'; '.join(more)}"] if more else []  # the model's second line, only when there is news
        if v.best:  # handed over as code
            out += [
                "  recipe:",
                *[f"    {line}" for line in v.best.recipe],
                f"  reproduce: {v.best.reproduce}",
            ]
        elif len(v.path) > 1:  # stacked steps, none of which gained; what still slows the first
            out += path_lines(v.path)
            f = v.follow_up
            out += [f"    {still_line(f.still, f.next_lever)}"] if f and f.still else []
        elif v.follow_up:  # the answer with the lever, then what it moved and what is left
            out += [f"  follow-up {v.follow_up.why}"] + [f"    {x}" for x in follow_up_lines(v.follow_up)]
    out += verdict.serving
    out += best_suite_lines(verdict)
    if verdict.suite:
        out += suite_lines(verdict.suite, PLAIN_WIDTH)
    return [piece for line in out for piece in wrapped(line)]


def best_text(best: BestFound, verdict: Verdict) -> str:
    """The best found in one sentence: its stack, speedup and CI, payback, and the numerics it changes."""
    net = f"saves {duration(best.net_saved_s)}" if (best.net_saved_s or 0) > 0 else "saves nothing"
    payback = f", pays back after {_sig(best.payback_steps)} steps" if best.payback_steps else ""
    said = f"best found: {best.setting} {best.speedup:.3g}x [{ci_text(*best.ci)}]; {net} over "
    said += f"{verdict.steps:,} steps{payback}"
    if best.numerics:
        said += f"; changes numerics ({', '.join(best.numerics)}): parity {best.parity} under them"
    return said


def path_lines(path: list[PathStep]) -> list[str]:
    """Each stacked step: the lever it added, its speedup and CI, and what became of it."""
    words = {
        "gain": "gained: kept",
        "within_ci": "within its CI: stopped",
        "loses": "lost: dropped",
        "failed": "failed: dropped",
    }
    out = []
    for i, s in enumerate(path, 1):
        gain = f"{s.speedup:.3g}x [{ci_text(*s.ci)}]" if s.speedup is not None else s.status
        out.append(f"  step {i}: + {s.lever}: {gain}, {words.get(s.outcome, s.outcome)}")
        out += [f"    {s.moved}"] if s.moved else []
    return out


def best_suite_lines(verdict: Verdict) -> list[str]:
    """Over several models: the geomean speedup at the user's settings and at the best found."""
    if len(verdict.models) < 2 or not any(v.best for v in verdict.models):
        return []
    own = [v for v in verdict.models if v.speedup]
    best = [(v.best.speedup, *v.best.ci) if v.best else (v.speedup, *v.ci) for v in own]
    # each speedup is set: the model's (`own` has one), or its best found's (a step that gained)
    mean, low, high = geomean_ci(
        [cast(float, b[0]) for b in best], [b[1] for b in best], [b[2] for b in best]
    )
    mine, my_low, my_high = geomean_ci(
        [cast(float, v.speedup) for v in own], [v.ci[0] for v in own], [v.ci[1] for v in own]
    )
    return [
        f"suite of {len(own)} models, geomean speedup at the best found {mean:.3g}x [{ci_text(low, high)}], "
        f"at your settings' best {mine:.3g}x [{ci_text(my_low, my_high)}]"
    ]


def wrapped(line: str) -> list[str]:
    """A line at most PLAIN_WIDTH wide, wrapped at spaces (a path longer than that stays whole, and a
    command to copy stays one line)."""
    if "python -m orchestrator " in line:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.wrap(
        line, PLAIN_WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    ) or [line]


def write_verdict(
    sweep_dir: Path,
    df: pd.DataFrame,
    plan: Mapping[str, Any],
    vc: VerdictConfig,
    computed: Verdict | None = None,
) -> Verdict:
    """verdict.json: `computed` where the caller holds it for these results already, else computed."""
    verdict = computed if computed is not None else compute(df, plan, vc)
    write_json_atomic(sweep_dir / VERDICT_FILE, verdict.to_dict())
    return verdict


def read_verdict(sweep_dir: Path) -> Verdict | None:
    try:
        return Verdict.from_dict(json.loads((sweep_dir / VERDICT_FILE).read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def print_verdict(verdict: Verdict, console: Any) -> None:
    for line in lines(verdict):
        console.print(line, markup=False, highlight=False)
