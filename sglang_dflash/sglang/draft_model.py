"""The z-lab DFlash drafter on SGLang's layers (`DFlashDraftModel`, tensor-parallel attention and MLP).

Config semantics come from `sglang_dflash.models.config.DraftConfig` (the same parsing as the
standalone engine's drafter): full-attention layers see their whole block (ENCODER_ONLY),
sliding layers the block causally within `sliding_window` (DECODER + window). The drafter has no
embedding or LM head: the worker embeds the block with the target's embedding and takes logits
from the target's LM head. Context K/V come from `project_target_hidden` (fc + hidden_norm of
the tapped target states) through each layer's k/v projections (`context_kv`).

Tested on CPU: construction at TP=1, weight loading (z-lab names, stacked q/k/v and gate/up,
refusal of missing, unknown or mis-shaped tensors) and the context-K/V path against the plain
torch drafter. `forward` runs only inside SGLang's ForwardBatch machinery and is not exercised
yet (the workers are the next step).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import torch
from sglang.srt.distributed import get_tensor_model_parallel_world_size
from sglang.srt.layers.layernorm import RMSNorm
from sglang.srt.layers.linear import QKVParallelLinear, ReplicatedLinear, RowParallelLinear
from sglang.srt.layers.radix_attention import AttentionType, RadixAttention
from sglang.srt.layers.rotary_embedding import get_rope
from sglang.srt.models.qwen2 import Qwen2MLP
from torch import nn

from ..models.config import DraftConfig, PairError


def draft_config(hf_config) -> DraftConfig:
    """Our parsed view of the drafter's Hugging Face config object (as SGLang loads it). transformers'
    Qwen3Config drops `sliding_window` unless `use_sliding_window` is set; then the checkpoint's own
    config.json supplies it."""
    cfg = hf_config.to_dict()
    raw = Path(str(getattr(hf_config, "_name_or_path", ""))) / "config.json"
    if "sliding_attention" in (cfg.get("layer_types") or []) and not cfg.get("sliding_window") and raw.is_file():
        cfg["sliding_window"] = json.loads(raw.read_text()).get("sliding_window")
    c = DraftConfig.from_dict(cfg)
    if c.format != "dflash" or c.conv_kernel_size:
        raise PairError(f"the SGLang-layer drafter is z-lab DFlash without convolutions, not {c.format} ({c.conv_kernel_size})")
    return c


class DFlashAttention(nn.Module):
    def __init__(self, c: DraftConfig, layer_id: int, max_position: int, quant_config=None, prefix: str = ""):
        super().__init__()
        tp = get_tensor_model_parallel_world_size()
        if c.num_attention_heads % tp:
            raise ValueError(f"drafter: {c.num_attention_heads} attention heads do not split over TP={tp}")
        if c.num_key_value_heads % tp and tp % c.num_key_value_heads:
            raise ValueError(f"drafter: {c.num_key_value_heads} KV heads neither split over nor replicate across TP={tp}")
        self.head_dim = c.head_dim
        self.num_heads = c.num_attention_heads // tp
        self.num_kv_heads = max(1, c.num_key_value_heads // tp)
        self.qkv_proj = QKVParallelLinear(
            c.hidden_size, c.head_dim, c.num_attention_heads, c.num_key_value_heads,
            bias=c.attention_bias, quant_config=quant_config, prefix=f"{prefix}.qkv_proj",
        )  # fmt: skip
        self.o_proj = RowParallelLinear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=c.attention_bias,
                                        quant_config=quant_config, prefix=f"{prefix}.o_proj")  # fmt: skip
        self.q_norm = RMSNorm(c.head_dim, eps=c.rms_norm_eps)
        self.k_norm = RMSNorm(c.head_dim, eps=c.rms_norm_eps)
        self.rotary_emb = get_rope(c.head_dim, rotary_dim=c.head_dim, max_position=max_position, base=c.rope_theta)
        sliding = c.layer_types[layer_id] == "sliding_attention"
        self.attn = RadixAttention(
            self.num_heads, c.head_dim, c.head_dim**-0.5, self.num_kv_heads, layer_id=layer_id,
            sliding_window_size=c.sliding_window if sliding else -1,
            attn_type=AttentionType.DECODER if c.causal[layer_id] else AttentionType.ENCODER_ONLY,
            quant_config=quant_config, prefix=f"{prefix}.attn",
        )  # fmt: skip

    def _split(self, qkv: torch.Tensor):
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return qkv.split([q_size, kv_size, kv_size], dim=-1)

    def _norm_heads(self, norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
        return norm(x.reshape(-1, self.head_dim)).view(x.shape)

    def context_kv(self, features: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K/V of context tokens from their projected target features [T, D] at positions [T]:
        the k/v rows of the fused projection only, k-normed and rotated ([T, kv_heads * head_dim] each)."""
        _, k, v = self._split(self.qkv_proj(features)[0])
        k = self._norm_heads(self.k_norm, k)
        _, k = self.rotary_emb(positions, k.clone(), k)  # the rotation needs a query: a copy of k, discarded
        return k, v

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, forward_batch) -> torch.Tensor:
        q, k, v = self._split(self.qkv_proj(hidden_states)[0])
        q, k = self._norm_heads(self.q_norm, q), self._norm_heads(self.k_norm, k)
        q, k = self.rotary_emb(positions, q, k)
        return self.o_proj(self.attn(q, k, v, forward_batch))[0]


