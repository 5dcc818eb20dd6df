"""Where AOTInductor's package load dies on the H200 (issue 16), case by case.

On torch 2.11 + H200, `aoti_load_package` killed the job's cold-start process with SIGSEGV for
GPT-2 small (bf16 autocast, batch 1), with the weights inside the `.so` and beside it. Each case
here packages a model in one fresh process and loads it in another (a server's cold start), so a
crash ends only that process; the loading process runs with faulthandler and, where
NATIVE_TRACE names native_trace.so, with the native stack printed. One JSON line per case: what
died where, or the largest difference from eager.

    AOTI_OPTIONS='{"aot_inductor.custom_op_libs": [":libstdc++.so.6"]}' \
    python benchmarks/h200-crashes/aoti_probe.py [CASE ...]     (default: all but GPT-2 small)

AOTI_OPTIONS: inductor config keys patched while packaging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: workloads/

# name: (model, device, how it is packaged)
CASES = {
    "mlp-cpu": ("mlp", "cpu", "package"),
    "mlp-cpu-legacy-so": ("mlp", "cpu", "legacy"),
    "mlp-cuda": ("mlp", "cuda", "package"),
    "mlp-cuda-legacy-so": ("mlp", "cuda", "legacy"),
    "gpt-tiny-cuda-fp32": ("gpt-tiny", "cuda", "package"),
    "gpt-tiny-cuda-autocast": ("gpt-tiny-autocast", "cuda", "package"),
    "gpt-tiny-cuda-autocast-legacy-so": ("gpt-tiny-autocast", "cuda", "legacy"),
    "gpt2-cuda-autocast": ("gpt2-autocast", "cuda", "package"),
}


def _model(name: str, device: torch.device) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    if name == "mlp":
        with device:
            model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
        return model.eval(), (torch.randn(8, 64, device=device),)
    from orchestrator.config.schema import WorkloadConfig
    from orchestrator.job.phases.aoti import Autocast
    from workloads import build_workload

    size = "gpt2" if name.startswith("gpt2") else "tiny"
    wl = build_workload(WorkloadConfig(size=size, batch_size=1, seq_len=128), "infer", device)
    model = Autocast(wl.model, device, "bf16") if name.endswith("autocast") else wl.model
    return model.eval(), wl.make_inputs(None)


def _options() -> dict:
    return json.loads(os.environ.get("AOTI_OPTIONS") or "{}")


def package(case: str, work: Path) -> None:
    """Child 1: export and package; save the inputs and eager's output for child 2."""
    model_name, device_name, how = CASES[case]
    device = torch.device(device_name)
    model, inputs = _model(model_name, device)
    with torch.no_grad(), torch._inductor.config.patch(_options()):
        expected = model(*inputs)
        t0 = time.perf_counter()
        exported = torch.export.export(model, inputs)
        export_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        if how == "legacy":  # the older path: one .so, loaded by torch._export.aot_load
            path = torch._inductor.aot_compile(
                exported.module(), inputs, options={"aot_inductor.output_path": str(work / "model.so")}
            )
        else:
            path = torch._inductor.aoti_compile_and_package(exported, package_path=str(work / "model.pt2"))
    torch.save({"inputs": [t.cpu() for t in inputs], "expected": expected.cpu()}, work / "io.pt")
    (work / "package.json").write_text(
        json.dumps({"path": str(path), "export_s": export_s, "package_s": time.perf_counter() - t0})
    )


def load(case: str, work: Path) -> None:
    """Child 2: load the package and call it once, as a server's cold start."""
    _, device_name, how = CASES[case]
    device = torch.device(device_name)
    io = torch.load(work / "io.pt")
    inputs = [t.to(device) for t in io["inputs"]]
    path = json.loads((work / "package.json").read_text())["path"]
    print(f"stage: load {path}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if how == "legacy":
        runner = torch._export.aot_load(path, device_name)
    else:
        runner = torch._inductor.aoti_load_package(path)
    load_s = time.perf_counter() - t0
    print("stage: call", file=sys.stderr, flush=True)
    with torch.no_grad():
        out = runner(*inputs)
    out = out[0] if isinstance(out, list | tuple) else out
    diff = (out.float().cpu() - io["expected"].float()).abs().max().item()
    (work / "load.json").write_text(json.dumps({"load_s": load_s, "max_abs_diff": diff}))


def _child(stage: str, case: str, work: Path, timeout: float) -> tuple[int | str, str]:
    env = dict(os.environ)
    if os.environ.get("NATIVE_TRACE"):
        env["LD_PRELOAD"] = os.environ["NATIVE_TRACE"]
    cmd = [sys.executable, "-X", "faulthandler", __file__, f"--{stage}", case, str(work)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    return proc.returncode, proc.stderr


def _linked(so: str) -> dict:
    needed = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
    defined = subprocess.run(["nm", "-C", "--defined-only", so], capture_output=True, text=True).stdout
    return {
        "needed": [ln.split("[")[-1].rstrip("]") for ln in needed.splitlines() if "NEEDED" in ln],
        "libstdcxx_symbols_defined": sum(
            "std::codecvt" in ln or "std::locale::" in ln for ln in defined.split("\n")
        ),
    }


def _native_frames(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("native_trace:")), None)
    return [] if start is None else lines[start : start + 28]


def run_case(case: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"aoti-{case}-"))
    line: dict = {"case": case, "torch": torch.__version__, "options": _options()}
    code, err = _child("package", case, work, 600)
    if code != 0:
        return line | {"stage": "package", "exit": code, "stderr_tail": err.splitlines()[-12:]}
    line |= json.loads((work / "package.json").read_text())
    if line["path"].endswith(".so"):  # what the linker put in: libstdc++ shared, or a static copy?
        line["linked"] = _linked(line["path"])
    code, err = _child("load", case, work, 300)
    if code != 0:
        tail = [ln for ln in err.splitlines() if ln.strip()][-16:]
        return line | {"stage": "load", "exit": code, "native": _native_frames(err), "stderr_tail": tail}
    return line | {"stage": "done", "exit": 0} | json.loads((work / "load.json").read_text())


def main(argv: list[str]) -> None:
    if argv and argv[0] in ("--package", "--load"):
        (package if argv[0] == "--package" else load)(argv[1], Path(argv[2]))
        return
    for case in argv or [c for c in CASES if not c.startswith("gpt2")]:  # GPT-2: named only
        if CASES[case][1] == "cuda" and not torch.cuda.is_available():
            continue
        print(json.dumps(run_case(case)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
