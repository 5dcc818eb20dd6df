"""What `bench.task=generate` needs of a decoder: a KV cache of either kind, and one forward over it.

A `Decoder` is built from a workload's model: the built-in GPT (its own caches, workloads/kv_cache.py)
or a transformers causal LM (its `StaticCache` / `DynamicCache`, called the way its installed version
names them: `cache` from transformers 5.2x, `past_key_values` before). `forward(ids, cache, pos)`
returns the logits of the last position only, as a server keeps them (`logits_to_keep=1`).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from orchestrator.core.failures import ConfigError
from workloads.kv_cache import DynamicKV, StaticKV


class Decoder:
    """A decoder model with its cache: `new_cache`, `reset` between requests, `forward`."""

    def __init__(self, model: nn.Module, kind: str, max_len: int, batch: int, dtype: torch.dtype) -> None:
        # the built-in GPT or a transformers model: their own attributes (blocks, config) read as they are
        self.model: Any = model
        self.kind, self.max_len, self.batch, self.dtype = kind, max_len, batch, dtype

    def new_cache(self) -> Any:
        raise NotImplementedError

    def reset(self, cache: Any) -> Any:
        """The cache for the next request: a static one zeroed in place (its addresses kept), a
        dynamic one new."""
        if self.kind != "static":
            return self.new_cache()
        self.zero(cache)
        return cache

    def zero(self, cache: Any) -> None:
        """A static cache emptied in place."""
        raise NotImplementedError

    def forward(self, ids: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def bytes(self, cache: Any) -> int:
        return sum(t.nbytes for t in self.cache_tensors(cache))

    def cache_tensors(self, cache: Any) -> list[torch.Tensor]:
        """Every layer's K and V tensors, (batch, heads, positions, head dim)."""
        raise NotImplementedError

    def attention_shape(self) -> tuple[int, int]:
        """(attention layers, query heads x head dim of one layer)."""
        raise NotImplementedError

    def head_positions(self, prompt_len: int) -> int:
        """Positions a prefill's LM head runs on: the last where the model keeps only its logits."""
        raise NotImplementedError

    def full(self, ids: torch.Tensor) -> torch.Tensor:
        """The last position's logits of a forward over `ids` without a cache (the cache's check)."""
        raise NotImplementedError


class GPTDecoder(Decoder):
    """The built-in GPT (workloads/gpt.py) over one StaticKV or DynamicKV per block."""

    def __init__(self, model: nn.Module, kind: str, max_len: int, batch: int, dtype: torch.dtype) -> None:
        super().__init__(model, kind, max_len, batch, dtype)
        first = self.model.blocks[0].attn
        self.heads, self.head_dim = first.n_head, self.model.wte.embedding_dim // first.n_head

    def new_cache(self) -> list:
        device = self.model.wte.weight.device
        if self.kind == "static":
            shape = (self.batch, self.heads, self.max_len, self.head_dim)
            return [StaticKV(*shape, self.dtype, device) for _ in self.model.blocks]
        return [DynamicKV() for _ in self.model.blocks]

    def zero(self, cache: list) -> None:
        for layer in cache:
            layer.reset()

    def forward(self, ids: torch.Tensor, cache: list, pos: torch.Tensor) -> torch.Tensor:
        return self.model.decode(ids, cache, pos)

    def cache_tensors(self, cache: list) -> list[torch.Tensor]:
        return [t for layer in cache for t in (layer.k, layer.v) if t is not None]

    def attention_shape(self) -> tuple[int, int]:
        return len(self.model.blocks), self.heads * self.head_dim

    def head_positions(self, prompt_len: int) -> int:
        return 1  # GPT.decode: the last position's logits

    def full(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids)[:, -1]


