"""Decode MBU and prefill MFU (job/phases/limits.py): the bytes a decode token reads and a prefill's FLOPs,
on real tiny transformers decoders against a hand count of their parameters and cache, and against
torch's own FLOP counter; a figure with no known peak stays null and says why."""

from __future__ import annotations

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from orchestrator.job.phases import limits, peaks
from workloads.decoding import decoder_of

BATCH, PROMPT, NEW = 2, 6, 4
L, H, HEADS, KV_HEADS, D, FFN, VOCAB = 2, 64, 4, 2, 16, 128, 256


def _llama(tied: bool) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        num_hidden_layers=L, hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        head_dim=D, intermediate_size=FFN, vocab_size=VOCAB, tie_word_embeddings=tied,
        max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def _filled(model: torch.nn.Module) -> tuple[object, list[torch.Tensor], int, int]:
    """A static cache after one prefill, its K and V tensors, and the decoder's attention shape."""
    decoder = decoder_of(model, "static", PROMPT + NEW, BATCH, torch.float32)
    cache = decoder.new_cache()
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT))
    with torch.no_grad():
        decoder.forward(ids, cache, torch.arange(PROMPT))
    return decoder, decoder.cache_tensors(cache), *decoder.attention_shape()


@pytest.mark.parametrize("tied", [False, True])
def test_a_decode_token_reads_every_weight_once_a_lookup_row_a_token_and_the_cache_to_its_position(tied):
    model = _llama(tied)
    decoder, cache, layers, width = _filled(model)
    shape = limits.served_shape(model, cache, BATCH, layers, width)
    # The hand count: per layer q and o (H x H), k and v (H x KV_HEADS*D), the MLP's three, two norms.
    per_layer = 2 * H * HEADS * D + 2 * H * KV_HEADS * D + 3 * H * FFN + 2 * H
    table = VOCAB * H
    # Untied, the input table is a lookup (a row a token) and the head a matmul; tied, one matrix read whole.
    params = L * per_layer + H + (table if tied else BATCH * H + table)
    assert shape.weight_bytes == 4 * params  # fp32
    assert shape.kv_bytes_per_position == 2 * L * BATCH * KV_HEADS * D * 4  # K and V, every layer
    assert (layers, width) == (L, HEADS * D) and shape.head_params == table
    # Averaged over a request's decode steps: step k attends PROMPT + k positions, k = 1 .. NEW - 1.
    steps = [shape.weight_bytes + shape.kv_bytes_per_position * (PROMPT + k) for k in range(1, NEW)]
    assert limits.mean_decode_bytes(shape, PROMPT, NEW) == pytest.approx(sum(steps) / len(steps))


def test_a_prefills_flops_are_torchs_own_count_with_causal_attentions_useful_half():
    """Every matmul and the head on the kept position agree with torch's counter. Attention: the counter
    counts SDPA as full (twice our causal half) where it has a formula for the op that ran, and not at
    all where it has none (the CPU's fused kernel)."""
    model = _llama(tied=False)
    decoder, cache, layers, width = _filled(model)
    shape = limits.served_shape(model, cache, BATCH, layers, width)
    heads = decoder.head_positions(PROMPT)
    assert heads == 1  # transformers keeps the last position's logits (logits_to_keep=1)
    ours = limits.prefill_flops(shape, BATCH, PROMPT, heads)
    attention = 2 * L * BATCH * PROMPT**2 * HEADS * D
    counter = FlopCounterMode(display=False)
    fresh = decoder.new_cache()
    with torch.no_grad(), counter:
        decoder.forward(torch.randint(0, VOCAB, (BATCH, PROMPT)), fresh, torch.arange(PROMPT))
    assert counter.get_total_flops() in (ours - attention, ours + attention)


def test_utilization_is_null_where_no_peak_is_known_and_the_basis_says_why():
    cpu = torch.device("cpu")
    known = peaks.peaks_of(cpu, "fp32", None)
    assert known.bytes_per_s is None and known.spec_bytes_per_s is None
    assert "no spec for CPUs" in str(known.bytes_basis)
    assert peaks.utilization(1e9, 0.01, known.bytes_per_s) is None
    measured = {"device": "cpu", "copy_tb_s": 0.02, "tflops": {"fp32": 0.5}}
    node = peaks.peaks_of(cpu, "fp32", measured)
    assert node.bytes_per_s == 0.02e12 and str(node.bytes_basis).startswith("measured: copy")
    assert node.spec_bytes_per_s is None  # measured here, still no datasheet for a CPU: never guessed
    assert peaks.utilization(1e9, 0.1, node.bytes_per_s) == pytest.approx(0.5)
