"""Checkpoint configs: the Qwen3.5/3.6 target's text part, the z-lab DFlash drafter, and the pair check.

Framework-free (plain dicts in, frozen dataclasses out) so that the standalone engine and the
SGLang plugin parse, resolve and validate a pair in exactly one way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


class PairError(ValueError):
    """A target/drafter pair (or one checkpoint) that the engine cannot run; raised before any weight loads."""


def read_config(path: str | Path) -> dict:
    """config.json of a checkpoint directory (or the file itself)."""
    path = Path(path)
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise PairError(f"no config.json in {path}")
    return json.loads(file.read_text())


def text_part(cfg: dict) -> dict:
    """The text model's config: `text_config` of a Qwen3_5ForConditionalGeneration (with the top level's
    tie_word_embeddings and eos_token_id), else the config itself."""
    if "text_config" not in cfg:
        return cfg
    text = dict(cfg["text_config"])
    text["tie_word_embeddings"] = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    text.setdefault("eos_token_id", cfg.get("eos_token_id"))
    return text


@dataclass(frozen=True)
class TargetConfig:
    """The text model of a Qwen3.5/3.6 checkpoint (`Qwen3_5ForCausalLM` or the text part of
    `Qwen3_5ForConditionalGeneration`)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]  # "linear_attention" (Gated DeltaNet) or "full_attention"
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int  # H
    linear_num_value_heads: int  # HV
    linear_key_head_dim: int  # K
    linear_value_head_dim: int  # V
    linear_conv_kernel_dim: int
    rms_norm_eps: float
    rope_theta: float
    partial_rotary_factor: float
    tie_word_embeddings: bool
    eos_token_ids: tuple[int, ...] = ()

    @property
    def num_hidden_layers(self) -> int:
        return len(self.layer_types)

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def from_dict(cls, cfg: dict) -> TargetConfig:
        cfg = text_part(cfg)
        if cfg.get("model_type") not in (None, "qwen3_5_text", "qwen3_5", "qwen3_next", "qwen3_5_moe_text"):
            raise PairError(f"target model_type {cfg.get('model_type')!r} is not a Qwen3.5/3.6 hybrid model")
        if any(k in cfg for k in ("num_experts", "moe_intermediate_size")):
            raise PairError("mixture-of-experts Qwen3.5 targets are not supported by the standalone engine")
        n = cfg["num_hidden_layers"]
        types = cfg.get("layer_types") or [
            "full_attention" if (i + 1) % cfg.get("full_attention_interval", 4) == 0 else "linear_attention" for i in range(n)
        ]
        if len(types) != n or set(types) - {"linear_attention", "full_attention"}:
            raise PairError(f"layer_types must list {n} of linear_attention/full_attention, got {types}")
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        if rope.get("rope_type", "default") != "default":
            raise PairError(f"rope_type {rope['rope_type']!r} is not supported (only default RoPE)")
        eos = cfg.get("eos_token_id")
        eos = () if eos is None else (eos,) if isinstance(eos, int) else tuple(eos)
        return cls(
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            layer_types=tuple(types),
            num_attention_heads=cfg["num_attention_heads"],
            num_key_value_heads=cfg["num_key_value_heads"],
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
            linear_num_key_heads=cfg["linear_num_key_heads"],
            linear_num_value_heads=cfg["linear_num_value_heads"],
            linear_key_head_dim=cfg["linear_key_head_dim"],
            linear_value_head_dim=cfg["linear_value_head_dim"],
            linear_conv_kernel_dim=cfg.get("linear_conv_kernel_dim", 4),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope.get("rope_theta", cfg.get("rope_theta", 10000.0)),
            partial_rotary_factor=rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25)),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            eos_token_ids=eos,
        )