class DFlashDecoderLayer(nn.Module):
    def __init__(self, c: DraftConfig, layer_id: int, max_position: int, quant_config=None, prefix: str = ""):
        super().__init__()
        self.self_attn = DFlashAttention(c, layer_id, max_position, quant_config, f"{prefix}.self_attn")
        self.mlp = Qwen2MLP(c.hidden_size, c.intermediate_size, "silu", quant_config=quant_config, prefix=f"{prefix}.mlp")
        self.input_layernorm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, positions, hidden_states, forward_batch):
        hidden_states = hidden_states + self.self_attn(positions, self.input_layernorm(hidden_states), forward_batch)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class DFlashDraftModel(nn.Module):
    """SGLang model class for `architectures: ["DFlashDraftModel"]` (z-lab format)."""

    STACKED = (("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k"), ("qkv_proj", "v_proj", "v"),
               ("gate_up_proj", "gate_proj", 0), ("gate_up_proj", "up_proj", 1))  # fmt: skip

    def __init__(self, config, quant_config=None, prefix: str = ""):
        super().__init__()
        self.config = config
        c = self.draft = draft_config(config)
        max_position = getattr(config, "max_position_embeddings", 1 << 17)
        self.layers = nn.ModuleList(
            DFlashDecoderLayer(c, i, max_position, quant_config, f"{prefix}layers.{i}") for i in range(c.num_hidden_layers)
        )
        self.norm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.fc = ReplicatedLinear(len(c.target_layer_ids) * c.hidden_size, c.hidden_size, bias=False, prefix=f"{prefix}fc")
        self.hidden_norm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def project_target_hidden(self, taps: torch.Tensor) -> torch.Tensor:
        """[T, n_taps * D] tapped target states -> [T, D] context features (shared by every layer)."""
        return self.hidden_norm(self.fc(taps)[0])

    def forward(self, input_ids, positions, forward_batch, input_embeds: torch.Tensor | None = None):
        """Block hidden states after the final norm; input_embeds are the target's embeddings of the block."""
        if input_embeds is None:
            raise ValueError("DFlashDraftModel takes the block's embeddings from the target (input_embeds)")
        h = input_embeds * self.draft.input_embedding_scale
        for layer in self.layers:
            h = layer(positions, h, forward_batch)
        return self.norm(h)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.named_parameters())
        loaded = set()
        for name, tensor in weights:
            name = name.removeprefix("model.")
            for fused, part, shard in self.STACKED:
                if f".{part}." in name:
                    target = name.replace(f".{part}.", f".{fused}.")
                    if target not in params:
                        raise ValueError(f"DFlash drafter checkpoint: unexpected tensor {name}")
                    param = params[target]
                    param.weight_loader(param, tensor, shard)
                    loaded.add(target)
                    break
            else:
                if name not in params:
                    raise ValueError(f"DFlash drafter checkpoint: unexpected tensor {name}")
                param = params[name]
                loader = getattr(param, "weight_loader", None)
                if loader is not None:
                    loader(param, tensor)
                elif param.shape != tensor.shape:
                    raise ValueError(
                        f"DFlash drafter checkpoint: {name} has shape {list(tensor.shape)}, expected {list(param.shape)}"
                    )
                else:
                    param.data.copy_(tensor)
                loaded.add(name)
        missing = sorted(set(params) - loaded)
        if missing:
            raise ValueError(f"DFlash drafter checkpoint: missing tensors {missing[:8]}")


EntryClass = DFlashDraftModel

__all__ = ["DFlashDraftModel", "EntryClass"]
