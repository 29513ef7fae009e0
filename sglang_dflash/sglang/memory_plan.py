"""What DFLASH/DDTREE change in SGLang's memory plan, which sizes the KV cache from the memory left after the
target's weights (`ModelRunnerKVCacheMixin.handle_max_mamba_cache`):

- the workers' drafter lives outside SGLang's pools and is loaded after that plan: its weights (not TP-sharded)
  and its context K/V cache (one dense row of `draft_max_len` positions per request slot, plus a scratch row).
  `reserve_gib` is held back for it, so that it fits beside the pools instead of running out of memory at
  start-up;
- with the tree-GDN verify, SGLang's per-node GDN verify states are allocated for one request
  (`tree_gdn_backend.patch_memory_pool`), so the plan gets back what it reserves for the others.
 At Qwen3.6-27B with z-lab's 5-layer
drafter in bf16: 3.5 GB of weights and 20 KiB per cached position (5.4 GB at 32 requests x 8192 positions).
"""

from __future__ import annotations

import os

import torch

from ..models.config import DraftConfig

ENV_MAX_LEN = "SGLANG_DFLASH_DRAFT_MAX_LEN"
DEFAULT_MAX_LEN = 8192


def draft_max_len(context_len: int) -> int:
    """Positions per request in the drafter's cache: min(context length, 8192), or SGLANG_DFLASH_DRAFT_MAX_LEN."""
    return int(os.environ.get(ENV_MAX_LEN, min(context_len, DEFAULT_MAX_LEN)))


def draft_bytes(config: DraftConfig, num_slots: int, max_len: int, dtype: torch.dtype) -> tuple[int, int]:
    """(weights, context cache) bytes of the drafter in dtype for num_slots request slots of max_len positions."""
    from ..models.dflash_draft import DFlashDrafter

    with torch.device("meta"):
        params = sum(p.numel() for p in DFlashDrafter(config).parameters())
    size = torch.empty((), dtype=dtype).element_size()
    per_position = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * size
    return params * size, (num_slots * max_len + 1) * per_position  # + the scratch entry


def reserve_gib(server_args, context_len: int, dtype: torch.dtype) -> float:
    """GiB the memory plan holds back for the drafter of a DFLASH/DDTREE server (max_running_requests slots)."""
    from .server_args import load_config_dict

    config = DraftConfig.from_dict(
        load_config_dict(server_args.speculative_draft_model_path, server_args.speculative_draft_model_revision)
    )
    weights, cache = draft_bytes(config, server_args.max_running_requests, draft_max_len(context_len), dtype)
    return (weights + cache) / (1 << 30)


def patch_kv_cache_mixin(module) -> None:
    """`hooks.patch_module` on sglang.srt.model_executor.model_runner_kv_cache_mixin, for DFLASH/DDTREE served by
    our workers: before the KV cache is sized, hold back the drafter (`reserve_gib`) and, with the tree-GDN verify,
    give back SGLang's reservation of per-node GDN states (mamba_cache_per_req x requests x verify tokens) but one
    request's: at 27B, TP=2, 33 nodes and 32 requests about 80 GB (more than an A6000 has)."""
    from .hooks import claim
    from .tree_gdn_backend import plugin_tree_verify
    from .worker import workers_enabled

    cls = module.ModelRunnerKVCacheMixin
    if not claim(cls):
        return
    original = cls.handle_max_mamba_cache

    def handle_max_mamba_cache(self, total_rest_memory):
        args = self.server_args
        if workers_enabled(args) and args.max_running_requests:
            total_rest_memory -= reserve_gib(args, self.model_config.context_len, self.model_config.dtype)
            if plugin_tree_verify(args):
                requests = args.max_running_requests // (self.dp_size if args.enable_dp_attention else 1)
                per_req = self.mambaish_config.mamba2_cache_params.mamba_cache_per_req
                total_rest_memory += per_req * (requests - 1) * args.speculative_num_draft_tokens / (1 << 30)
        return original(self, total_rest_memory)

    cls.handle_max_mamba_cache = handle_max_mamba_cache
