"""The console script: a fresh `pip install .` into a new venv puts an `orchestrator` command on
PATH that runs, reads the configs shipped inside the wheel, and completes in a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import ROOT

SHIPPED = ("pyproject.toml", "README.md", "orchestrator", "workloads", "conf")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A new venv with this package installed from a copy of the source (no network: --no-deps,
    --no-index; its dependencies come from the test interpreter's site-packages through a .pth)."""
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    src.mkdir()
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env_dir], check=True, timeout=120)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.check_output([env_dir / "bin/python", "-c", where], text=True).strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [
            env_dir / "bin/python",
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
        ]
        + [str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    shutil.rmtree(src)  # the installed command must not need the source tree
    return env_dir


def run(venv: Path, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ORCHESTRATOR_CONF")}
    clean["PATH"] = f"{venv / 'bin'}:{clean['PATH']}"
    return subprocess.run(args, cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=120)


def test_pip_install_puts_an_orchestrator_command(venv, tmp_path):
    assert (venv / "bin/orchestrator").is_file()
    where = run(venv, ["python", "-c", "import orchestrator, os; print(orchestrator.__file__)"], tmp_path)
    assert where.stdout.startswith(str(venv)), "the installed copy, not the checkout"
    proc = run(venv, ["orchestrator", "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Config groups" in proc.stdout and "    modes " in proc.stdout, "conf/ shipped in the wheel"
    same = run(venv, ["python", "-m", "orchestrator", "+sweep=smoke", "--cfg", "job"], tmp_path)
    script = run(venv, ["orchestrator", "+sweep=smoke", "--cfg", "job"], tmp_path)
    assert script.returncode == 0 and script.stdout == same.stdout and "name: smoke" in script.stdout
    plan = run(venv, ["orchestrator", "+sweep=smoke", "--dry-run"], tmp_path)
    assert plan.returncode == 0 and "4 job(s)" in plan.stdout, plan.stdout + plan.stderr


def test_bash_completion_of_the_installed_command(venv, tmp_path):
    """Hydra's bash script, installed with `eval`, asks the command and fills COMPREPLY."""
    bash = (
        'eval "$(orchestrator -sc install=bash)"; '
        'COMP_LINE="orchestrator compile.mo"; COMP_POINT=${#COMP_LINE}; '
        'COMP_WORDS=(orchestrator compile.mo); COMP_CWORD=1; hydra_bash_completion; echo "${COMPREPLY[@]}"'
    )
    proc = run(venv, ["bash", "-c", bash], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["compile.mode="]