class HFDecoder(Decoder):
    """A transformers causal LM over its own StaticCache or DynamicCache."""

    def __init__(self, model: nn.Module, kind: str, max_len: int, batch: int, dtype: torch.dtype) -> None:
        super().__init__(model, kind, max_len, batch, dtype)
        params = inspect.signature(model.forward).parameters
        self.cache_key = "cache" if "cache" in params else "past_key_values"
        self.keep = "logits_to_keep" in params
        self.cache_position = "cache_position" in params

    def new_cache(self) -> Any:
        from transformers import DynamicCache, StaticCache

        if self.kind == "static":
            return StaticCache(config=self.model.config, max_cache_len=self.max_len)
        return DynamicCache(config=self.model.config)

    def zero(self, cache: Any) -> None:
        cache.reset()

    def forward(self, ids: torch.Tensor, cache: Any, pos: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {self.cache_key: cache, "use_cache": True}
        kwargs["position_ids"] = pos[None].expand(ids.shape[0], -1)
        if self.cache_position:
            kwargs["cache_position"] = pos
        if self.keep:
            kwargs["logits_to_keep"] = 1
        return self.model(input_ids=ids, **kwargs).logits[:, -1]

    def cache_tensors(self, cache: Any) -> list[torch.Tensor]:
        tensors = [
            getattr(layer, k, None) for layer in getattr(cache, "layers", []) for k in ("keys", "values")
        ]
        return [t for t in tensors if isinstance(t, torch.Tensor)]

    def attention_shape(self) -> tuple[int, int]:
        config = self.model.config.get_text_config()
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return config.num_hidden_layers, heads * head_dim

    def head_positions(self, prompt_len: int) -> int:
        return 1 if self.keep else prompt_len

    def full(self, ids: torch.Tensor) -> torch.Tensor:
        keep = {"logits_to_keep": 1} if self.keep else {}  # a batch of 64 x 1024 x 128k logits is 17 GB
        return self.model(input_ids=ids, use_cache=False, **keep).logits[:, -1]


def served_weights(model: nn.Module, dtype: torch.dtype) -> None:
    """The parameters in `dtype`, as servers load an LLM; buffers as they are (transformers' bf16
    load keeps RoPE's `inv_freq` in fp32, which `model.to` would round)."""
    for p in model.parameters():  # a tied weight is one parameter: it stays tied
        p.data = p.data.to(dtype)
    if any(p.is_cuda for p in model.parameters()):  # the freed fp32 blocks: out of the memory figures
        torch.cuda.empty_cache()


def decoder_of(model: nn.Module, kind: str, max_len: int, batch: int, dtype: torch.dtype) -> Decoder:
    """The decoder of a built-in GPT or a transformers causal LM (check_causal_lm); one ConfigError
    line otherwise."""
    if hasattr(model, "decode") and hasattr(model, "wpe"):
        return GPTDecoder(model, kind, max_len, batch, dtype)
    check_causal_lm(type(model), getattr(model, "config", None))
    return HFDecoder(model, kind, max_len, batch, dtype)


def check_causal_lm(cls: type[Any], config: Any) -> None:
    """A transformers class this task can drive: decoder-only, a causal LM; one ConfigError line otherwise."""
    name = cls.__name__
    # A seq2seq family's decoder-only head (BartForCausalLM) sets is_encoder_decoder false itself.
    if getattr(config, "is_encoder_decoder", False) and not _init_says(cls, "is_encoder_decoder = False"):
        raise ConfigError(
            f"bench.task=generate runs decoder-only models; workload.model={name} is an encoder-decoder "
            "(seq2seq generation is not measured yet)"
        )
    if config is None or not name.endswith(("ForCausalLM", "LMHeadModel")):
        raise ConfigError(
            f"bench.task=generate needs a causal LM; workload.model={name} is not one (choose a "
            "*ForCausalLM or *LMHeadModel class, e.g. LlamaForCausalLM, GPT2LMHeadModel)"
        )
    # Encoder families (BERT, RoBERTa, ...) have LM heads too, and are decoders only with is_decoder
    # set: else every position attends both ways. Their heads say so themselves (a warning in their
    # __init__, transformers 5.17 and 5.25); decoder-only configs may hold is_decoder false unread.
    if getattr(config, "is_decoder", None) is False and _init_says(cls, "as a standalone"):
        raise ConfigError(
            f"bench.task=generate runs decoder-only models; workload.model={name} is an encoder here "
            "(its config's is_decoder is false: attention looks both ways); add "
            "+workload.config.is_decoder=true to run it as a decoder"
        )


def _init_says(cls: type[Any], words: str) -> bool:
    """Whether the class's own __init__ holds `words`: what transformers itself says of the class (a
    BERT-family head warns a standalone user to set is_decoder; Bart's sets is_encoder_decoder)."""
    try:
        return words in inspect.getsource(cls.__init__)
    except (OSError, TypeError):  # no source to read: a compiled or built-in class
        return False


def _positions(config: Any) -> int | None:
    """The model's positions, or None where it has no limit (XLNet's reads -1)."""
    value = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return value if value and value > 0 else None


def check_generate(workload: Any, generate: Any) -> None:
    """Before anything runs: the model is a decoder this task can drive, and the prompt with its new
    tokens fits its positions; one ConfigError line otherwise."""
    from workloads import gpt

    total = generate.prompt_len + generate.new_tokens
    positions: int | None
    if workload.name == "gpt":
        positions, where = gpt.GENERATE_POSITIONS, "the built-in gpt's positions"
    else:
        from workloads import hf
        from workloads.hf_config import build_config

        cls = hf.model_class(workload.model)
        config = build_config(workload, cls)
        name = cls.__name__
        check_causal_lm(cls, config)
        positions = _positions(config)
        where = f"{name}'s max_position_embeddings at workload.size={workload.size}"
    if positions and total > positions:
        raise ConfigError(
            f"generate.prompt_len={generate.prompt_len} + generate.new_tokens={generate.new_tokens} "
            f"= {total} is past {where} ({positions}); shorten them"
        )
