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


# The drafter formats by `architectures` (SGLang 0.5.23's names): z-lab DFlash, DFlash2 (a candidate selector, and
# often grouped dynamic convolutions) and DSpark (a Markov head; its query block starts drafting at the anchor's row).
FORMATS = {
    "DFlashDraftModel": "dflash",
    "DFlash2DraftModel": "dflash2",
    "DFlash2BeamDraftModel": "dflash2",
    "MiniMaxDFlash2DraftModel": "dflash2",
    "DSparkDraftModel": "dspark",
    "Qwen3DSparkModel": "dspark",
    "LingDSparkModel": "dspark",
}
MARKOV_HEADS = ("vanilla", "gated", "rnn")
# a target's bundled DSpark draft (SGLang's DeepSeek-V4 path), not a drafter checkpoint of its own
BUNDLED_DSPARK = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")


def draft_format(cfg: dict) -> str:
    """dflash, dflash2 or dspark from a drafter's config.json (architectures, then the keys that must agree with it);
    anything else a PairError naming what is not supported."""
    arch = cfg.get("architectures") or ["DFlashDraftModel"]  # z-lab's early configs had none
    known = [FORMATS[a] for a in arch if a in FORMATS]
    if len(arch) != 1 or not known:
        raise PairError(f"drafter architectures {arch}: supported are one of {sorted(FORMATS)}")
    fmt = known[0]
    dcfg = draft_section(cfg)
    unsupported = {
        "projector_type": dcfg.get("projector_type") not in (None, "", "linear"),
        "attention_sink_bias": bool(dcfg.get("attention_sink_bias")),
        "attention_value_scale": dcfg.get("attention_value_scale") is not None,
        "use_gemma_norm": bool(cfg.get("use_gemma_norm")),
        "hidden_act": cfg.get("hidden_act", "silu") != "silu",
        "quantization_config": "quantization_config" in cfg,
        "sample_from_anchor: false": cfg.get("sample_from_anchor", True) is False,
        "bundled dspark_* keys": any(k in cfg for k in BUNDLED_DSPARK),
    }
    found = [k for k, on in unsupported.items() if on]
    if found:
        raise PairError(f"drafter ({arch[0]}) uses {', '.join(found)}: not supported")
    for a, b in (("conv_kernel_size", "conv_group_size"), ("selector_rank", "selector_top_k")):
        if bool(dcfg.get(a)) != bool(dcfg.get(b)):
            raise PairError(f"drafter dflash_config sets one of {a} and {b}: both or neither")
    if (fmt == "dflash2") != bool(dcfg.get("selector_rank")):
        raise PairError(f"drafter {arch[0]}: a candidate selector (selector_rank) is what makes a DFlash2 drafter")
    if (fmt == "dspark") != bool(markov_setting(cfg, "markov_rank")):
        raise PairError(f"drafter {arch[0]}: a Markov head (markov_rank > 0) is what makes a DSpark drafter")
    return fmt


def draft_section(cfg: dict) -> dict:
    """The drafter's own config section: dflash_config, with a DSpark checkpoint's dspark_config over it."""
    return {**(cfg.get("dflash_config") or {}), **(cfg.get("dspark_config") or {})}


def markov_setting(cfg: dict, name: str):
    """A DSpark setting where SGLang 0.5.23 looks first: dspark_config, dflash_config, text_config, the top level.
    The top level must agree with a nested value (SGLang's model reads the top level, its parser the nested one)."""
    nested = next((c[name] for c in (cfg.get("dspark_config"), cfg.get("dflash_config"), cfg.get("text_config"))
                   if c and c.get(name) is not None), None)  # fmt: skip
    top = cfg.get(name)
    if nested is not None and top is not None and nested != top:
        raise PairError(f"drafter {name}: {nested!r} nested, {top!r} at the top level")
    return nested if nested is not None else top


