"""Peak FLOP/s and memory bandwidth for MFU (and rooflines): the spec sheet of the GPU variant, or
what `bench.measure_peaks=true` measured on this node (cached in the sweep directory).

Spec figures are NVIDIA's dense ones (no 2:4 sparsity), per GPU: 16-bit (bf16 = fp16) and TF32 on
tensor cores, FP32 without; bandwidth in TB/s of the GPU's own memory. `peaks_of` gives a job both
(measured where it was, and the datasheet's), `utilization` a figure's share of one (MFU, MBU).
"""

from __future__ import annotations

import fcntl
import json
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Spec:
    """One GPU variant's dense peaks (TFLOP/s) and memory bandwidth (TB/s)."""

    variant: str
    tokens: tuple[str, ...]
    """Tokens that must all be in the device name (lower case, split on spaces and dashes)."""
    bf16: float
    tf32: float
    fp32: float
    tb_s: float


# First match wins: each variant comes before any entry whose tokens are a subset of its own
# (H100 NVL and PCIe before H100, A100 80GB PCIe before A100 PCIe). Whole tokens, so that GH200
# is not an H200, L40S not an L4, A10G not an A10.
SPECS = (
    Spec("H100 NVL", ("h100", "nvl"), 835.5, 417.5, 60.0, 3.9),
    Spec("H100 PCIe", ("h100", "pcie"), 756.5, 378.0, 51.2, 2.0),
    Spec("H100 SXM", ("h100",), 989.4, 494.7, 66.9, 3.35),
    Spec("H200 NVL", ("h200", "nvl"), 835.5, 417.5, 60.0, 4.8),
    Spec("H200 SXM", ("h200",), 989.4, 494.7, 66.9, 4.8),
    Spec("GH200 144GB HBM3e", ("gh200", "144g"), 989.4, 494.7, 66.9, 4.9),
    Spec("GH200", ("gh200",), 989.4, 494.7, 66.9, 4.0),
    Spec("A100 PCIe 80GB", ("a100", "80gb", "pcie"), 312.0, 156.0, 19.5, 1.935),
    Spec("A100 PCIe 40GB", ("a100", "pcie"), 312.0, 156.0, 19.5, 1.555),
    Spec("A100 SXM 80GB", ("a100", "80gb"), 312.0, 156.0, 19.5, 2.039),
    Spec("A100 SXM 40GB", ("a100",), 312.0, 156.0, 19.5, 1.555),
    Spec("L40S", ("l40s",), 362.05, 183.0, 91.6, 0.864),
    Spec("L4", ("l4",), 121.0, 60.0, 30.3, 0.3),
    Spec("A10", ("a10",), 125.0, 62.5, 31.2, 0.6),
    Spec("GB200", ("gb200",), 2500.0, 1250.0, 90.0, 8.0),
    Spec("B200", ("b200",), 2250.0, 1125.0, 75.0, 8.0),
    Spec("B100", ("b100",), 1750.0, 875.0, 60.0, 8.0),
)
PEAKS_DIR = "peaks"


def spec_for(device_name: str) -> Spec | None:
    """The spec of a `torch.cuda.get_device_name()` string, or None for a GPU not in the table."""
    tokens = set(re.split(r"[\s\-_]+", device_name.lower()))
    return next((s for s in SPECS if set(s.tokens) <= tokens), None)


def matmul_kind(dtype: str) -> str:
    """The matmul precision a job of this dtype runs at: bf16/fp16 (autocast), else tf32 where
    torch allows it for fp32 matmuls, else fp32."""
    if dtype in ("bf16", "fp16"):
        return dtype
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "fp32"


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def peak_flops(
    device: torch.device, dtype: str, measured: dict | None = None
) -> tuple[float | None, str | None]:
    """(peak FLOP/s, basis) for MFU: measured on this node where `measured` has this kind, else the
    spec sheet; (None, why) where neither is known."""
    kind = matmul_kind(dtype) if device.type == "cuda" else dtype
    if measured and measured.get("tflops", {}).get(kind):
        return measured["tflops"][kind] * 1e12, f"measured: {kind} matmul on {measured['device']}"
    if device.type != "cuda":
        return None, "no spec for CPUs (bench.measure_peaks=true measures an fp32 matmul)"
    return spec_flops(_device_name(device), kind)


def spec_flops(device_name: str, kind: str) -> tuple[float | None, str]:
    """(spec-sheet FLOP/s, basis) of a GPU for a matmul kind (bf16, fp16, tf32, fp32)."""
    spec = spec_for(device_name)
    if spec is None:
        return None, f"no spec for {device_name!r}"
    tflops = spec.bf16 if kind in ("bf16", "fp16") else getattr(spec, kind)
    return tflops * 1e12, f"spec: {spec.variant} {kind}"


