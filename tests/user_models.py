"""Models and backends a user might bring, used by the tests through config alone
(`workload=module workload.path=tests workload.target=user_models:NAME`).

Several misbehave on purpose (fault injection). `FakeOOM` is a stand-in: it raises
torch.OutOfMemoryError itself, since a real CUDA OOM cannot happen on this CPU-only machine.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Stacked(nn.Module):
    """Repeated blocks in a ModuleList: FSDP2 compiles and shards each."""

    def __init__(self, dim: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MLP(dim) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + layer(x)
        return x


class PrintingNet(MLP):
    """Graph breaks: a print() and a .item() in forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        print("forward ran")
        scale = y.abs().mean().item()
        return y / (1.0 + scale)


class Raises(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("planted failure in forward")


class FakeOOM(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise torch.OutOfMemoryError("simulated: CUDA out of memory. Tried to allocate 80.00 GiB")


class Hangs(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(3600)
        return x


class ExitsAbruptly(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(3)


class KillsItself(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGKILL)
        return x


class Segfaults(MLP):
    """Dies by SIGSEGV in forward (a crash in native code: a kernel, a loader, a collective)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import ctypes
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
        ctypes.string_at(0)  # reads address 0
        return x


class StoppedInSideProcess(MLP):
    """Stopped by SIGTERM in the job's second (fresh) process only, as a group-wide `kill` would."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import sys

        fresh = sys.modules.get("orchestrator.job.processes.fresh")
        if fresh is not None and fresh.running == "side":
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        return super().forward(x)


class RankOneRaises(Stacked):
    """Fails on rank 1 only, after the process group is up."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.environ.get("RANK") == "1":
            raise RuntimeError("planted failure on rank 1")
        return super().forward(x)


class RankZeroFailsRankOneWaits(Stacked):
    """Rank 0 fails while it builds the model; rank 1 meanwhile waits forever outside any collective,
    as a rank waits for a process group whose store will never exist (rank 0 failed first)."""

    def __init__(self, dim: int = 32, depth: int = 2) -> None:
        if os.environ.get("RANK") == "0":
            raise RuntimeError("planted failure on rank 0")
        if os.environ.get("RANK") == "1":
            threading.Event().wait()  # never set: only the orchestrator's stop ends this rank
        super().__init__(dim, depth)


def perturbing_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    """A wrong "compiler": runs the graph, then scales float outputs by 1.01."""

    def run(*args: torch.Tensor) -> object:
        outs = gm(*args)
        scale = lambda t: t * 1.01 if isinstance(t, torch.Tensor) and t.is_floating_point() else t
        return type(outs)(scale(o) for o in outs) if isinstance(outs, tuple | list) else scale(outs)

    return run


class DiffersWhenCompiled(MLP):
    """Numerically wrong only under torch.compile: a parity failure through the real inductor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        return y * 1.01 if torch.compiler.is_compiling() else y


class WrongGradWhenCompiled(MLP):
    """Outputs right, one parameter's gradient doubled under torch.compile (`w + w - w.detach()` is
    `w` in value, 2 in derivative): a parity failure that only naming the tensor explains."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first = self.net[0]
        w = first.weight
        if torch.compiler.is_compiling():
            w = w + (w - w.detach())
        return self.net[2](self.net[1](nn.functional.linear(x, w, first.bias)))


class ConvBN(nn.Module):
    """A healthy small conv net with BatchNorm: fp32 reduction order differs, nothing is wrong.
    Inputs [N, 3, H, W]."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class DropoutInTraining(MLP):
    """Random ops in training mode only, as transformers' dropout: eval mode draws nothing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(self.net(x), p=0.3, training=self.training)


class NaNWhenCompiled(MLP):
    """Compiled output is NaN: a parity failure with NaN figures that the end of the sweep must survive."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        return y * float("nan") if torch.compiler.is_compiling() else y


class EmptyOutput(MLP):
    """Produces a zero-size output: its loss is the mean of nothing (NaN)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, :0]


class DriftsWhenCompiled(MLP):
    """Compiled output scaled by 1 + ||W - W0||^2 (W0: the initial first-layer weights): exactly eager
    at the start, so one-step parity passes, then further off the more training moves the weights."""

    def __init__(self, dim: int = 32, hidden: int = 64) -> None:
        super().__init__(dim, hidden)
        self.register_buffer("w0", self.net[0].weight.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        if torch.compiler.is_compiling():
            y = y * (1 + (self.net[0].weight - self.w0).square().sum())
        return y


def stopped_compiler_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    """A "compiler" whose subprocess is stopped by SIGINT, as Ctrl-C or `timeout` reach g++ under
    inductor; `subprocess` raises CalledProcessError, as inductor's C++ build does. The child resets
    SIGINT first: a test run in the background without job control inherits it ignored."""
    import subprocess
    import sys

    stop = "import os, signal as s; s.signal(s.SIGINT, s.SIG_DFL); os.kill(os.getpid(), s.SIGINT)"
    subprocess.run([sys.executable, "-c", stop], check=True)
    return gm


def make_mlp(dim: int = 32, hidden: int = 64) -> nn.Module:
    """A factory, not a class: `workload.target` may name either."""
    return MLP(dim, hidden)


class KeywordNet(nn.Module):
    """Named inputs and a dict output with its own loss, as a Hugging Face model takes and returns
    them: forward(input_ids, attention_mask=None, labels=None). It refuses a mask that is not 0/1 (a
    "mask" of random ids is not one) and trains on its `loss` entry."""

    def __init__(self, vocab: int = 100, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask=None, labels=None):  # noqa: ANN001, ANN201
        if attention_mask is None or not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError("attention_mask must be given, of 0s and 1s")
        h = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        logits = self.head(h)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return out


class ScalarOut(MLP):
    """Returns a scalar loss itself: used as it is, never squared."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).mean() + 7.0


class RunningMean(MLP):
    """Updates a buffer in forward (a running mean of its inputs), in training and in eval alike."""

    def __init__(self, dim: int = 32, hidden: int = 64) -> None:
        super().__init__(dim, hidden)
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def update(self, x: torch.Tensor, momentum: float) -> None:
        with torch.no_grad():
            self.mean.mul_(1 - momentum).add_(x.detach().mean(0) * momentum)
            self.calls.add_(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.update(x, 0.1)
        return self.net(x - self.mean)


class RunningMeanMiscompiled(RunningMean):
    """A planted miscompile of the buffer update alone: compiled, the running mean moves twice as fast.
    The output is the same on both sides (it does not read the updated buffer), so only the buffer
    comparison can see it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        self.update(x, 0.2 if torch.compiler.is_compiling() else 0.1)
        return y


class TrainingModeOnly(MLP):
    """Fails when it runs in training mode: inference must have put it in eval mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            raise RuntimeError("forward ran in training mode")
        return self.net(x)


class PlantedFlopFailure(MLP):
    """Calls an op whose FLOP formula raises, as FlopCounterMode's attention formula does on
    grouped-query attention on CUDA (torch 2.11): a stand-in for that failure, which the CPU's
    attention ops do not reach. The op itself computes fine, eager and compiled."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.orchestrator_test.planted(self.net(x))


if not hasattr(torch.ops.orchestrator_test, "planted"):  # once per process, however often imported

    @torch.library.custom_op("orchestrator_test::planted", mutates_args=())
    def _planted(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @_planted.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    from torch.utils.flop_counter import register_flop_formula

    @register_flop_formula(torch.ops.orchestrator_test.planted)
    def _planted_flops(*args: object, **kwargs: object) -> int:
        raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible (planted)")


class BuiltInBf16(nn.Module):
    """Layers created in bfloat16: under bench.dtype=fp32 it still computes in bf16, and its fp64
    parity reference cannot run (forward casts its input to bf16 against fp64 weights)."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.a = nn.Linear(dim, 64, dtype=torch.bfloat16)
        self.b = nn.Linear(64, dim, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x.to(torch.bfloat16))))


class TakesOneDict(nn.Module):
    """forward(batch) with one dict argument, as many training codebases write it."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.a = nn.Linear(dim, dim)

    def forward(self, batch: dict) -> torch.Tensor:
        return self.a(batch["x"]) * batch["scale"]


def one_dict(batch_size: int | None, seq_len: int | None, device: torch.device) -> tuple[dict]:
    """make_inputs of TakesOneDict: one positional dict."""
    n = batch_size or 8
    return ({"x": torch.randn(n, 32, device=device), "scale": torch.ones(n, 1, device=device)},)


class _LoopWithBreak(nn.Module):
    def __init__(self, depth: int = 5) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = torch.relu(layer(x))
            if i == 0:
                x[:, 0].tolist()  # a graph break inside a loop: dynamo skips this whole frame
        return x


class MostlyEager(nn.Module):
    """One break, and most of the model eager: dynamo compiles `pre`, then skips the body's frame
    (a break in a loop cannot be resumed from) and runs its five layers eager."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(32, 32)
        self.body = _LoopWithBreak()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(torch.relu(self.pre(x)))


class CountsItsCalls(MLP):
    """Counts its forward calls in a Python attribute: dynamo guards on the count, so each call
    recompiles (until dynamo's recompile limit; past it, the frame runs eager)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.net(x)


class OneLinear(nn.Module):
    """One matmul: nothing for a compiler to fuse, so its own call overhead is what it adds."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class NaNInEager(MLP):
    """NaN in eager itself (a weight holds NaN, as a bad checkpoint's): the model's fault, not compile's."""

    def __init__(self, dim: int = 32, hidden: int = 64) -> None:
        super().__init__(dim, hidden)
        with torch.no_grad():
            self.net[2].weight[0, 0] = float("nan")


class CounterMiscompiled(MLP):
    """A planted miscompile of an integer counter buffer: compiled, it advances by 2 a call. The output
    does not read it, so only the buffer comparison can see it (its error is infinite)."""

    def __init__(self, dim: int = 32, hidden: int = 64) -> None:
        super().__init__(dim, hidden)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps.add_(2 if torch.compiler.is_compiling() else 1)
        return self.net(x)


class BranchesOnValue(MLP):
    """A Python `if` on a tensor's value: dynamo breaks the graph there (`generic_jump TensorVariable()`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        if y.sum() > 0:
            return y + 1
        return y - 1


class DoubleIt(torch.autograd.Function):
    """An autograd.Function, not an nn.Module: refused as a workload.target before anything runs."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return x * 2

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        return grad * 2


class ScalesByItsCounter(MLP):
    """Increments an integer buffer in forward and reads it (a step counter): compiled, its gradients
    come out twice eager's (AOT autograd; benchmarks/upstream/counter_buffer_grad.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.net(x) * self.calls
