"""Config composition and its errors: each bad input stops before anything runs, one line, exit 2."""

from __future__ import annotations

import pytest
from conftest import TESTS, run_cli

from orchestrator.__main__ import main
from orchestrator.config.compose import compose_config
from orchestrator.config.plan import build_plan
from orchestrator.config.schema import COMPILE_MODES

# (overrides, fragment of the one-line error). At least ten kinds of bad input.
BAD_INPUTS = [
    (["compile.mode=fast"], "compile.mode='fast' is not valid; choose one of: " + ", ".join(COMPILE_MODES)),
    (["compile.foo=1"], "unknown key compile.foo; valid keys of compile: mode, dynamic"),
    (["foo=1"], "unknown key foo; valid keys of the config: workload, compile"),
    (["workload=resnet"], "workload=resnet is not an option of workload; choose one of: block, gpt, hf"),
    (["+sweep=nope"], "sweep=nope is not an option of sweep; choose one of: dynamic, generate, hf, modes"),
    (["bench.repeats=abc"], "bench.repeats: Value 'abc' of type 'str' could not be converted to Integer"),
    (["bench.repeats=0"], "bench.repeats=0 is not valid; it must be >= 2"),
    (["workload.batch_size=-4"], "workload.batch_size=-4 is not valid; it must be >= 1"),
    (["workload.size=huge"], "workload.size='huge' is not a gpt preset; choose one of: tiny, small, gpt2"),
    (["bench.dtype=fp8"], "bench.dtype='fp8' is not valid; choose one of: fp32, bf16, fp16"),
    (["parallel=fsdp", "parallel.ranks_per_node=1"], "parallel.strategy=fsdp needs at least 2 ranks"),
    (["parallel=ddp", "bench.device=cuda"], "bench.device=cuda but this machine has no GPU"),
    (["bench.timeout_s=0"], "bench.timeout_s=0.0 is not valid; it must be > 0"),
    (["compile.mode=default,fast"], "compile.mode='fast' is not valid"),
    (
        ["workload=module", "workload.target=no_such_pkg.models:Net", "workload.inputs=[[2,4]]"],
        "cannot import module 'no_such_pkg.models': ModuleNotFoundError",
    ),
    (["workload=module", "workload.inputs=[[2,4]]"], "workload.target is required for workload=module"),
    (
        ["compile.mode=max-autotune", "compile.backend=aot_eager"],
        "compile.mode=max-autotune needs compile.backend=inductor",
    ),
    (["launcher=debug", "parallel=ddp"], "needs launcher=local or slurm"),
    (["sweep.detach=true"], "sweep.detach=true needs launcher=slurm"),
    (["compile.dynamic=maybe"], "compile.dynamic: Value 'maybe' is not a valid bool"),
    (["parallel=ddp", "parallel.ranks_per_node=64"], "starts 64 CPU ranks; this machine has"),
    (
        [
            "workload=module",
            "workload.target=user_models:MLP",
            f"workload.path={TESTS}",
            "workload.inputs=[[0,4]]",
        ],
        "workload.inputs[0]: shape [0, 4] is not valid",
    ),
    (
        ["compile.backend=nosuch"],
        "compile.backend='nosuch' is not a registered dynamo backend; choose one of:",
    ),
    (
        ["workload=module", "workload.target=m:Net", "workload.path=/no/such/dir", "workload.inputs=[[2,4]]"],
        "workload.path=/no/such/dir does not exist",
    ),
    (["compile.cache=warm"], "compile.cache='warm' is not valid; choose one of: private, shared"),
    (
        ["launcher=debug", "launcher.overlap=true"],
        "launcher.overlap=true needs launcher=local (got launcher=debug)",
    ),
    (["parallel=ddp", "launcher.overlap=true"], "launcher.overlap=true runs single-process jobs only"),
    (["launcher.overlap=true", "launcher.max_parallel=4"], "leave launcher.max_parallel unset"),
]


@pytest.mark.parametrize("overrides,message", BAD_INPUTS, ids=[" ".join(o) for o, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(overrides, message, capsys, tmp_path):
    code = main([*overrides, f"sweep.dir={tmp_path / 's'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err, err
    assert message in err, err
    assert not (tmp_path / "s").exists(), "nothing may be created before the config is valid"


def test_bad_input_through_the_real_cli(tmp_path):
    proc = run_cli(["compile.mode=fast"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: compile.mode='fast' is not valid; choose one of: " + ", ".join(COMPILE_MODES)
    ]


def test_user_module_import_error_names_module_and_cause(tmp_path, capsys):
    (tmp_path / "broken_models.py").write_text("import numpy\nraise ImportError('needs a GPU library')\n")
    code = main(
        [
            "workload=module",
            f"workload.path={tmp_path}",
            "workload.target=broken_models:Net",
            "workload.inputs=[[2,4]]",
            f"sweep.dir={tmp_path / 's'}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot import module 'broken_models': ImportError: needs a GPU library" in err


def test_defaults_compose_to_the_schema():
    cfg = compose_config([])
    assert cfg.workload.name == "gpt" and cfg.workload.size == "tiny"
    assert cfg.compile.mode == "default" and cfg.compile.dynamic is None
    assert cfg.launcher.name == "local" and cfg.logger.mode == "offline"
    assert cfg.bench.task == "train"


def test_group_options_and_overrides_apply():
    cfg = compose_config(
        [
            "workload=block",
            "workload.size=small",
            "compile=max-autotune",
            "bench=infer",
            "parallel=ddp",
            "launcher=slurm",
            "logger=none",
            "compile.dynamic=true",
        ]
    )
    assert (cfg.workload.name, cfg.workload.size) == ("block", "small")
    assert cfg.compile.mode == "max-autotune" and cfg.compile.dynamic is True
    assert cfg.bench.task == "infer" and cfg.parallel.strategy == "ddp" and cfg.parallel.ranks_per_node == 2
    assert cfg.launcher.name == "slurm" and cfg.logger.mode == "disabled"


def test_user_workload_config(tmp_path):
    plan = build_plan(
        [
            "workload=module",
            f"workload.path={TESTS}",
            "workload.target=user_models:MLP",
            "workload.init_args={dim: 16}",
            "workload.inputs=[[4,16]]",
        ],
        cwd=tmp_path,
    )
    cfg = plan.jobs[0].cfg
    assert cfg.workload.target == "user_models:MLP" and cfg.workload.init_args == {"dim": 16}
    assert cfg.workload.inputs == [[4, 16]]


def test_slurm_without_sbatch_is_refused_before_anything_is_made(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    proc = run_cli(["launcher=slurm", "sweep.dir=s"], cwd=tmp_path, timeout=120, env={"PATH": str(bare)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        proc.stderr.strip()
        == "error: launcher=slurm but sbatch is not on PATH (run on a Slurm login node, or launcher=local)"
    )
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("kind", ["file", "under a file"])
def test_unusable_sweep_dir_is_one_line(tmp_path, capsys, kind):
    blocker = tmp_path / "taken"
    blocker.write_text("not a directory")
    target = blocker if kind == "file" else blocker / "sub"
    code = main(["compile.mode=eager", f"sweep.dir={target}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and err.startswith(f"error: sweep.dir={target}"), err
    assert blocker.read_text() == "not a directory"