def peak_bandwidth(device: torch.device, measured: dict | None = None) -> tuple[float | None, str | None]:
    """(memory bandwidth in bytes/s, basis): measured device-to-device copy, else the spec sheet."""
    if measured and measured.get("copy_tb_s"):
        return measured["copy_tb_s"] * 1e12, f"measured: copy on {measured['device']}"
    if device.type != "cuda":
        return None, "no spec for CPUs"
    name = _device_name(device)
    spec = spec_for(name)
    return (spec.tb_s * 1e12, f"spec: {spec.variant}") if spec else (None, f"no spec for {name!r}")


@dataclass(frozen=True)
class Peaks:
    """The peaks a figure is held against: the first measured on this node where it was, else the
    datasheet's; the datasheet's alone as the second. None, with the basis saying why, where unknown."""

    bytes_per_s: float | None
    bytes_basis: str | None
    spec_bytes_per_s: float | None
    flops_per_s: float | None
    flops_basis: str | None
    spec_flops_per_s: float | None


def peaks_of(device: torch.device, dtype: str, measured: dict | None) -> Peaks:
    """This job's peaks (above): bandwidth and the dtype's matmul FLOP/s, both ways."""
    bw, bw_basis = peak_bandwidth(device, measured)
    flops, flops_basis = peak_flops(device, dtype, measured)
    spec_bw, _ = peak_bandwidth(device, None)
    spec_flops, _ = peak_flops(device, dtype, None)
    return Peaks(bw, bw_basis, spec_bw, flops, flops_basis, spec_flops)


def utilization(amount: float | None, seconds: float | None, peak: float | None) -> float | None:
    """amount / seconds / peak: bytes for MBU, FLOPs for MFU; None where any is unknown."""
    if not amount or not seconds or not peak:
        return None
    return amount / seconds / peak


def _seconds(device: torch.device, fn, repeat: int) -> float:
    """Best seconds per call over three blocks of `repeat` calls, after a warm-up call."""
    from orchestrator.job.context import seconds_per_call

    fn()
    return min(seconds_per_call(device, fn, repeat) for _ in range(3))


def _matmul_tflops(device: torch.device, dtype: torch.dtype, n: int, repeat: int) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n**3 / _seconds(device, lambda: a @ b, repeat) / 1e12


def measure_peaks(device: torch.device) -> dict:
    """Achievable matmul TFLOP/s and copy bandwidth of this device (a few seconds)."""
    cuda = device.type == "cuda"
    tflops: dict[str, float] = {}
    if cuda:
        tflops["bf16"] = _matmul_tflops(device, torch.bfloat16, 8192, 20)
        tflops["fp16"] = _matmul_tflops(device, torch.float16, 8192, 20)
        before = torch.get_float32_matmul_precision()
        try:
            for kind, precision in (("tf32", "high"), ("fp32", "highest")):
                torch.set_float32_matmul_precision(precision)
                tflops[kind] = _matmul_tflops(device, torch.float32, 8192, 5)
        finally:
            torch.set_float32_matmul_precision(before)
    else:
        tflops["fp32"] = _matmul_tflops(device, torch.float32, 1024, 5)
    numel = (1 << 28 if cuda else 1 << 24) // 4  # 256 MiB on a GPU, 16 MiB on a CPU, of fp32
    src, dst = torch.empty(numel, device=device), torch.empty(numel, device=device)
    copy_s = _seconds(device, lambda: dst.copy_(src), 20)
    return {
        "host": socket.gethostname(),
        "device": _device_name(device),
        "torch": torch.__version__,
        "tflops": tflops,
        "copy_tb_s": 2 * src.nbytes / copy_s / 1e12,  # each byte read once and written once
    }


def cache_path(sweep_dir: Path, device: torch.device) -> Path:
    name = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{socket.gethostname()}-{_device_name(device)}")
    return Path(sweep_dir) / PEAKS_DIR / f"{name}.json"


def node_peaks(device: torch.device, sweep_dir: Path) -> dict:
    """This node's measured peaks: read from the sweep's cache, or measured once and cached. A lock
    keeps jobs of one node from measuring at the same time (the second one reads the first's)."""
    from orchestrator.core.files import write_json_atomic

    path = cache_path(sweep_dir, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return json.loads(path.read_text())
        peaks = measure_peaks(device)
        write_json_atomic(path, peaks)
        return peaks
