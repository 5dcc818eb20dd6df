"""Hydra's standard flags on the sweep command, through the real CLI: --cfg (as Hydra prints it),
--help (groups read from conf/), --info, shell completion, and one-line errors for bad flags."""

from __future__ import annotations

import pytest
import yaml
from conftest import run_cli
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from orchestrator.config.compose import CONF_DIR, compose_config

OVERRIDES = ["+sweep=modes", "workload.size=small", "bench.dtype=bf16", "bench.repeats=7"]


def hydra_prints(capsys, overrides: list[str], cfg_type: str, package: str | None = None) -> str:
    """What Hydra itself prints for `--cfg` (its own show_cfg, over the same conf dir)."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            GlobalHydra.instance().hydra.show_cfg("config", overrides, cfg_type, package, resolve=False)
    finally:
        GlobalHydra.instance().clear()
    return capsys.readouterr().out


def test_cfg_job_prints_the_composed_config_as_hydra_does(tmp_path, capsys):
    proc = run_cli([*OVERRIDES, "--cfg", "job"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == OmegaConf.to_yaml(compose_config(OVERRIDES))
    assert proc.stdout == hydra_prints(capsys, OVERRIDES, "job")
    job = yaml.safe_load(proc.stdout)
    assert job["workload"]["size"] == "small" and job["bench"]["repeats"] == 7 and "hydra" not in job
    # The preset's axes are Hydra's sweeper params, not applied by --cfg (as in Hydra); stderr says so.
    assert "compile.mode" in proc.stderr and "5 job(s)" in proc.stderr

    pkg = run_cli([*OVERRIDES, "-c", "job", "--package", "bench"], cwd=tmp_path, timeout=120)
    assert pkg.stdout == hydra_prints(capsys, OVERRIDES, "job", "bench")
    assert pkg.stdout.startswith("# @package bench\n") and "dtype: bf16" in pkg.stdout
    leaf_args = [*OVERRIDES, "--cfg", "job", "-p", "workload.size", "--resolve"]
    leaf = run_cli(leaf_args, cwd=tmp_path, timeout=120)
    assert leaf.stdout == "small\n"


def test_cfg_hydra_and_all(tmp_path):
    hydra = yaml.safe_load(run_cli(["+sweep=modes", "--cfg", "hydra"], cwd=tmp_path, timeout=120).stdout)
    assert list(hydra) == ["hydra"] and "help" not in hydra["hydra"]
    assert hydra["hydra"]["sweeper"]["params"]["compile.mode"].startswith("eager,default")
    everything = yaml.safe_load(run_cli(["+sweep=modes", "--cfg", "all"], cwd=tmp_path, timeout=120).stdout)
    assert {"hydra", "workload", "compile", "sweep"} <= set(everything)
    assert everything["sweep"]["name"] == "modes"


def conf_groups() -> dict[str, list[str]]:
    """conf/ read as files: each folder is a group, each .yaml in it an option."""
    return {
        d.name: sorted(p.stem for p in d.glob("*.yaml"))
        for d in sorted(CONF_DIR.iterdir())
        if d.is_dir() and any(d.glob("*.yaml"))
    }


def help_groups(text: str) -> dict[str, list[str]]:
    section = text.split("Config groups")[1].split("Config keys")[0].splitlines()[1:]
    groups: dict[str, list[str]] = {}
    for line in section:
        if line.startswith("  ") and not line.startswith("    ") and line.strip().endswith(":"):
            current = groups.setdefault(line.strip()[:-1], [])
        elif line.startswith("    ") and line[4] != " ":  # an option (deeper lines: its description)
            current.append(line.split()[0])
    return groups


def test_help_lists_commands_flags_and_the_groups_of_conf(tmp_path):
    proc = run_cli(["--help"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert help_groups(text) == conf_groups()
    for command in ("status", "gather", "cancel", "report", "compare"):
        assert f"\n  {command} " in text
    flags = ("--cfg, -c", "--package, -p", "--resolve", "--info, -i", "--shell-completion, -sc", "--plain")
    for flag in flags:
        assert flag in text
    assert "  compile: mode, dynamic, fullgraph, backend, cache" in text, "keys of the composed config"
    # The default option of each group is marked, as composed from conf/config.yaml.
    assert any(line.split()[:2] == ["gpt", "*"] for line in text.splitlines())
    assert max(map(len, text.splitlines())) <= 160
    sub = run_cli(["compare", "--help"], cwd=tmp_path, timeout=60)
    assert sub.returncode == 0 and sub.stdout.startswith("usage: orchestrator compare BASE CAND")


def test_info_is_hydras(tmp_path):
    proc = run_cli(["+sweep=modes", "--info", "defaults"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Defaults List" in proc.stdout and "sweep/modes" in proc.stdout
    tree = run_cli(["--info", "defaults-tree"], cwd=tmp_path, timeout=120)
    assert "Defaults Tree" in tree.stdout and "workload: gpt" in tree.stdout


def complete(tmp_path, line: str) -> list[str]:
    proc = run_cli(["-sc", "query=bash"], cwd=tmp_path, env={"COMP_LINE": line}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_shell_completion_answers_from_conf(tmp_path):
    assert {"compile=", "compile.", "compare"} <= set(complete(tmp_path, "orchestrator comp"))
    assert complete(tmp_path, "orchestrator compile.mo") == ["compile.mode="]
    assert set(complete(tmp_path, "orchestrator +sweep=")) == {f"+sweep={o}" for o in conf_groups()["sweep"]}
    assert "--cfg" in complete(tmp_path, "orchestrator --c")
    script = run_cli(["-sc", "install=bash"], cwd=tmp_path, timeout=120).stdout
    assert script.rstrip().endswith("-F hydra_bash_completion orchestrator")


@pytest.mark.parametrize(
    "args,message",
    [
        (["--cfg", "jobs"], "argument --cfg/-c: invalid choice: 'jobs' (choose from 'job', 'hydra', 'all')"),
        (
            ["-c", "job", "--package", "nope"],
            "--package nope is not in the job config; choose one of: workload",
        ),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["--config-dir", "x"], "--config-dir: set ORCHESTRATOR_CONF=DIR"),
        (["-sc", "install=tcsh"], "SHELL is one of: bash, zsh, fish (got install=tcsh)"),
        (["--resolve"], "--resolve goes with --cfg or --help"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(args, message, capsys):
    from orchestrator.__main__ import main

    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and message in err, err
