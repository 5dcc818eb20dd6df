"""How near a served model's decode and prefill come to the card's limits (`bench.task=generate`).

A decode step of the batch is bound by memory: it reads every weight once and each sequence's KV
cache up to its position. Its model bandwidth utilization (MBU) is those bytes over the step's time,
against a peak bandwidth: this node's measured copy (`bench.measure_peaks`, job/phases/peaks.py) and the
datasheet's. A prefill is bound by compute: its MFU is its FLOPs over the time to first token, against
the served dtype's peak matmul FLOP/s, measured and datasheet. Where no peak is known (a CPU without
`bench.measure_peaks`, a GPU not in the table) the figure stays null and its basis says why.

What is counted, a lower bound on what the kernels move (docs/limits.md has the formulas):
- weights: every parameter once; an embedding table that no matmul shares (the input embedding
  unless tied to the LM head, GPT-2's positions) is a lookup, of which a step reads one row a token;
- the KV cache: K and V of every layer at each position a decode token attends (its own included);
  a static cache's unused tail, which its kernels may also read, is not counted;
- activations: not counted (a decode token's are tiny next to its weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from orchestrator.core.result import Generation
from orchestrator.job.context import JobContext
from orchestrator.job.phases import peaks
from workloads.decoding import Decoder


@dataclass(frozen=True)
class ServedShape:
    """What a decoder's bytes and FLOPs follow from, counted on the model and its cache."""

    weight_bytes: int  # parameter bytes a decode step reads (lookup tables: one row a token)
    kv_bytes_per_position: int  # K and V bytes of one position, all layers, the whole batch
    matmul_params: int  # parameters a prefill token multiplies (lookup tables and vectors left out)
    head_params: int  # of those, the LM head's (it runs on the last position only where logits are kept)
    layers: int  # attention layers
    query_width: int  # query heads x head dim of one layer


def lookup_tables(model: nn.Module) -> list[torch.Tensor]:
    """Embedding tables read row by row: an `nn.Embedding`'s weight that no other module holds (a
    table tied to the LM head is read whole by that matmul)."""
    held = {id(p) for m in model.modules() if not isinstance(m, nn.Embedding) for p in m.parameters(False)}
    tables = [m.weight for m in model.modules() if isinstance(m, nn.Embedding)]
    return [t for t in dict.fromkeys(tables) if id(t) not in held]


def weight_bytes_read(model: nn.Module, tokens: int) -> int:
    """Bytes of parameters a step over `tokens` tokens reads: each parameter once (a tied one once),
    a lookup table only its rows."""
    tables = {id(t): t for t in lookup_tables(model)}
    out = 0
    for p in model.parameters():  # unique: a tied parameter is yielded once
        if id(p) in tables:
            out += min(tokens, p.shape[0]) * p[0].numel() * p.element_size()
        else:
            out += p.numel() * p.element_size()
    return out


def kv_bytes_per_position(tensors: list[torch.Tensor]) -> int:
    """Bytes one position takes in a cache of (batch, heads, positions, head dim) K and V tensors."""
    return sum(t.nbytes // t.shape[-2] for t in tensors if t.shape[-2])


def served_shape(
    model: nn.Module, cache_tensors: list[torch.Tensor], batch: int, layers: int, query_width: int
) -> ServedShape:
    """The counts for one model served at `batch` sequences, from its parameters and its cache."""
    tables = {id(t) for t in lookup_tables(model)}
    matmul = [p for p in model.parameters() if p.dim() >= 2 and id(p) not in tables]
    # a transformers model's method (nn.Module's __getattr__ types an attribute a Tensor or Module)
    head = cast(Any, model).get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head_weight = getattr(head if head is not None else getattr(model, "lm_head", None), "weight", None)
    return ServedShape(
        weight_bytes=weight_bytes_read(model, batch),
        kv_bytes_per_position=kv_bytes_per_position(cache_tensors),
        matmul_params=sum(p.numel() for p in matmul),
        head_params=head_weight.numel() if isinstance(head_weight, torch.Tensor) else 0,
        layers=layers,
        query_width=query_width,
    )


def mean_decode_bytes(shape: ServedShape, prompt_len: int, new_tokens: int) -> float:
    """Bytes a decode step reads, averaged over a request's decode steps: the weights, and K and V of
    the positions it attends. Decode step k (1 .. new_tokens - 1) attends prompt_len + k positions,
    so on average prompt_len + new_tokens / 2."""
    return shape.weight_bytes + shape.kv_bytes_per_position * (prompt_len + new_tokens / 2)


def prefill_flops(shape: ServedShape, batch: int, prompt_len: int, head_positions: int) -> float:
    """FLOPs of a prefill: 2 a weight and token for the matmuls (the LM head over `head_positions`
    positions a sequence), and causal attention's useful half of QK^T and AV: 2 x prompt^2 x query
    width a layer and sequence."""
    body = 2 * (shape.matmul_params - shape.head_params) * batch * prompt_len
    head = 2 * shape.head_params * batch * head_positions
    attention = 2 * shape.layers * batch * prompt_len**2 * shape.query_width
    return float(body + head + attention)


def fill(ctx: JobContext, out: Generation, decoder: Decoder, cache: list[torch.Tensor]) -> None:
    """Each side's decode MBU and prefill MFU, against this node's measured peaks and the datasheet's
    (the module's docstring): the bytes and FLOPs counted on the model and its cache."""
    g = ctx.cfg.generate
    layers, width = decoder.attention_shape()
    shape = served_shape(decoder.model, cache, ctx.wl.batch_size, layers, width)
    out.gen_weight_bytes, out.gen_kv_bytes_per_position = shape.weight_bytes, shape.kv_bytes_per_position
    out.gen_decode_bytes = mean_decode_bytes(shape, g.prompt_len, g.new_tokens)
    heads = decoder.head_positions(g.prompt_len)
    out.gen_prefill_flops = prefill_flops(shape, ctx.wl.batch_size, g.prompt_len, heads)
    peak = peaks.peaks_of(ctx.device, ctx.cfg.bench.dtype, ctx.peaks)
    out.gen_bandwidth_tb_s = peak.bytes_per_s / 1e12 if peak.bytes_per_s else None
    out.gen_spec_tb_s = peak.spec_bytes_per_s / 1e12 if peak.spec_bytes_per_s else None
    out.gen_peak_tflops = peak.flops_per_s / 1e12 if peak.flops_per_s else None
    out.gen_spec_tflops = peak.spec_flops_per_s / 1e12 if peak.spec_flops_per_s else None
    out.gen_bandwidth_basis, out.gen_flops_basis = peak.bytes_basis, peak.flops_basis
    decoding = g.new_tokens > 1  # with one new token there is no decode step to hold against anything
    for side in (out.eager, out.compiled):
        decode_s = side.decode_p50_ms / 1000 if decoding and side.decode_p50_ms else None
        ttft_s = side.ttft_ms / 1000 if side.ttft_ms else None
        side.decode_mbu = peaks.utilization(out.gen_decode_bytes, decode_s, peak.bytes_per_s)
        side.decode_mbu_spec = peaks.utilization(out.gen_decode_bytes, decode_s, peak.spec_bytes_per_s)
        side.prefill_mfu = peaks.utilization(out.gen_prefill_flops, ttft_s, peak.flops_per_s)
        side.prefill_mfu_spec = peaks.utilization(out.gen_prefill_flops, ttft_s, peak.spec_flops_per_s)
