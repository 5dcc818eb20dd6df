"""A GPT-style decoder (nanoGPT's shape: pre-LayerNorm blocks, fused SDPA attention, tied embeddings)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from orchestrator.config.schema import WorkloadConfig
from workloads.blocks import find_blocks
from workloads.workload import Workload


@dataclass(frozen=True)
class GPTSize:
    """One size preset."""

    n_layer: int
    n_head: int
    n_embd: int
    vocab: int
    batch_size: int
    seq_len: int


PRESETS: dict[str, GPTSize] = {
    "tiny": GPTSize(2, 2, 64, 256, 8, 64),  # compiles in seconds on a CPU
    "small": GPTSize(4, 4, 128, 1024, 8, 128),
    "gpt2": GPTSize(12, 12, 768, 50304, 16, 1024),  # 124M
    "gpt2-medium": GPTSize(24, 16, 1024, 50304, 8, 1024),  # 350M
    "gpt2-large": GPTSize(36, 20, 1280, 50304, 8, 1024),  # 774M
    "gpt2-xl": GPTSize(48, 25, 1600, 50304, 4, 1024),  # 1.5B
    "2.7b": GPTSize(32, 32, 2560, 50304, 4, 1024),
    "6.7b": GPTSize(32, 32, 4096, 50304, 2, 1024),
}


GENERATE_POSITIONS = 2048  # `bench.task=generate`: positions of every preset (prompt + new tokens)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: torch.Tensor, cache=None, pos: torch.Tensor | None = None) -> torch.Tensor:
        """`cache` (workloads/kv_cache.py) and `pos`, the positions of x's tokens: attend to every
        cached position up to each token's own (generation); without them, causal over x."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            assert pos is not None, "a cache needs the positions of x"
            k, v = cache.update(k, v, pos)
            mask = pos[:, None] >= torch.arange(k.shape[2], device=x.device)[None, :]
            y = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), attn_mask=mask)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.out = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x: torch.Tensor, cache=None, pos: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), cache, pos)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """forward(idx) -> logits; forward(idx, targets) -> cross-entropy loss (computed inside, as nanoGPT)."""

    def __init__(self, size: GPTSize, max_seq: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(size.vocab, size.n_embd)
        self.wpe = nn.Embedding(max_seq, size.n_embd)
        self.blocks = nn.ModuleList(Block(size.n_embd, size.n_head) for _ in range(size.n_layer))
        self.ln_f = nn.LayerNorm(size.n_embd)
        self.lm_head = nn.Linear(size.n_embd, size.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("out.weight") or name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * size.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))

    def decode(self, idx: torch.Tensor, cache: list, pos: torch.Tensor) -> torch.Tensor:
        """Generation: idx's tokens at positions `pos` over one cache per block (workloads/kv_cache.py);
        the logits of the last position only, as a server keeps them."""
        x = self.wte(idx) + self.wpe(pos)
        for block, layer in zip(self.blocks, cache, strict=True):
            x = block(x, layer, pos)
        return self.lm_head(self.ln_f(x[:, -1]))


def build(cfg: WorkloadConfig, task: str, device: torch.device):
    size = PRESETS[cfg.size]  # known: check_workload ran before anything
    batch = cfg.batch_size or size.batch_size
    seq = cfg.seq_len or size.seq_len
    positions = GENERATE_POSITIONS if task == "generate" else 0  # room for a prompt and its tokens
    with device:  # initialised where it runs: a CPU init of billions of weights takes minutes
        model = GPT(size, max_seq=max([seq, *cfg.shapes, positions]))

    def make_inputs(seq_len: int | None = None) -> tuple[torch.Tensor, ...]:
        t = seq_len or seq
        idx = torch.randint(0, size.vocab, (batch, t + 1), device=device)
        inputs, targets = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
        return (inputs, targets) if task == "train" else (inputs,)

    blocks, where = find_blocks(model, cfg.blocks or "blocks")
    stream = phrase_stream(size.vocab, batch, seq, device)
    return Workload(model, make_inputs, batch, seq, blocks, stream, blocks_where=where)


PHRASE_LEN = 8  # tokens per phrase of the synthetic corpus


def phrase_stream(vocab: int, batch: int, seq: int, device: torch.device, seed: int = 0):
    """A learnable token stream: each sample is a run of phrases drawn at random from a fixed set of
    phrases (PHRASE_LEN random tokens each). Within a phrase every next token is determined, so the
    loss falls from ln(vocab) towards about ln(phrases) / PHRASE_LEN; step i's batch is fixed by i."""
    n_phrases = max(2, min(1024, vocab // 4))
    phrases = torch.randint(0, vocab, (n_phrases, PHRASE_LEN), generator=torch.Generator().manual_seed(seed))
    per_row = -(-(seq + 1) // PHRASE_LEN) + 1  # one phrase spare for the random start offset

    def stream(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step + 1)
        picks = torch.randint(0, n_phrases, (batch, per_row), generator=g)
        start = int(torch.randint(0, PHRASE_LEN, (), generator=g))
        idx = phrases[picks].view(batch, -1)[:, start : start + seq + 1].to(device)
        return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()

    return stream
