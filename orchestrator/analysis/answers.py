"""The sweep's answers, typed both ways: the verdict (`verdict.json`), its suite summary, and the
upgrade A/B (`upgrade.json`). `to_dict` writes the file; `from_dict` reads one back, an older one
too (keys it lacks take their defaults, keys no field declares are dropped). docs/results.md
documents exactly these fields (tests/test_result_fields.py holds the two together). One concern:
every answer type in one place, each field with its comment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

NUMBER = float | None


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The keys of `data` that `cls` declares (an older file may hold others, or lack some)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class Cause:
    """One measured reason why a setting is slower or faster than eager, with its number."""

    kind: str = ""  # graph_breaks, recompiles, step_recompiles, cudagraph_skips, launch_bound, fusion, ...
    value: NUMBER = None  # the measured value (the share left eager, a count, a busy fraction, a ratio)
    ms_per_step: NUMBER = None  # the milliseconds of a step it accounts for, where they are measured
    text: str = ""  # the sentence, with its number
    lever: str | None = None  # the setting that addresses it, where one is known
    # the step's time, the run's `compile` seconds, `gain` (why faster only), or `profile` (a note)
    affects: str = "step"


@dataclass
class FollowUp:
    """The answer with a lever: the follow-up job that applied it to the named setting."""

    lever: str = ""  # the override (`compile.dynamic=true`)
    cause: str = ""  # the kind of cause it addresses
    job_id: str = ""  # the follow-up job
    status: str = ""  # how it ended
    speedup: NUMBER = None  # its speedup
    ci: list[NUMBER] = field(default_factory=lambda: [None, None])  # its 95% CI
    net_saved_s: NUMBER = None  # over the same run, net of its own compile
    payback_steps: NUMBER = None  # its compile over its seconds saved per step
    why: str = ""  # the sentence printed
    moved: str = ""  # what the lever moved, each figure in both jobs (its cause's kernels, both steps)
    still: str = ""  # the follow-up's own largest cause still slowing its step, with its number
    next_lever: str | None = None  # that cause's setting, to stack on the lever, where one is known


@dataclass
class PathStep:
    """One stacked follow-up step (analysis/stack.py): the stack it ran and what it did."""

    levers: list[str] = field(default_factory=list)  # every lever of its job, in the order stacked
    lever: str = ""  # the lever this step added
    job_id: str = ""  # its job
    outcome: str = ""  # gain (joins the stack), within_ci (the walk stops there), loses or failed (dropped)
    status: str = ""  # how its job ended
    speedup: NUMBER = None  # its speedup
    ci: list[NUMBER] = field(default_factory=lambda: [None, None])  # its 95% CI
    moved: str = ""  # what this step moved against the best before it, each figure in both jobs


@dataclass
class BestFound:
    """The best setting found: the named setting with the levers that gained, and how to use it."""

    levers: list[str] = field(default_factory=list)  # the stack, in order
    setting: str = ""  # the stack in words: the named setting, then `+ lever` each
    job_id: str = ""  # its job
    speedup: NUMBER = None  # its speedup
    ci: list[NUMBER] = field(default_factory=lambda: [None, None])  # its 95% CI
    net_saved_s: NUMBER = None  # over the run, net of its compile
    payback_steps: NUMBER = None  # its compile over its seconds saved per step
    numerics: list[str] = field(default_factory=list)  # the numerics levers it holds (they change results)
    parity: str = ""  # its parity under them, as judged
    still: str = ""  # its own largest cause still slowing its step, with its number
    next_lever: str | None = None  # that cause's setting, where one is known (beyond the walk's budget)
    recipe: list[str] = field(default_factory=list)  # the lines to paste (results/recipe.py)
    reproduce: str = ""  # the command that measures its job again


@dataclass
class ModelVerdict:
    """One model's answer, and the figures of the setting it is about."""

    model: str = ""  # the values that tell it apart from the sweep's other models
    jobs: int = 0  # its jobs in the sweep
    failed: list[str] = field(default_factory=list)  # settings that did not pass, with their status
    choice: str = "eager"  # the setting to use, `eager`, `no trustworthy answer`, or `no answer`
    # compile, eager_cost, no_gain, slower, none_passed, untrusted, eager_not_finite (no answer)
    outcome: str = "none_passed"
    why: str = ""  # the sentence printed
    setting: str | None = None  # the setting the figures are for: the chosen one, else the best passed
    job_id: str | None = None  # that setting's job
    numerics: str | None = None  # the numerics that job ran at (matmul precision, cuDNN TF32, SDP math)
    speedup: NUMBER = None  # its speedup
    ci: list[NUMBER] = field(default_factory=lambda: [None, None])  # the speedup's 95% CI
    measurable: bool | None = None  # the CI lies above 1
    steps: NUMBER = None  # steps (or calls) of the declared run
    unit: str = "steps"  # what `steps` and `payback_steps` count: steps, or generate's requests
    run: str | None = None  # the run in words
    compile_s: NUMBER = None  # compile seconds the run pays
    compile_kind: str | None = None  # cold, warm, or what stood in for it
    saved_per_step_ms: NUMBER = None  # eager_ms x (1 - 1/speedup)
    saved_per_step_ci_ms: list[NUMBER] = field(default_factory=lambda: [None, None])  # at the CI's ends
    net_saved_s: NUMBER = None  # over the run, net of the compile
    net_saved_ci_s: list[NUMBER] = field(default_factory=lambda: [None, None])  # at the CI's ends
    payback_steps: NUMBER = None  # compile seconds over seconds saved per step
    risks: list[str] = field(default_factory=list)  # what could go wrong with the setting
    distrust: list[str] = field(default_factory=list)  # why the answer is not trusted ([] when it is)
    causes: list[Cause] = field(default_factory=list)  # measured reasons, the largest first
    cause: str | None = None  # the largest cause's sentence, printed with the answer
    follow_up: FollowUp | None = None  # the answer with the lever for that cause, where one ran
    path: list[PathStep] = field(default_factory=list)  # the stacked follow-ups' steps, in order
    best: BestFound | None = None  # the best setting found, where a step gained
    limits: str | None = None  # generate: each side's decode MBU and prefill MFU in words (serving.py)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelVerdict:
        causes = [Cause(**_known(Cause, c)) for c in data.get("causes", [])]
        follow = data.get("follow_up")
        follow_up = FollowUp(**_known(FollowUp, follow)) if follow else None
        path = [PathStep(**_known(PathStep, s)) for s in data.get("path", [])]
        best = BestFound(**_known(BestFound, data["best"])) if data.get("best") else None
        return cls(
            **{**_known(cls, data), "causes": causes, "follow_up": follow_up, "path": path, "best": best}
        )


