"""Beyond the anchors: compile scope, inductor options, AOTInductor, the profile pass, energy.
Real jobs on CPU with real inductor (tiny GPT, seed block), in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import FAST, by_label

from orchestrator.__main__ import main
from orchestrator.config.plan import build_plan
from orchestrator.core.result import Energy
from orchestrator.job.phases.energy import EnergyMeter
from orchestrator.job.worker import run_job

AOTI_FAST = "+compile.options.aot_inductor.compile_wrapper_opt_level=O0"  # C++ wrapper built faster


def measure(tmp_path: Path, cache: Path | None, *overrides: str) -> dict:
    shared = ["compile.cache=shared", f"compile.cache_dir={cache}"] if cache else []
    plan = build_plan([*FAST, *shared, *overrides], cwd=tmp_path)
    assert len(plan.jobs) == 1
    return run_job(plan.jobs[0])


def refused(tmp_path: Path, capsys, *overrides: str) -> str:
    code = main([*overrides, f"sweep.dir={tmp_path / 's'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err, err
    assert not (tmp_path / "s").exists(), "nothing may be created before the config is valid"
    return err


def sweep(tmp_path: Path, *overrides: str) -> tuple[dict[str, dict], str]:
    """A real sweep in this process (launcher=debug): its results by label, and its dashboard."""
    sweep_dir = tmp_path / "sweep"
    assert main([*FAST, "launcher=debug", f"sweep.dir={sweep_dir}", *overrides]) == 0
    return by_label(sweep_dir), (sweep_dir / "dashboard.html").read_text()


def test_blocks_scope_compiles_one_block_graph_reused_by_every_block(tmp_path, compile_cache):
    cache = ["compile.cache=shared", f"compile.cache_dir={compile_cache}"]
    jobs, page = sweep(tmp_path, *cache, "bench.task=infer", "compile.scope=model,blocks,regions")
    whole, blocks, regions = (jobs[f"compile.scope={s}"] for s in ("model", "blocks", "regions"))
    for r in (whole, blocks, regions):
        assert r["status"] == "ok" and r["parity_ok"], r["error"]
    # The block graph holds a block's ops only (embedding, head and loss stay eager), and the
    # second block reuses the first one's compiled frame: one forward frame either way.
    assert 0 < blocks["graph_ops"] < whole["graph_ops"] / 2, (blocks["graph_ops"], whole["graph_ops"])
    assert blocks["compile_frames"] == whole["compile_frames"] == 1
    assert regions["graphs"] >= 1 and regions["graph_ops"] > 0
    assert 'id="chart-scope"' in page, "the compile-seconds-against-speedup chart by scope"


def test_blocks_scope_without_blocks_is_refused_before_anything_runs(tmp_path, capsys):
    err = refused(tmp_path, capsys, "workload=block", "compile.scope=blocks")
    assert "compile.scope=blocks needs repeated blocks" in err and "workload.blocks=PATH" in err, err


def test_regions_scope_where_torch_lacks_it_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delattr(torch.compiler, "nested_compile_region")
    err = refused(tmp_path, capsys, "compile.scope=regions")
    assert "compile.scope=regions needs torch.compiler.nested_compile_region" in err


@pytest.mark.parametrize(
    "override,message",
    [
        (
            "+compile.options.coordinate_descent_tunin=true",
            "compile.options.coordinate_descent_tunin is not a torch._inductor.config key in torch "
            f"{torch.__version__}; did you mean coordinate_descent_tuning",
        ),
        ("+compile.options.triton.cudagraph_tree=false", "did you mean triton.cudagraph_trees"),
        (
            "+compile.options.epilogue_fusion=3",
            "compile.options.epilogue_fusion=3 is not valid; it must be true",
        ),
        ("compile.options={epilogue_fusion:false}", "add inductor options with a plus"),
    ],
)
def test_bad_inductor_option_is_one_line_and_exit_2(tmp_path, capsys, override, message):
    assert message in refused(tmp_path, capsys, override)


def test_inductor_options_are_a_sweep_axis(tmp_path):
    plan = build_plan(["+compile.options.coordinate_descent_tuning=true,false"], cwd=tmp_path)
    assert [j.cfg.compile.options for j in plan.jobs] == [
        {"coordinate_descent_tuning": True},
        {"coordinate_descent_tuning": False},
    ]
    same = build_plan(
        ["++compile.options={coordinate_descent_tuning:true},{epilogue_fusion:false}"], cwd=tmp_path
    )
    assert same.jobs[0].job_id == plan.jobs[0].job_id, "one job id whichever grammar said it"
    nested = build_plan(["+compile.options.triton.cudagraph_trees=false"], cwd=tmp_path).jobs[0]
    assert nested.cfg.compile.options == {"triton": {"cudagraph_trees": False}}


def test_an_inductor_option_reaches_inductor(tmp_path, compile_cache):
    """fx_graph_cache=false: inductor never consults its FX-graph cache (no hit, no miss)."""
    infer = ["workload=block", "bench.task=infer"]
    plain = measure(tmp_path, compile_cache, *infer)
    off = measure(tmp_path, compile_cache, *infer, "+compile.options.fx_graph_cache=false")
    assert plain["status"] == off["status"] == "ok"
    assert plain["fx_cache_hits"] + plain["fx_cache_misses"] >= 1
    assert off["fx_cache_hits"] == off["fx_cache_misses"] == 0
    assert off["config"]["compile"]["options"] == {"fx_graph_cache": False}


def test_aoti_package_is_timed_loaded_and_measured_against_eager(tmp_path, compile_cache):
    r = measure(tmp_path, compile_cache, "workload=block", "bench.task=infer", "compile.path=aoti", AOTI_FAST)
    assert r["status"] == "ok", r["error"]
    assert r["parity_ok"] and r["graphs"] == 1
    assert r["aoti_export_s"] > 0 and r["aoti_package_s"] > 0 and r["aoti_load_s"] > 0
    assert r["aoti_cold_start_s"] >= r["aoti_load_s"]
    assert r["compile_s"] == r["aoti_export_s"] + r["aoti_package_s"] + r["aoti_load_s"]
    assert Path(r["aoti_package"]).stat().st_size > 0 and r["aoti_package_mb"] > 0
    assert len(r["timings"]["compiled_ms"]) == len(r["timings"]["eager_ms"]) == 3 and r["speedup"] > 0
    assert r["energy_note"].startswith("energy: not measured on CPU")


def test_aoti_links_the_shared_libstdcxx_on_linux_unless_the_user_links_their_own():
    from orchestrator.job.phases.aoti import link_configs

    assert link_configs(None, "linux", None) == {"aot_inductor.custom_op_libs": [":libstdc++.so.6"]}
    assert link_configs(["mylib"], "linux", None) == {}  # the user's option stands as given
    assert link_configs([], "linux", None) == {}  # and an empty list turns the link off
    assert link_configs(None, "linux", "windows") == {}  # a MinGW cross-compile has no such file
    assert link_configs(None, "darwin", None) == {}  # nor has macOS


BRANCHY = """
import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x):
        y = self.lin(x)
        return y if y.sum() > 0 else -y  # data-dependent control flow: export cannot trace it
