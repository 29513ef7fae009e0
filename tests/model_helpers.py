"""Random tiny Qwen3.5 hybrid targets (transformers' own implementation) saved as checkpoints, for engine tests."""

from __future__ import annotations

import math

import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig


def tiny_target_config(
    layer_types=("linear_attention", "full_attention"),
    vocab=97,
    hidden=48,
    heads=(4, 2),
    head_dim=16,
    gdn_heads=(2, 4),
    gdn_dims=(8, 12),
    intermediate=80,
    rotary=0.5,
    tie=False,
) -> Qwen3_5TextConfig:
    return Qwen3_5TextConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=len(layer_types),
        layer_types=list(layer_types),
        num_attention_heads=heads[0],
        num_key_value_heads=heads[1],
        head_dim=head_dim,
        linear_num_key_heads=gdn_heads[0],
        linear_num_value_heads=gdn_heads[1],
        linear_key_head_dim=gdn_dims[0],
        linear_value_head_dim=gdn_dims[1],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": rotary},
        tie_word_embeddings=tie,
        eos_token_id=None,
        pad_token_id=None,
    )


@torch.no_grad()
def randomize_(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights with O(1) activations and peaked logits (transformers' 0.02 init gives near-ties everywhere)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        rnd = torch.randn(p.shape, generator=gen)
        if name.endswith("A_log"):
            p.copy_(torch.log(torch.rand(p.shape, generator=gen) * 15 + 1))
        elif name.endswith("dt_bias"):
            p.copy_(rnd * 0.5)
        elif "linear_attn.norm" in name:
            p.copy_(1 + 0.2 * rnd)
        elif "norm" in name:
            p.copy_(0.2 * rnd)
        elif "embed" in name:
            p.copy_(rnd)
        elif "conv1d" in name:
            p.copy_(rnd * 0.5)
        else:
            p.copy_(rnd * 1.5 / math.sqrt(p.shape[-1]))
    return model


def save_tiny_target(path, config: Qwen3_5TextConfig, seed: int = 0) -> Qwen3_5ForCausalLM:
    torch.manual_seed(seed)
    model = randomize_(Qwen3_5ForCausalLM(config).float().eval(), seed)
    model.save_pretrained(path)
    return model