@dataclass
class SuiteSetting:
    """One compiled setting over the suite's models."""

    setting: str = ""  # the setting in words
    models: int = 0  # models that ran it
    passed: int = 0  # models where it passed
    pass_rate: float = 0.0  # passed over models
    geomean_speedup: NUMBER = None  # geometric mean over the models where it passed
    ci: list[NUMBER] = field(default_factory=lambda: [None, None])  # from each model's own CI, in log space
    compile_s_median: NUMBER = None  # the median compile latency
    memory_ratio_geomean: NUMBER = None  # compiled over eager peak memory, where measured


@dataclass
class SuiteFlag:
    """A flag on one job, as PyTorch's performance dashboard raises them."""

    model: str = ""  # the model
    setting: str = ""  # its setting
    flag: str = ""  # speedup < 0.95, compile > 120 s, memory ratio > 1.1, graph breaks


@dataclass
class Suite:
    """The suite summary of a sweep over several models."""

    models: int = 0  # models in the sweep
    settings: list[SuiteSetting] = field(default_factory=list)  # per compiled setting
    flags: list[SuiteFlag] = field(default_factory=list)  # on single jobs

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Suite:
        return cls(
            models=data.get("models", 0),
            settings=[SuiteSetting(**_known(SuiteSetting, s)) for s in data.get("settings", [])],
            flags=[SuiteFlag(**_known(SuiteFlag, f)) for f in data.get("flags", [])],
        )


