"""Planning at scale: one Hydra composition per combination of group choices, same ids as one per point."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from orchestrator.config import points
from orchestrator.config.compose import compose_config
from orchestrator.config.plan import build_plan, expand, job_id_of
from orchestrator.config.spec import checked_config, to_job_config
from orchestrator.core.failures import ConfigError

# Group choices (parallel, workload, bench), plain keys with type conversion (lr int -> float, dynamic
# null), a dict value (taken per point through Hydra) and a preset with its own axis.
MIXED = [
    "+sweep=dynamic",
    "parallel=none,fsdp",
    "workload=block,gpt",
    "bench=default,infer",
    "bench.lr=1,0.001",
    "workload.init_args={dim: 64},null",
]


def one_compose_per_point(overrides: list[str]) -> list[tuple[str, dict]]:
    """Ids and configs the way the planner made them before: a full Hydra compose for every point."""
    fixed, per_job = expand(overrides)
    out = []
    for job_overrides in per_job:
        container = OmegaConf.to_container(compose_config(fixed + job_overrides), resolve=True)
        out.append((job_id_of(container), container))  # type: ignore[arg-type]
    return out


def test_ids_and_configs_match_one_compose_per_point(tmp_path):
    old = one_compose_per_point(MIXED)
    assert len(old) == 3 * 2 * 2 * 2 * 2 * 2
    plan = build_plan(MIXED, cwd=tmp_path)
    assert [j.job_id for j in plan.jobs] == [job_id for job_id, _ in old]
    assert [j.config for j in plan.jobs] == [container for _, container in old]
    assert plan.jobs[0].config["bench"]["lr"] == 1.0 and isinstance(plan.jobs[0].config["bench"]["lr"], float)
    # The fast schema check builds what the full structured merge builds.
    assert all(checked_config(j.config) == to_job_config(j.config) for j in plan.jobs)


def test_composes_once_per_group_combination(tmp_path, monkeypatch):
    calls: list[list[str]] = []
    real = points.compose_in_session
    monkeypatch.setattr(points, "compose_in_session", lambda o: calls.append(o) or real(o))
    plan = build_plan(
        ["parallel=none,ddp", "workload=block,gpt", "compile.mode=eager,default", "bench.seed=range(25)"],
        cwd=tmp_path,
    )
    assert len(plan.jobs) == 2 * 2 * 2 * 25
    assert len(calls) == 4, calls


def test_glob_over_a_config_group(tmp_path):
    plan = build_plan(["compile=glob(max-*)"], cwd=tmp_path)
    assert sorted(j.cfg.compile.mode for j in plan.jobs) == ["max-autotune", "max-autotune-no-cudagraphs"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["bench.repeats=3,abc"],
            "bench.repeats: Value 'abc' of type 'str' could not be converted to Integer",
        ),
        (
            ["parallel=none,ddp", "compile.mode=eager,fast"],
            "compile.mode='fast' is not valid; choose one of:",
        ),
        (["bench.seed=range(3)", "bench.task=train,walk"], "bench.task='walk' is not valid; choose one of:"),
        (["compile.nope=1,2"], "unknown key compile.nope; valid keys of compile: mode, dynamic"),
    ],
)
def test_a_bad_point_anywhere_stops_the_plan(overrides, message, tmp_path):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        build_plan(overrides, cwd=tmp_path)