"""


def test_aoti_package_that_cannot_load_is_a_compile_error_with_its_reason(tmp_path):
    """The cold start runs in a fresh process (a server's first load); a package it cannot load
    (here a file that is not one) ends the job as a compile error naming the package and why."""
    from types import SimpleNamespace

    from orchestrator.core.failures import CompileError
    from orchestrator.job.phases.aoti import PACKAGE_FILE, cold_start

    package = tmp_path / PACKAGE_FILE
    package.write_bytes(b"not a zip archive")
    cfg = SimpleNamespace(bench=SimpleNamespace(timeout_s=120.0))
    ctx = SimpleNamespace(inputs=(torch.ones(2),), device=torch.device("cpu"), cfg=cfg)
    why = r"aoti load of model\.pt2: aoti-load process exited with code 1: \w"
    with pytest.raises(CompileError, match=why):
        cold_start(package, ctx, tmp_path)  # type: ignore[arg-type]
    assert not list(tmp_path.glob("aoti-load-*")) and not (tmp_path / "aoti_inputs.pt").exists()


def test_aoti_export_failure_is_a_compile_error_saying_export(tmp_path, compile_cache):
    (tmp_path / "branchy.py").write_text(BRANCHY)
    r = measure(
        tmp_path,
        compile_cache,
        "workload=module",
        f"workload.path={tmp_path}",
        "workload.target=branchy:Branchy",
        "workload.inputs=[[8,32]]",
        "bench.task=infer",
        "compile.path=aoti",
        "bench.explain=false",
    )
    assert r["status"] == "compile_error" and r["error"].startswith("CompileError: export: "), r["error"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["compile.path=aoti"], "compile.path=aoti works only with bench.task=infer"),
        (
            ["compile.path=aoti", "bench.task=infer", "compile.mode=reduce-overhead"],
            "needs compile.mode=default",
        ),
        (["compile.path=jet"], "compile.path='jet' is not valid; choose one of: jit, aoti"),
    ],
)
def test_bad_aoti_config_is_one_line(tmp_path, capsys, overrides, message):
    assert message in refused(tmp_path, capsys, *overrides)


def test_profile_pass_keeps_traces_and_explains_with_bytes(tmp_path):
    # The default private cache: inductor counts the bytes of what it compiles, not of a cache entry.
    jobs, page = sweep(tmp_path, "workload=block", "bench.task=infer", "bench.profile=true")
    (r,) = jobs.values()
    assert r["status"] == "ok", r["error"]
    assert r["profile_unit"].startswith("cpu ops") and r["eager_busy_fraction"] is None
    for side in ("eager", "compiled"):
        trace = json.loads(Path(r[f"{side}_profile_trace"]).read_text())
        assert trace["traceEvents"] and Path(r[f"{side}_profile_trace"]).parent.name == r["job_id"]
        assert r[f"{side}_top_kernels"] and r[f"{side}_top_kernels"][0]["ms_per_step"] > 0
        assert r[f"{side}_flops_per_s"] > 0 and r[f"{side}_bytes_per_s"] > 0
    assert "aten::" in " ".join(k["name"] for k in r["eager_top_kernels"])
    assert r["eager_kernels_per_step"] > r["compiled_kernels_per_step"], "fused: fewer aten ops"
    # LayerNorm and GELU fused into one kernel: fewer bytes moved, a higher arithmetic intensity.
    assert r["compiled_bytes_per_step"] < r["eager_bytes_per_step"]
    assert r["compiled_intensity"] > r["eager_intensity"]
    assert 'id="chart-roofline"' in page and "id='kernels'" in page and "aten::" in page


def test_energy_accounting_with_a_fake_counter():
    """NVML cannot run here (no GPU, no nvidia-ml-py): the accounting is tested on a fake counter;
    the real counter is read on the GPU host (see the GPU commands in README)."""
    joules = iter([100.0, 106.0, 106.0, 110.0, 110.0, 114.0, 114.0, 120.0])
    meter = EnergyMeter(lambda: next(joules))
    for side in ("eager", "compiled", "compiled", "eager"):  # alternating, as measure_speed times
        with meter.side(side, steps=2):
            pass
    out = meter.summary(compile_energy_j=30.0)
    assert out.eager_j_per_step == (6 + 6) / 4 and out.compiled_j_per_step == (4 + 4) / 4
    assert out.energy_ratio == 2 / 3
    assert out.energy_break_even_steps == 30.0 / (3 - 2)
    assert EnergyMeter(lambda: 0.0).summary(None).energy_break_even_steps is None
    absent = EnergyMeter(None, "energy: not measured (nvidia-ml-py is not installed)").summary(5.0)
    assert absent == Energy(energy_note="energy: not measured (nvidia-ml-py is not installed)")
