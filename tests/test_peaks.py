"""Peaks for MFU (orchestrator/job/phases/peaks.py): the spec table by device name, and measured peaks
cached once per node in the sweep directory (measured here on the CPU, for real)."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from conftest import ROOT, by_label, run_cli

from orchestrator.analysis.serving import limits_line
from orchestrator.job.phases import peaks

# Names as torch.cuda.get_device_name() reports them, and the variant each must be read as.
NAMES = [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA B100", "B100"),
    ("NVIDIA GB200", "GB200"),
]


@pytest.mark.parametrize("name,variant", NAMES)
def test_device_names_match_their_variant(name, variant):
    spec = peaks.spec_for(name)
    assert spec is not None and spec.variant == variant, name


UNKNOWN = ["NVIDIA L40", "NVIDIA A10G", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB"]


@pytest.mark.parametrize("name", UNKNOWN)
def test_gpus_not_in_the_table_have_no_peak(name):
    assert peaks.spec_for(name) is None
    assert peaks.spec_flops(name, "bf16") == (None, f"no spec for {name!r}")


def test_spec_peaks_by_dtype_and_variant():
    assert peaks.spec_flops("NVIDIA H200", "bf16") == (989.4e12, "spec: H200 SXM bf16")
    assert peaks.spec_flops("NVIDIA H200 NVL", "fp16") == (835.5e12, "spec: H200 NVL fp16")
    assert peaks.spec_flops("NVIDIA H100 PCIe", "tf32") == (378.0e12, "spec: H100 PCIe tf32")
    assert peaks.spec_flops("NVIDIA A100-SXM4-80GB", "fp32") == (19.5e12, "spec: A100 SXM 80GB fp32")
    # The table's own consistency: 16-bit > TF32 > FP32 on every variant; bandwidth per variant.
    assert all(s.bf16 > s.tf32 > s.fp32 > 0 and 0.2 < s.tb_s < 10 for s in peaks.SPECS)
    by_variant = {s.variant: s.tb_s for s in peaks.SPECS}
    assert by_variant["H200 SXM"] > by_variant["H100 SXM"] > by_variant["A100 SXM 80GB"] > by_variant["L4"]


def test_fp32_matmuls_count_against_tf32_when_torch_allows_it():
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert peaks.matmul_kind("fp32") == "fp32"
        torch.backends.cuda.matmul.allow_tf32 = True
        assert peaks.matmul_kind("fp32") == "tf32"
        assert peaks.matmul_kind("bf16") == "bf16"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_cpu_has_no_spec_peak():
    flops, basis = peaks.peak_flops(torch.device("cpu"), "fp32")
    assert flops is None and "measure_peaks" in basis


def test_measured_peaks_are_measured_once_per_node_and_cached(tmp_path):
    """Two processes ask at once: one measures (a real CPU matmul and copy), the other reads its file."""
    code = (
        "import json, sys, torch; from orchestrator.job.phases.peaks import node_peaks; "
        "print(json.dumps(node_peaks(torch.device('cpu'), sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert outs[0] == outs[1], "measured figures differ run to run: equal means one read the other's"
    (cached,) = (tmp_path / "peaks").glob("*.json")
    assert json.loads(cached.read_text()) == outs[0] and cached.name.endswith("-cpu.json")
    measured = outs[0]
    assert 1e-4 < measured["tflops"]["fp32"] < 100 and 1e-4 < measured["copy_tb_s"] < 10
    flops, basis = peaks.peak_flops(torch.device("cpu"), "fp32", measured)
    assert flops == measured["tflops"]["fp32"] * 1e12 and basis == "measured: fp32 matmul on cpu"
    bandwidth, basis = peaks.peak_bandwidth(torch.device("cpu"), measured)
    assert bandwidth == measured["copy_tb_s"] * 1e12 and basis == "measured: copy on cpu"
    assert peaks.peak_flops(torch.device("cpu"), "bf16", measured)[0] is None, "only fp32 measured on CPU"


def test_a_job_with_measure_peaks_writes_the_node_cache_and_holds_its_step_against_it(tmp_path, fast):
    """The node's peaks measured once and cached; the step's MFU and (profile) MBU against them, in
    the result, the table (percent) and the verdict's words; the datasheet's null on a CPU, not guessed."""
    args = ["workload=block", "bench.task=infer", "compile.mode=eager", "bench.measure_peaks=true"]
    proc = run_cli([*args, "bench.profile=true", *fast], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep = tmp_path / "sweeps" / "default"
    (cached,) = (sweep / "peaks").glob("*-cpu.json")
    node = json.loads(cached.read_text())
    assert node["tflops"]["fp32"] > 0
    (r,) = by_label(sweep).values()
    assert r["status"] == "ok" and r["mfu_basis"] == "measured: fp32 matmul on cpu"
    for side in ("eager", "compiled"):  # the hand formula on the result's own figures
        mfu = r["flops_per_step"] / (r[f"{side}_ms"] / 1000) / (node["tflops"]["fp32"] * 1e12)
        assert r[f"{side}_mfu"] == pytest.approx(mfu) and r[f"{side}_mfu_spec"] is None
        mbu = r[f"{side}_bytes_per_step"] / (r[f"{side}_ms"] / 1000) / (node["copy_tb_s"] * 1e12)
        assert r[f"{side}_mbu"] == pytest.approx(mbu) and r[f"{side}_mbu_spec"] is None
    assert r["peak_bytes_basis"] == "measured: copy on cpu" and r["spec_bytes_per_s"] is None
    assert "compiled mfu" in proc.stdout and "compiled step mbu" in proc.stdout
    line = limits_line(pd.Series(r))
    assert line is not None and line.startswith("compiled step at ") and "of measured FLOP/s" in line
    assert "compiled step's bytes at " in line and "of measured bandwidth, eager at " in line
    assert "datasheet" not in line, "a CPU has no datasheet figure: none quoted"