@dataclass
class Verdict:
    """The verdict of a sweep: per model, for the run the user declares (`verdict.json`)."""

    steps: int = 10_000  # the run's steps (verdict.steps)
    serve_s: NUMBER = None  # or seconds of serving, for inference (verdict.serve_s)
    cache: str = "cold"  # the compile the run pays: cold or warm (verdict.cache)
    shared: str = ""  # what every model has in common, said once
    models: list[ModelVerdict] = field(default_factory=list)  # one answer per model
    suite: Suite | None = None  # several models only
    serving: list[str] = field(default_factory=list)  # generation: each batch's answer, per model
    requests: int | None = None  # generate: the run in requests instead (verdict.requests)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        suite = data.get("suite")
        return cls(
            **_known(cls, {k: v for k, v in data.items() if k not in ("models", "suite")}),
            models=[ModelVerdict.from_dict(m) for m in data.get("models", [])],
            suite=Suite.from_dict(suite) if suite else None,
        )


@dataclass
class FigureChange:
    """One figure of a setting, from the baseline environment to the candidate."""

    baseline: NUMBER = None  # its value in the baseline
    candidate: NUMBER = None  # in the candidate
    change: NUMBER = None  # candidate / baseline - 1
    ci: list[NUMBER] | None = None  # the change's 95% CI, where both jobs kept their repetitions
    judged: str | None = None  # improvement, regression, unchanged (by the CI, or one figure each)


@dataclass
class UpgradePair:
    """One setting measured in both environments."""

    model: str = ""  # the model
    setting: str = ""  # the compile setting
    status: list[str | None] = field(default_factory=list)  # baseline, candidate
    parity_ok: list[bool | None] = field(default_factory=list)  # baseline, candidate
    breaks: bool = False  # passed in the baseline, not in the candidate
    error: str | None = None  # the candidate's failure, where it did not pass
    figures: dict[str, FigureChange] = field(default_factory=dict)  # per result column
    counts: dict[str, list[NUMBER]] = field(default_factory=dict)  # breaks, recompiles, skips: both

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UpgradePair:
        figures = {k: FigureChange(**_known(FigureChange, v)) for k, v in data.get("figures", {}).items()}
        return cls(**{**_known(cls, data), "figures": figures})


@dataclass
class UpgradeWord:
    """A model's upgrade in one word."""

    model: str = ""  # the model
    verdict: str = ""  # breaks, slower, faster, no measurable change
    why: str = ""  # the change that decided it


@dataclass
class Comparison:
    """The baseline environment against one candidate."""

    baseline: str = ""  # the first environment of the axis
    candidate: str = ""  # another one
    pairs: list[UpgradePair] = field(default_factory=list)  # each setting measured in both
    models: list[UpgradeWord] = field(default_factory=list)  # one word per model

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        return cls(
            baseline=data.get("baseline", ""),
            candidate=data.get("candidate", ""),
            pairs=[UpgradePair.from_dict(p) for p in data.get("pairs", [])],
            models=[UpgradeWord(**_known(UpgradeWord, m)) for m in data.get("models", [])],
        )


@dataclass
class Upgrade:
    """The upgrade A/B of a sweep over `env.python` (`upgrade.json`)."""

    environments: list[str] = field(default_factory=list)  # the baseline first
    torch: dict[str, str] = field(default_factory=dict)  # environment -> the torch it measured with
    comparisons: list[Comparison] = field(default_factory=list)  # one per candidate environment

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Upgrade:
        return cls(
            environments=list(data.get("environments", [])),
            torch=dict(data.get("torch", {})),
            comparisons=[Comparison.from_dict(c) for c in data.get("comparisons", [])],
        )