@dataclass(frozen=True)
class DraftConfig:
    """A z-lab DFlash drafter (`DFlashDraftModel`): Qwen3-style layers whose K/V also come from
    `hidden_norm(fc(concat of the target's tapped hidden states))`."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    block_size: int
    layer_types: tuple[str, ...]  # "full_attention" (non-causal block) or "sliding_attention"
    sliding_window: int | None
    causal: tuple[bool, ...]  # per layer: causal inside the block (z-lab: sliding layers are causal)
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, cfg: dict) -> DraftConfig:
        arch = cfg.get("architectures") or []
        if arch and "DFlashDraftModel" not in arch:
            raise PairError(f"drafter architectures {arch} is not DFlashDraftModel (z-lab DFlash format)")
        dcfg = cfg.get("dflash_config") or {}
        get = lambda name, default=None: dcfg.get(name, cfg.get(name, default))  # noqa: E731
        layer_ids = get("target_layer_ids")
        if not layer_ids:
            raise PairError("drafter config has no dflash_config.target_layer_ids")
        mask_token_id = get("mask_token_id")
        if mask_token_id is None:
            raise PairError("drafter config has no dflash_config.mask_token_id")
        n = cfg["num_hidden_layers"]
        types = tuple(cfg.get("layer_types") or ["full_attention"] * n)
        if len(types) != n or set(types) - {"full_attention", "sliding_attention"}:
            raise PairError(f"drafter layer_types must list {n} of full_attention/sliding_attention, got {list(types)}")
        window = cfg.get("sliding_window")
        if "sliding_attention" in types and not window:
            raise PairError("drafter has sliding_attention layers but no sliding_window")
        is_causal = cfg.get("is_causal")
        causal = tuple(t == "sliding_attention" if is_causal is None else bool(is_causal) for t in types)
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        if rope.get("rope_type", "default") != "default":
            raise PairError(f"drafter rope_type {rope['rope_type']!r} is not supported (only default RoPE)")
        softcap = get("final_logit_softcapping")
        return cls(
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=n,
            num_attention_heads=cfg["num_attention_heads"],
            num_key_value_heads=cfg["num_key_value_heads"],
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
            vocab_size=cfg["vocab_size"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope.get("rope_theta", cfg.get("rope_theta", 10000.0)),
            attention_bias=cfg.get("attention_bias", False),
            target_layer_ids=tuple(int(i) for i in layer_ids),
            mask_token_id=int(mask_token_id),
            block_size=int(get("block_size", 16)),
            layer_types=types,
            sliding_window=window if "sliding_attention" in types else None,
            causal=causal,
            input_embedding_scale=float(get("input_embedding_scale", 1.0)),
            output_multiplier=float(get("output_multiplier", 1.0)),
            final_logit_softcapping=float(softcap) if softcap else None,
        )


def default_target_layer_ids(num_target_layers: int, num_taps: int) -> list[int]:
    """z-lab's choice: `num_taps` layers spread evenly from layer 1 to layer N - 3 ([1, 16, 31, 46, 61]
    for N = 64, [1, 9, 17, 25, 33] for N = 36). Targets too shallow for that spread the taps over all
    their layers, distinct while num_taps <= N."""
    if num_taps < 1 or num_target_layers < 1:
        raise PairError(f"need >= 1 tapped layer of >= 1 target layer, got {num_taps} of {num_target_layers}")
    start, end = 1, num_target_layers - 3
    if end - start + 1 < num_taps:
        start, end = 0, num_target_layers - 1
    if num_taps == 1:
        return [start]
    return [round(start + i * (end - start) / (num_taps - 1)) for i in range(num_taps)]


def check_pair(target: TargetConfig, draft: DraftConfig) -> None:
    """Raise PairError naming the mismatch if this drafter cannot run on this target (any object with
    hidden_size, vocab_size and num_hidden_layers, e.g. `target_dims` of a config the engine does not run)."""
    if draft.hidden_size != target.hidden_size:
        raise PairError(f"hidden size: drafter {draft.hidden_size} != target {target.hidden_size}")
    if draft.vocab_size != target.vocab_size:
        raise PairError(f"vocab size: drafter {draft.vocab_size} != target {target.vocab_size}")
    bad = [i for i in draft.target_layer_ids if not 0 <= i < target.num_hidden_layers]
    if bad:
        raise PairError(
            f"drafter target_layer_ids {list(draft.target_layer_ids)}: {bad} out of range for a "
            f"{target.num_hidden_layers}-layer target (layer id l = output of decoder layer l)"
        )
    if draft.block_size < 2:
        raise PairError(f"drafter block_size must be >= 2 (one anchor + at least one draft token), got {draft.block_size}")
    if not 0 <= draft.mask_token_id < target.vocab_size:
        raise PairError(f"drafter mask_token_id {draft.mask_token_id} is outside the target vocabulary of {target.vocab_size}")


def target_dims(cfg: dict):
    """hidden_size, vocab_size, num_hidden_layers of any Hugging Face target config, for `check_pair`."""
    from types import SimpleNamespace

    cfg = text_part(cfg)
    return SimpleNamespace(
        hidden_size=cfg["hidden_size"], vocab_size=cfg["vocab_size"], num_hidden_layers=cfg["num_hidden_layers"]
    )
