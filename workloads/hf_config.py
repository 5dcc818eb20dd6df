"""`workload=hf`'s model config: the config class's defaults, the size preset, then the user's keys;
each bad key or value one line, before anything runs.

The size preset sets the usual keys where the config (or a sub-config: CLIP's `text_config` and
`vision_config`) has them; `tiny` also shrinks positions and images to fit a CPU test. Special token
ids that a smaller vocabulary would leave outside it (Phi-3's pad id 32000, Whisper's 50256...) are
moved inside it: an embedding refuses an id past its end.
"""

from __future__ import annotations

import contextlib
import difflib
from typing import Any

from orchestrator.config.schema import WorkloadConfig
from orchestrator.core.failures import ConfigError

# Keys each size sets where the config class has them (many classes map these names to their own
# through `attribute_map`: GPT-2's n_embd, T5's d_model...). `default`: the class's own defaults.
SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=1024, head_dim=16),
    "small": dict(layers=4, hidden=256, heads=4, kv_heads=2, ffn=1024, vocab=32000, head_dim=64),
    "base": dict(layers=12, hidden=768, heads=12, kv_heads=4, ffn=3072, vocab=32000, head_dim=64),
    # Llama-3.2-1B's shape (1.24B parameters with its tied embeddings), for `+sweep=generate`
    "1b": dict(layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=128256, head_dim=64, tied=True),
    "default": {},
}
# `tiny` only: positions, images and audio frames a CPU test can afford (Whisper's encoder takes
# 2 x max_source_positions frames of audio features).
TINY_EXTRA = {
    "max_position_embeddings": 128,
    "n_positions": 128,
    "image_size": 32,
    "patch_size": 8,
    "max_source_positions": 32,
    "max_target_positions": 128,
    "num_mel_bins": 16,
}
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
    "tied": ("tie_word_embeddings",),
}
# Keys that hold a token id or an index, where 0 is a fine value.
ID_SUFFIXES = ("_id", "_ids", "_idx", "_index")


def sub_configs(config: Any) -> list[Any]:
    """The config and its nested model configs (CLIP's text and vision towers), outermost first."""
    return [config, *_nested(config).values()]


def _nested(config: Any) -> dict[str, Any]:
    """The nested model configs by the attribute that holds them (`text_config`, `vision_config`)."""
    from transformers import PretrainedConfig

    return {name: v for name, v in vars(config).items() if isinstance(v, PretrainedConfig)}


def _preset(size: str) -> list[tuple[str, Any]]:
    """Every config key the preset sets where a class has it, with its value (`tiny`'s extras last)."""
    keys = [(key, value) for name, value in SIZES[size].items() for key in CONFIG_KEYS[name]]
    return keys + (list(TINY_EXTRA.items()) if size == "tiny" else [])


def _apply_size(config: Any, size: str) -> None:
    for part in sub_configs(config):
        for key, value in _preset(size):
            # XLNet's max_position_embeddings (a tiny extra) raises on set: it has no limit to shrink
            with contextlib.suppress(*((NotImplementedError,) if key in TINY_EXTRA else ())):
                if hasattr(part, key):
                    setattr(part, key, value)


def _sized_kwargs(config: Any, size: str) -> dict[str, Any]:
    """The preset's keys as constructor arguments of the config class (a sub-config's as its dict), so
    that keys the class derives from them follow them (SigLIP's text `projection_size` is its
    `hidden_size` unless given: set afterwards, it kept 768 beside a hidden size of 64)."""
    kwargs: dict[str, Any] = {}
    for name, part in [(None, config), *_nested(config).items()]:
        values = {key: value for key, value in _preset(size) if key in part.to_dict()}
        values |= _ids_moved(part.to_dict(), values.get("vocab_size"))
        if name is None:
            kwargs |= values
        elif values:
            kwargs[name] = values
    return kwargs


def _check_user_key(config: Any, key: str, value: Any) -> None:
    """A key the config class has (else the closest names), and a count or size of at least 1 where
    the class's own default is one (`num_hidden_layers: -1` would build a model of no layers)."""
    if not hasattr(config, key):
        keys = [k for k in config.to_dict() if not k.startswith("_")]
        close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else f"e.g. {', '.join(sorted(keys)[:8])}"
        raise ConfigError(f"workload.config.{key} is not a key of {type(config).__name__}; {hint}")
    default = getattr(type(config)(), key, None)
    counts = isinstance(default, int) and not isinstance(default, bool) and default >= 1
    if counts and not key.endswith(ID_SUFFIXES):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(
                f"workload.config.{key}={value!r} is not valid; it must be an integer >= 1 "
                f"({type(config).__name__}'s default: {default})"
            )


def _ids_moved(keys: dict[str, Any], vocab: Any) -> dict[str, Any]:
    """Special token ids past the vocabulary (a preset shrank it), moved to its last entry."""
    if not isinstance(vocab, int) or vocab < 2:
        return {}
    moved: dict[str, Any] = {}
    for key, value in keys.items():
        if not key.endswith("token_id"):
            continue
        if isinstance(value, int) and value >= vocab:
            moved[key] = vocab - 1
        elif isinstance(value, list) and any(isinstance(v, int) and v >= vocab for v in value):
            moved[key] = [min(v, vocab - 1) for v in value]
    return moved


def _ids_inside_vocab(config: Any) -> None:
    """Special token ids past the vocabulary (a preset or the user shrank it) move to its last entries."""
    for part in sub_configs(config):
        keys = {k: getattr(part, k) for k in part.to_dict() if hasattr(part, k)}
        for key, value in _ids_moved(keys, getattr(part, "vocab_size", None)).items():
            setattr(part, key, value)


def build_config(cfg: WorkloadConfig, cls: type[Any]) -> Any:
    """The model's config: the class's defaults, the size preset's keys it has, then the user's."""
    if cfg.size not in SIZES:
        raise ConfigError(
            f"workload.size={cfg.size!r} is not an hf preset; choose one of: {', '.join(SIZES)}"
        )
    config = cls.config_class()
    with contextlib.suppress(TypeError, ValueError):  # a class that takes no such arguments: set below
        config = cls.config_class(**_sized_kwargs(config, cfg.size))
    _apply_size(config, cfg.size)
    for key, value in (cfg.config or {}).items():
        _check_user_key(config, key, value)
        setattr(config, key, value)
    _ids_inside_vocab(config)
    for part in sub_configs(config):
        if hasattr(part, "use_cache"):
            part.use_cache = False  # one forward of a benchmark, not generation (as PyTorch's harness)
    if getattr(config, "pad_token_id", None) is None and hasattr(config, "vocab_size"):
        config.pad_token_id = 0  # sequence classification pools at the last non-pad token
    if (
        getattr(config, "is_encoder_decoder", False)
        and getattr(config, "decoder_start_token_id", None) is None
    ):
        config.decoder_start_token_id = config.pad_token_id or 0  # decoder inputs: the labels shifted right
    return config
