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

import inspect
import os
from typing import Any, cast

import torch

from orchestrator.config.schema import WorkloadConfig
from orchestrator.core.failures import ConfigError
from workloads.blocks import find_blocks
from workloads.hf_config import build_config, sub_configs
from workloads.inputs import Inputs, TaskLoss
from workloads.workload import Workload

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


def model_class(name: str | None) -> type[Any]:
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
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.75)  # near misses only
        hint = f"did you mean {', '.join(close)}?" if close else f"e.g. {', '.join(EXAMPLES)}"
        raise ConfigError(f"workload.model={name} is not a transformers model class; {hint}")
    return cls


EXAMPLES = ("BertForMaskedLM", "LlamaForCausalLM", "T5ForConditionalGeneration", "ViTForImageClassification")


def task_of(cls: type[Any], config: Any) -> str:
    for suffix, task in TASKS:
        if cls.__name__.endswith(suffix):
            return task
    return "image" if hasattr(config, "image_size") and not hasattr(config, "vocab_size") else "base"


# What a model's forward takes, as far as this module can make it.
MADE = "token ids, pixel values (images), ids with pixel values (CLIP-like), Whisper's audio features"


def input_kind(cls: type[Any], config: Any) -> str:
    """`ids`, `pixels`, `ids+pixels` (a text and a vision tower: CLIP, SigLIP) or `audio` (Whisper's
    log-mel features); one ConfigError line for a model whose inputs are not made here yet."""
    params = inspect.signature(cls.forward).parameters
    main = getattr(cls, "main_input_name", "input_ids")
    needs = f"workload.model={cls.__name__} needs"
    if any(hasattr(part, k) for part in sub_configs(config) for k in ("image_token_id", "image_token_index")):
        raise ConfigError(
            f"{needs} image placeholder tokens in its ids matched to its vision features, which "
            f"workload=hf does not make yet (it makes {MADE})"
        )
    if main == "input_features":
        if not (hasattr(config, "num_mel_bins") and hasattr(config, "max_source_positions")):
            raise ConfigError(
                f"{needs} audio features of a layout workload=hf does not make yet (it makes {MADE})"
            )
        kind = "audio"
    elif main not in ("input_ids", "pixel_values"):
        raise ConfigError(
            f"{needs} `{main}` as its input, which workload=hf does not make yet (it makes {MADE})"
        )
    elif "pixel_values" in params and "input_ids" in params:
        kind = "ids+pixels"
    else:
        kind = "pixels" if main == "pixel_values" else "ids"
    made = {"ids": {"input_ids"}, "pixels": {"pixel_values"}, "audio": {"input_features"}}.get(
        kind, {"input_ids", "pixel_values"}
    )
    required = [
        n
        for n, p in params.items()
        if n != "self"
        and p.default is inspect.Parameter.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if missing := [n for n in required if n not in made]:
        raise ConfigError(
            f"{needs} {', '.join(missing)}, which workload=hf does not make yet (it makes {MADE})"
        )
    return kind


def check(cfg: WorkloadConfig) -> None:
    """Before anything runs: the class, its config with the user's keys, and inputs it can be given."""
    cls = model_class(cfg.model)
    input_kind(cls, build_config(cfg, cls))


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


def _first(config: Any, key: str, default: Any = None) -> Any:
    """A key of the config or of its first sub-config that has it (CLIP's vision image size)."""
    return next((getattr(p, key) for p in sub_configs(config) if getattr(p, key, None) is not None), default)


def make_inputs_fn(
    cfg: WorkloadConfig,
    config: Any,
    task: str,
    train: bool,
    device: torch.device,
    limit: int | None = None,
    kind: str = "ids",
    return_loss: bool = False,
):
    """The inputs of one step of this task: ids (and a mask of ones with `workload.attention_mask`),
    pixel values for images (beside the ids for a text-and-vision model), Whisper's log-mel features
    (2 x max_source_positions frames); labels when training (or with `workload.labels=true`); the
    decoder's ids for an encoder-decoder without labels; sequences no longer than the model's
    positions reach (`limit`; its max_position_embeddings or n_positions, CLIP's text tower's 77 among
    them; a decoder's max_target_positions)."""
    batch, seq = shape_of(cfg, task)
    positions = "max_target_positions" if kind == "audio" else "max_position_embeddings"
    reach = [limit, _first(config, positions), _first(config, "n_positions")]
    if seq and (reach := [r for r in reach if isinstance(r, int) and r > 0]):
        seq = min(seq, *reach)
    labels = cfg.labels if cfg.labels is not None else train
    vocab = _first(config, "vocab_size", 2)
    classes = getattr(config, "num_labels", 2)
    pixels = kind in ("pixels", "ids+pixels")
    side, channels = _first(config, "image_size"), _first(config, "num_channels", 3)
    encoder_decoder = getattr(config, "is_encoder_decoder", False)

    def make_inputs(seq_len: int | None = None) -> Inputs:
        out: dict[str, Any] = {}
        if pixels:
            out["pixel_values"] = torch.randn(batch, channels, side, side, device=device)
        if kind == "pixels":
            if labels and task == "image_cls":
                out["labels"] = torch.randint(0, classes, (batch,), device=device)
            return out
        t = cast(int, seq_len or seq)  # a model of token ids or audio: its shape has a length
        if kind == "audio":
            frames = 2 * config.max_source_positions  # the encoder's two convolutions halve it
            out["input_features"] = torch.randn(batch, config.num_mel_bins, frames, device=device)
        else:
            out["input_ids"] = torch.randint(0, vocab, (batch, t), device=device)
        if cfg.attention_mask and kind != "audio":
            out["attention_mask"] = torch.ones(batch, t, dtype=torch.long, device=device)
        if return_loss and train:
            out["return_loss"] = True  # a text-and-vision model's contrastive loss (CLIP)
        if encoder_decoder and not (labels and task == "seq2seq"):  # what labels would give the decoder
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
    kind = input_kind(cls, config)
    task_kind = task_of(cls, config)
    return_loss = "return_loss" in inspect.signature(cls.forward).parameters
    with device:  # initialised where it runs
        inner = cls(config)
    train = task == "train"
    limit = position_limit(inner)
    make_inputs, batch, seq = make_inputs_fn(cfg, config, task_kind, train, device, limit, kind, return_loss)
    blocks, where = find_blocks(inner, cfg.blocks)
    model = TaskLoss(inner) if train else inner
    tokens = None if kind == "pixels" else seq
    return Workload(model, make_inputs, batch, tokens, blocks, blocks_where=where)