@dataclass(frozen=True)
class DraftConfig:
    """A DFlash-family drafter: Qwen3-style layers whose K/V also come from `hidden_norm(fc(concat of the target's
    tapped hidden states))`, in one of the `FORMATS`. `block_size` is the query block's length ([anchor, MASK...]);
    `num_depths` the draft tokens one pass gives (block_size - 1; DSpark drafts from the anchor's row too)."""

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
    format: str = "dflash"
    conv_kernel_size: int = 0  # DFlash2 (or DFlash + conv): grouped dynamic convolutions around each sublayer
    conv_group_size: int = 0
    selector_rank: int = 0  # DFlash2's candidate selector
    selector_top_k: int = 0
    markov_rank: int = 0  # DSpark's Markov head
    markov_head_type: str | None = None
    confidence_head: bool = False  # DSpark's (loaded, not used for drafting)
    confidence_with_markov: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def num_depths(self) -> int:
        return self.block_size if self.format == "dspark" else self.block_size - 1

    @classmethod
    def from_dict(cls, cfg: dict) -> DraftConfig:
        fmt = draft_format(cfg)
        dcfg = draft_section(cfg)
        get = lambda name, default=None: dcfg.get(name, cfg.get(name, default))  # noqa: E731
        layer_ids = get("target_layer_ids")
        if not layer_ids:
            raise PairError("drafter config has no dflash_config.target_layer_ids")
        mask_token_id = markov_setting(cfg, "mask_token_id") if fmt == "dspark" else get("mask_token_id")
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
            block_size=int(get("block_size", 7 if fmt == "dspark" else 16)),
            layer_types=types,
            sliding_window=window if "sliding_attention" in types else None,
            causal=causal,
            input_embedding_scale=float(get("input_embedding_scale", 1.0)),
            # DSpark's logits are the LM head's as they are (SGLang 0.5.23 applies neither there)
            output_multiplier=1.0 if fmt == "dspark" else float(get("output_multiplier", 1.0)),
            final_logit_softcapping=float(softcap) if softcap and fmt != "dspark" else None,
            format=fmt,
            **heads(cfg, dcfg, fmt, cfg["hidden_size"]),
        )


def heads(cfg: dict, dcfg: dict, fmt: str, hidden_size: int) -> dict:
    """DraftConfig's fields of the DFlash2 and DSpark heads, checked."""
    out = dict(conv_kernel_size=int(dcfg.get("conv_kernel_size") or 0), conv_group_size=int(dcfg.get("conv_group_size") or 0))
    if out["conv_kernel_size"] and (out["conv_kernel_size"] < 1 or hidden_size % out["conv_group_size"]):
        raise PairError(f"drafter conv_group_size {out['conv_group_size']} must divide hidden_size {hidden_size}")
    if fmt == "dflash2":
        out.update(selector_rank=int(dcfg["selector_rank"]), selector_top_k=int(dcfg["selector_top_k"]))
    if fmt == "dspark":
        kind = str(markov_setting(cfg, "markov_head_type") or "").lower()
        if kind not in MARKOV_HEADS:
            raise PairError(f"drafter markov_head_type {kind or None!r}: supported are {', '.join(MARKOV_HEADS)}")
        rank = int(markov_setting(cfg, "markov_rank"))
        confidence = markov_setting(cfg, "enable_confidence_head") is not None  # SGLang checks presence only
        with_markov = cfg.get("confidence_head_with_markov", rank > 0)
        out.update(markov_rank=rank, markov_head_type=kind, confidence_head=confidence, confidence_with_markov=bool(with_markov))
    return out


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
    if draft.num_depths < 1:
        raise PairError(f"drafter block_size {draft.block_size} drafts no token (one anchor + at least one draft token)")
    if not 0 <= draft.mask_token_id < target.vocab_size:
        raise PairError(f"drafter mask_token_id {draft.mask_token_id} is outside the target vocabulary of {target.vocab_size}")


def target_dims(cfg: dict):
    """hidden_size, vocab_size, num_hidden_layers of any Hugging Face target config, for `check_pair`."""
    from types import SimpleNamespace

    cfg = text_part(cfg)
    return SimpleNamespace(
        hidden_size=cfg["hidden_size"], vocab_size=cfg["vocab_size"], num_hidden_layers=cfg["num_hidden_layers"]
    )
