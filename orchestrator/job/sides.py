"""How a job's two sides run, decided in one place: together in the job's process (the default),
apart from the start, apart when they do not fit together, and which fresh processes follow (more
paired repetitions, each side alone for its memory). The protocol and the worker read this rule
(the worker starts job/processes/apart.py by it); none decides it again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from orchestrator.config.schema import Config


@dataclass(frozen=True)
class SidesRule:
    """One job's answer to "do the two sides run together, and what runs in fresh processes?"."""

    apart: bool
    """`bench.sides=apart`: each side in a fresh process of its own from the start."""
    fall_back: bool
    """`bench.sides=auto` on one GPU: sides that do not fit on the device together run apart instead."""
    processes: int
    """Processes the paired timings span, this one included (`bench.processes`; 1 for distributed jobs)."""
    memory_alone: bool
    """Each side's peak memory alone in a fresh process (single-process CUDA jobs, `bench.memory`): the
    first two paired processes, before they make the other side, else a process of its own."""
    memory_in_place: bool
    """Each side's peak memory per rank, in place (distributed CUDA jobs: their ranks are processes)."""


def sides_rule(cfg: Config, device: torch.device, world: int) -> SidesRule:
    # Sides can leave the process only where one process holds the whole job and a jit compile
    # (an AOTInductor package is loaded, not compiled, by a fresh process: it stays paired here).
    one_process = world == 1
    movable = one_process and cfg.compile.path == "jit"
    cuda = device.type == "cuda"
    requested = cfg.bench.processes
    processes = 1 if not one_process else requested if requested is not None else (3 if cuda else 1)
    return SidesRule(
        apart=cfg.bench.sides == "apart" and movable,
        fall_back=cfg.bench.sides == "auto" and movable and cuda,
        processes=processes,
        memory_alone=one_process and cuda and cfg.bench.memory,
        memory_in_place=cuda and not one_process,
    )
