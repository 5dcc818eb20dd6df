"""The fork server (job/processes/fork_server.py): a job's fresh processes fork from one process that did the
imports, or (started ahead) are spare interpreters that did them while the previous one ran. Real
processes throughout: the server, its forks and spares, an interpreter where a fork would differ."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from conftest import wait_until
from test_faults import alive

from orchestrator.core.env_scope import scoped_environ
from orchestrator.job.processes import fork_server
from orchestrator.job.processes.fresh import run_module
from orchestrator.job.processes.supervisor import PYTHON

ENTRY = """
import os, sys, time
from pathlib import Path

def answer(spec, req):
    from orchestrator.job.processes import fork_server
    if req["how"] == "exit7":
        os._exit(7)
    if req["how"] == "wait":  # until killed
        Path(req["started"]).write_text(str(os.getpid()))
        time.sleep(600)
    return {
        "forked": fork_server.forked,
        "ahead": fork_server.started_ahead,
        "pid": os.getpid(),
        "flags": sys.orig_argv[1:sys.orig_argv.index("-m")],  # the interpreter's, as every fresh process's
        "preloaded": "transformers.modeling_utils" in sys.modules,
        "asked": os.environ.get("ASKED"),
        "cwd": os.getcwd(),
    }
"""


@pytest.mark.parametrize("ahead", [False, True], ids=["fork", "started-ahead"])
def test_a_fresh_process_that_skipped_the_imports(tmp_path, monkeypatch, ahead):
    (tmp_path / "forked_entry.py").write_text(ENTRY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the server's and its clients' alike
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "job"
    work.mkdir()
    how = {"forked": not ahead, "ahead": ahead}
    with fork_server.serving(PYTHON, ("transformers.modeling_utils",), ahead) as env, scoped_environ(env):
        monkeypatch.setenv("ASKED", "yes")  # an ordinary variable, set after the server started
        got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
        assert why is None, why
        first = got.pop("pid")
        assert got == {**how, "preloaded": True, "asked": "yes", "cwd": str(tmp_path), "flags": PYTHON[1:]}

        got, why = run_module(work, 120, "forked_entry:answer", "crash", {"how": "exit7"})
        assert got is None and "exited with code 7" in why, why

        for garbled in (b"", b"not json\n"):  # a client that hangs up or garbles: the server goes on
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.connect(env[fork_server.ADDRESS_ENV])
                raw.sendall(garbled)
        got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
        assert why is None and got["forked"] is not ahead and got["ahead"] is ahead, why
        assert got["pid"] != first, "each request a process of its own"

        # The client gone (a supervisor killed): its fork goes too, as a child of its own would.
        started = tmp_path / "started"
        request = tmp_path / "wait.json"
        request.write_text(
            json.dumps({"kind": "forked_entry:answer", "how": "wait", "started": str(started)})
        )
        with open(os.devnull) as nothing:
            child = fork_server.start(
                "orchestrator.job.processes.fresh", request, False, (nothing.fileno(), 1, 2)
            )
        assert child is not None
        wait_until(started.exists, 60, "the child started")
        assert int(started.read_text()) == child.pid
        child.conn.close()
        wait_until(lambda: not alive(child.pid), 60, "the child ended with its client")

        # A variable read at import, other than the server's: an interpreter, not a fork.
        monkeypatch.setenv("TORCHINDUCTOR_FORK_TEST", "1")
        got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
        assert why is None, why
        assert not got["forked"] and not got["ahead"] and got["preloaded"] is False and got["asked"] == "yes"
    assert not Path(env[fork_server.ADDRESS_ENV]).parent.exists(), "the server's folder is left"


def test_without_a_server_a_fresh_process_is_an_interpreter(tmp_path, monkeypatch):
    monkeypatch.delenv(fork_server.ADDRESS_ENV, raising=False)
    with open(os.devnull) as nothing:
        assert (
            fork_server.start(
                "orchestrator.job.processes.fresh", tmp_path / "r.json", False, (nothing.fileno(), 1, 2)
            )
            is None
        )
    monkeypatch.setenv(fork_server.ADDRESS_ENV, str(tmp_path / "gone" / "socket"))
    with open(os.devnull) as nothing:
        assert (
            fork_server.start(
                "orchestrator.job.processes.fresh", tmp_path / "r.json", False, (nothing.fileno(), 1, 2)
            )
            is None
        )


@pytest.mark.parametrize("key", ["TORCH_LOGS", "PYTHONHASHSEED", "OMP_NUM_THREADS", "HF_HOME"])
def test_variables_read_at_import_are_the_ones_compared(key):
    assert fork_server.import_time_env({key: "1", "CUDA_VISIBLE_DEVICES": "0", "PATH": "/x"}) == {key: "1"}


def test_a_spare_that_dies_importing_leaves_interpreters(tmp_path, monkeypatch):
    (tmp_path / "forked_entry.py").write_text(ENTRY)
    (tmp_path / "dies_at_import.py").write_text("import os\nos._exit(3)\n")  # kills the spare, not the server
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "job"
    work.mkdir()
    with fork_server.serving(PYTHON, ("dies_at_import",), ahead=True) as env, scoped_environ(env):
        for _ in range(2):  # the waiting request, and one after the server knows
            got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
            assert why is None, why
            assert not got["ahead"] and not got["forked"], "an interpreter of its own"


def test_no_spare_imports_while_a_process_measures(tmp_path, monkeypatch):
    """A spare's imports wait for the sweep's measuring processes (their quiet lock); a request that
    finds the spare waiting gets an interpreter of its own, not a wait on that measurement."""
    (tmp_path / "forked_entry.py").write_text(ENTRY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "job"
    work.mkdir()
    with fork_server.serving(PYTHON, (), ahead=True) as env, scoped_environ(env):
        wait_until(Path(env[fork_server.ADDRESS_ENV]).exists, 60, "the server is up")
        with fork_server.measuring():  # this process measures (after a first spare's imports, if any)
            got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
            assert why is None, why  # a spare that imported before the measurement, or an interpreter
            got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
            assert why is None and not got["ahead"], "the next one waits for the measurement: an interpreter"
        got, why = run_module(work, 120, "forked_entry:answer", "report", {"how": "report"})
        assert why is None and got["ahead"], "the measurement over, the spare imported"
