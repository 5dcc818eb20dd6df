"""The top of the dashboard: the verdict per model and, over several models, the suite summary."""

from __future__ import annotations

import dataclasses
import html

import pandas as pd

from orchestrator.analysis.answers import ModelVerdict, Verdict
from orchestrator.analysis.follow_up import follow_up_lines
from orchestrator.analysis.suite import suite_table
from orchestrator.analysis.verdict import best_text, path_lines
from orchestrator.report.page import grid, html_table
from orchestrator.results.present import ci_text, duration

MAX_ANSWERS = 20  # sentences at the top of the page; the verdict table has every model
VERDICT_COLUMNS = [
    "model",
    "verdict",
    "net saved",
    "speedup",
    "95% CI",
    "compile s",
    "pays back after",
    "why",
    "cause",
    "with the lever",
    "numerics",
]


def answer_words(v: ModelVerdict) -> str:
    """A model's answer in a few words: the setting to use, no answer, or eager and why."""
    if v.outcome == "compile":
        return f"use {v.choice}"
    if v.outcome == "untrusted":
        return "no trustworthy answer"
    if v.outcome == "eager_not_finite":
        return "no answer (eager itself is not finite)"
    return f"eager ({v.outcome.replace('_', ' ')})"


def answer_sentence(v: ModelVerdict) -> str:
    """The answer in a few words, then why; once only where the why already opens with it."""
    if v.why.startswith(("no trustworthy answer", "no answer")):
        return v.why
    return f"{answer_words(v)}. {v.why}"


def verdict_table(verdict: Verdict) -> pd.DataFrame:
    rows = []
    for v in verdict.models:
        chosen = v.outcome == "compile"
        rows.append(
            {
                "model": v.model,
                "verdict": answer_words(v),
                "net saved": duration(v.net_saved_s) if chosen else "-",
                "speedup": v.speedup,
                "95% CI": ci_text(*v.ci),
                "compile s": v.compile_s,
                "pays back after": f"{v.payback_steps:.3g} {v.unit}" if v.payback_steps else "-",
                "why": v.why,
                "cause": (v.cause or "-").removeprefix("why: "),
                "with the lever": v.follow_up.why if v.follow_up else "-",
                "numerics": v.numerics or "-",
                "risks": "; ".join(v.risks) or "none seen",
                "failed": ", ".join(v.failed) or "-",
            }
        )
    return pd.DataFrame(rows)


def answers(verdict: Verdict) -> str:
    """The answer per model in a sentence each, at the top of the page: plain text that wraps at any
    width (a phone's included), so a reason not to trust it is read before any figure."""
    models = verdict.models
    items = "".join(
        f"<li class='{html.escape(v.outcome)}'><b>{html.escape(str(v.model))}</b>: "
        f"{html.escape(best_text(v.best, verdict) if v.best else answer_sentence(v))}"
        + "".join(f"<br>{html.escape(more)}" for more in _beside(v, verdict))
        + "</li>"
        for v in models[:MAX_ANSWERS]
    )
    more = len(models) - MAX_ANSWERS
    rest = f"<p class='note'>... and {more} more models: the verdict table below has every one.</p>"
    return f"<ol id='answers'>{items}</ol>" + (rest if more > 0 else "")


def _beside(v: ModelVerdict, verdict: Verdict) -> list[str]:
    """What the printed verdict says under an answer: its cause, where it stands against the card's
    limits, the answer with the lever, what the lever moved and what still slows that step."""
    notes = [c.text for c in v.causes if c.affects == "profile"]  # what the profile pass could not tell
    if v.best:  # the best found, its path, then the recipe to paste and the command that measures it
        said = [*path_lines(v.path), f"your settings: {answer_sentence(v)}", *v.best.recipe, v.best.reproduce]
        return [line.strip() for line in said if line] + [x for x in (v.cause, v.limits) if x] + notes
    follow = [f"follow-up {v.follow_up.why}", *follow_up_lines(v.follow_up)] if v.follow_up else []
    return [line for line in (v.cause, v.limits, *notes, *follow) if line]


def sections(verdict: Verdict) -> list[tuple[str, str, str]]:
    """(title, body, note) of the verdict table and the suite summary."""
    serving = f"{duration(verdict.serve_s)} of serving (infer, generate) or " if verdict.serve_s else ""
    requests = f"{verdict.requests:,} requests (generate) or " if verdict.requests else ""
    run = f"{serving}{requests}{verdict.steps:,} steps, {verdict.cache} compile"
    shared = f" Every model: {verdict.shared}." if verdict.shared else ""
    table = verdict_table(verdict)
    cols = [(c, c, True) for c in VERDICT_COLUMNS] + [("risks", "risks", True), ("failed", "failed", False)]
    out = [
        (
            f"Verdict for {run}",
            grid("verdict", table, cols, page_size=15),
            "Per model: the setting that saves the most time over that run net of its compile cost, among "
            "the settings that passed (finished ok, parity ok); eager when none pays back, 'no gain' when "
            "the best speedup's CI includes 1; no trustworthy answer when the eager control is biased, a "
            "job was not alone, or the CI is too wide (verdict.max_ci_width). Risks are the named "
            "setting's. Recompute for another run: python -m orchestrator verdict DIR verdict.steps=N."
            + shared,
        )
    ]
    if verdict.serving:  # generation over several batches: where compile stops paying
        lines = html.escape("\n".join(verdict.serving))
        note = "Each batch's answer, from the verdict above; nothing is extrapolated between batches."
        out.append(("Serving, as the batch grows", f"<pre class='serving'>{lines}</pre>", note))
    suite = verdict.suite
    if suite:
        flags = pd.DataFrame(
            [dataclasses.asdict(f) for f in suite.flags], columns=["model", "setting", "flag"]
        )
        body = html_table(suite_table(suite), list(suite_table(suite).columns), "suite")
        body += html_table(flags, list(flags.columns), "suite-flags") if len(flags) else ""
        note = (
            f"Over {suite.models} models: the geometric mean of each setting's speedups over the models "
            "where it passed (95% CI from each model's own CI), the pass rate, and flags as on PyTorch's "
            "dashboard: speedup < 0.95, compile > 120 s, memory ratio > 1.1, graph breaks."
        )
        out.append(("Suite summary", f"<div class='aggregates'>{body}</div>", note))
    return out
