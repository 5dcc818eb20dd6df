"""`workload=hf`: any Hugging Face `transformers` model class by name, built offline from its config
class with random weights (never the hub), with the inputs its task needs and its own loss.

    python -m orchestrator workload=hf workload.model=LlamaForCausalLM workload.size=small \
        '+workload.config={num_key_value_heads: 2}'

The size preset sets the config's usual keys where the class has them (`tiny` fits a CPU test,
`small` and `base` a GPU, `default` is the config class's own defaults, the real model);
`workload.config` overrides any key of the config class. The task comes from the class name:
`*ForMaskedLM`, `*ForCausalLM` / `*LMHeadModel`, `*ForSequenceClassification`,
`*ForTokenClassification`, `*ForQuestionAnswering`, `*ForConditionalGeneration` (decoder inputs
from the labels), `*ForImageClassification` (pixel values), or a bare `*Model` (no loss: the
stated rule of `workloads.inputs.loss_of`). `train` passes labels and trains on the model's own
loss; `infer` passes none unless `workload.labels=true` (as PyTorch's harness does).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from orchestrator.config.schema import WorkloadConfig
from orchestrator.core.failures import ConfigError
from workloads.blocks import find_blocks
from workloads.inputs import Inputs, TaskLoss
from workloads.workload import Workload

# Keys each size sets where the config class has them (many classes map these names to their own
# through `attribute_map`: GPT-2's n_embd, T5's d_model...). `default`: the class's own defaults.
SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=1024, head_dim=16),
    "small": dict(layers=4, hidden=256, heads=4, kv_heads=2, ffn=1024, vocab=32000, head_dim=64),
    "base": dict(layers=12, hidden=768, heads=12, kv_heads=4, ffn=3072, vocab=32000, head_dim=64),
    "default": {},
}
TINY_EXTRA = {"max_position_embeddings": 128, "n_positions": 128, "image_size": 32, "patch_size": 8}
CONFIG_KEYS = {
    "layers": ("num_hidden_layers", "encoder_layers", "decoder_layers", "num_decoder_layers"),
    "hidden": ("hidden_size", "embedding_size", "word_embed_proj_dim"),
    "heads": ("num_attention_heads", "encoder_attention_heads", "decoder_attention_heads"),
    "kv_heads": ("num_key_value_heads",),
    "ffn": (
        "intermediate_size",
        "n_inner",
        "d_ff",
        "ffn_dim",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
        "hidden_dim",
    ),
    "vocab": ("vocab_size",),
    "head_dim": ("head_dim", "d_kv"),
}
# Samples and sequence length per task: a CPU test's for `tiny`; on a GPU, PyTorch's harness's
# (BERT-like 512, GPT-2-like 1024; images at the config's size).
SHAPES = {
    "tiny": (2, 32),
    "encoder": (16, 512),
    "causal_lm": (8, 1024),
    "seq2seq": (8, 512),
    "image": (32, None),
}
TASKS = (
    ("ForMaskedLM", "masked_lm"),
    ("ForCausalLM", "causal_lm"),
    ("LMHeadModel", "causal_lm"),
    ("ForSequenceClassification", "seq_cls"),
    ("ForTokenClassification", "token_cls"),
    ("ForQuestionAnswering", "qa"),
    ("ForConditionalGeneration", "seq2seq"),
    ("ForImageClassification", "image_cls"),
)


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub
    try:
        import transformers
    except ImportError:
        raise ConfigError("workload=hf needs transformers: pip install 'orchestrator[hf]'") from None
    return transformers


def model_class(name: str | None) -> type:
    """The transformers class of `workload.model`; an unknown name is one line with close matches."""
    import difflib

    transformers = _transformers()
    if not name:
        raise ConfigError(
            "workload=hf needs workload.model, a transformers model class (e.g. BertForMaskedLM)"
        )
    cls = getattr(transformers, name, None)
    if cls is None or not hasattr(cls, "config_class"):
        known = [n for n in dir(transformers) if n.endswith(("Model", "LM")) or "For" in n]
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"workload.model={name} is not a transformers model class{hint}")
    return cls


def task_of(cls: type, config: Any) -> str:
    for suffix, task in TASKS:
        if cls.__name__.endswith(suffix):
            return task
    return "image" if hasattr(config, "image_size") and not hasattr(config, "vocab_size") else "base"


def build_config(cfg: WorkloadConfig, cls: type) -> Any:
    """The model's config: the class's defaults, the size preset's keys it has, then the user's."""
    if cfg.size not in SIZES:
        raise ConfigError(
            f"workload.size={cfg.size!r} is not an hf preset; choose one of: {', '.join(SIZES)}"
        )
    config = cls.config_class()
    for name, value in SIZES[cfg.size].items():
        for key in CONFIG_KEYS[name]:
            if hasattr(config, key):
                setattr(config, key, value)
    for key, value in TINY_EXTRA.items() if cfg.size == "tiny" else ():
        if hasattr(config, key):
            setattr(config, key, value)
    for key, value in (cfg.config or {}).items():
        if not hasattr(config, key):
            raise ConfigError(
                f"workload.config.{key} is not a key of {type(config).__name__} "
                f"(e.g. {', '.join(sorted(k for k in config.to_dict() if not k.startswith('_'))[:12])})"
            )
        setattr(config, key, value)
    if hasattr(config, "use_cache"):
        config.use_cache = False  # one forward of a benchmark, not generation (as PyTorch's harness)
    if getattr(config, "pad_token_id", None) is None and hasattr(config, "vocab_size"):
        config.pad_token_id = 0  # sequence classification pools at the last non-pad token
    if (
        getattr(config, "is_encoder_decoder", False)
        and getattr(config, "decoder_start_token_id", None) is None
    ):
        config.decoder_start_token_id = config.pad_token_id or 0  # decoder inputs: the labels shifted right
    return config


def shape_of(cfg: WorkloadConfig, task: str) -> tuple[int, int | None]:
    """(batch, sequence length or image side) of the task at this size, unless the config sets them."""
    kind = "tiny" if cfg.size == "tiny" else (
        "image" if task in ("image_cls", "image") else "causal_lm" if task == "causal_lm"
        else "seq2seq" if task == "seq2seq" else "encoder"
    )  # fmt: skip
    batch, seq = SHAPES[kind]
    return cfg.batch_size or batch, cfg.seq_len or seq


def position_limit(model: torch.nn.Module) -> int | None:
    """The longest sequence a model whose position ids start past its padding index takes (RoBERTa's
    family: positions are counted from padding_idx + 1); None for the others."""
    for m in model.modules():
        emb, pad = getattr(m, "position_embeddings", None), getattr(m, "padding_idx", None)
        if isinstance(emb, torch.nn.Embedding) and isinstance(pad, int):
            return emb.num_embeddings - pad - 1
    return None


def make_inputs_fn(
    cfg: WorkloadConfig, config: Any, task: str, train: bool, device: torch.device, limit: int | None = None
):
    """The inputs of one step of this task: ids (and a mask of ones with `workload.attention_mask`),
    labels when training (or with `workload.labels=true`), pixel values for images; sequences no
    longer than the model's positions reach (`limit`)."""
    batch, seq = shape_of(cfg, task)
    if seq and limit:
        seq = min(seq, limit)
    labels = cfg.labels if cfg.labels is not None else train
    vocab = getattr(config, "vocab_size", None) or 2
    classes = getattr(config, "num_labels", 2)

    def make_inputs(seq_len: int | None = None) -> Inputs:
        if task in ("image_cls", "image"):
            side = config.image_size
            out: dict[str, torch.Tensor] = {
                "pixel_values": torch.randn(batch, config.num_channels, side, side, device=device)
            }
            if labels and task == "image_cls":
                out["labels"] = torch.randint(0, classes, (batch,), device=device)
            return out
        t = seq_len or seq
        out = {"input_ids": torch.randint(0, vocab, (batch, t), device=device)}
        if cfg.attention_mask:
            out["attention_mask"] = torch.ones(batch, t, dtype=torch.long, device=device)
        if task == "seq2seq" and not labels:  # the decoder's inputs, which labels would give it
            out["decoder_input_ids"] = torch.randint(0, vocab, (batch, t), device=device)
        if not labels or task == "base":
            return out
        if task in ("masked_lm", "seq2seq", "token_cls"):
            high = classes if task == "token_cls" else vocab
            out["labels"] = torch.randint(0, high, (batch, t), device=device)
        elif task == "causal_lm":
            out["labels"] = out["input_ids"].clone()  # the model shifts them itself
        elif task == "seq_cls":
            out["labels"] = torch.randint(0, classes, (batch,), device=device)
        elif task == "qa":
            out["start_positions"] = torch.randint(0, t, (batch,), device=device)
            out["end_positions"] = torch.randint(0, t, (batch,), device=device)
        return out

    return make_inputs, batch, seq


def build(cfg: WorkloadConfig, task: str, device: torch.device):
    cls = model_class(cfg.model)
    config = build_config(cfg, cls)
    kind = task_of(cls, config)
    with device:  # initialised where it runs
        inner = cls(config)
    train = task == "train"
    make_inputs, batch, seq = make_inputs_fn(cfg, config, kind, train, device, position_limit(inner))
    blocks, where = find_blocks(inner, cfg.blocks)
    model = TaskLoss(inner) if train else inner
    tokens = None if kind in ("image_cls", "image") else seq
    return Workload(model, make_inputs, batch, tokens, blocks, blocks_where=where)
