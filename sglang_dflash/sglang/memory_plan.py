"""What DFLASH/DDTREE change in SGLang's memory plan, which sizes the KV cache from the memory left after the
target's weights (`ModelRunnerKVCacheMixin.profile_max_num_token`):

- the workers' drafter keeps its context K/V in a token pool at the target's KV slots (a drafter entry for every
  KV-cache token, read through req_to_token), so `draft_bytes`' per-token cost joins SGLang's cell size: the pools
  grow and shrink together, and a prefix-cache hit finds the drafter's context where the target's KV is;
- its weights (TP-sharded where its heads split, `draft_tp_size`) are loaded after that plan, so `reserve_gib`
  holds them back;
- with the tree-GDN verify, SGLang's per-node GDN verify states are allocated for one request
  (`tree_gdn_backend.patch_memory_pool`), so the plan gets back what it reserves for the others.

At Qwen3.6-27B with z-lab's 5-layer drafter in bf16, whole: 3.5 GB of weights, and 20 KiB per cached token beside
the target's 32 KiB at TP=2; sharded over the two GPUs, about half of both on each.
"""

from __future__ import annotations

import os

import torch

from ..models.config import DraftConfig

ENV_MAX_LEN = "SGLANG_DFLASH_DRAFT_MAX_LEN"
ENV_DRAFT_TP = "SGLANG_DFLASH_DRAFT_TP"
DEFAULT_MAX_LEN = 8192


def draft_max_len(context_len: int) -> int:
    """Positions per request the drafter reads (its page table's width): min(context length, 8192), or
    SGLANG_DFLASH_DRAFT_MAX_LEN. It bounds a request's length, and sets how the drafter's attention splits the
    context (by this width, not by the actual lengths, so that it is CUDA-graph safe)."""
    return int(os.environ.get(ENV_MAX_LEN, min(context_len, DEFAULT_MAX_LEN)))


def draft_tp_size(config: DraftConfig, tp_size: int) -> int:
    """Over how many ranks the workers shard the drafter (`models.tp_shard`): tp_size, or 1 (replicated) when its
    heads or MLP do not split or SGLANG_DFLASH_DRAFT_TP=0."""
    from ..models.tp_shard import shard_plan

    if tp_size == 1 or os.environ.get(ENV_DRAFT_TP, "1") == "0" or shard_plan(config, tp_size) is not None:
        return 1
    return tp_size


def draft_bytes(config: DraftConfig, dtype: torch.dtype, tp_size: int = 1) -> tuple[int, int]:
    """(weights, context K/V per cached token) bytes of the drafter in dtype, on each of tp_size ranks."""
    from ..models.dflash_draft import DFlashDrafter
    from ..models.tp_shard import shard_drafter

    world = draft_tp_size(config, tp_size)
    with torch.device("meta"):
        drafter = DFlashDrafter(config)
        shard_drafter(drafter, 0, world, lambda x: x)
    size = torch.empty((), dtype=dtype).element_size()
    params = sum(p.numel() for p in drafter.parameters())
    return params * size, 2 * config.num_hidden_layers * drafter.kv_heads * config.head_dim * size


def draft_config(server_args) -> DraftConfig:
    from .server_args import load_config_dict

    path, revision = server_args.speculative_draft_model_path, server_args.speculative_draft_model_revision
    return DraftConfig.from_dict(load_config_dict(path, revision))


def reserve_gib(server_args, dtype: torch.dtype) -> float:
    """GiB the memory plan holds back for the drafter's weights."""
    return draft_bytes(draft_config(server_args), dtype, server_args.tp_size)[0] / (1 << 30)


def patch_kv_cache_mixin(module) -> None:
    """`hooks.patch_module` on sglang.srt.model_executor.model_runner_kv_cache_mixin, for DFLASH/DDTREE served by
    our workers (the target's runner): every KV-cache token also pays for the drafter's context K/V
    (`get_cell_size_per_token`); before the KV cache is sized, the drafter's weights are held back and, with the
    tree-GDN verify, SGLang's reservation of per-node GDN states (mamba_cache_per_req x requests x verify
    tokens) is given back but for one request: at 27B, TP=2, 33 nodes and 32 requests about 80 GB."""
    from .hooks import claim
    from .tree_gdn_backend import plugin_tree_verify
    from .worker import workers_enabled

    cls = module.ModelRunnerKVCacheMixin
    if not claim(cls):
        return
    cell_size, mamba_cache = cls.get_cell_size_per_token, cls.handle_max_mamba_cache

    def get_cell_size_per_token(self, num_layers):
        size = cell_size(self, num_layers)
        if workers_enabled(self.server_args) and not self.is_draft_worker:
            size += draft_bytes(draft_config(self.server_args), self.model_config.dtype, self.server_args.tp_size)[1]
        return size

    def handle_max_mamba_cache(self, total_rest_memory):
        args = self.server_args
        if workers_enabled(args) and args.max_running_requests:
            total_rest_memory -= reserve_gib(args, self.model_config.dtype)
            if plugin_tree_verify(args):
                requests = args.max_running_requests // (self.dp_size if args.enable_dp_attention else 1)
                per_req = self.mambaish_config.mamba2_cache_params.mamba_cache_per_req
                total_rest_memory += per_req * (requests - 1) * args.speculative_num_draft_tokens / (1 << 30)
        return mamba_cache(self, total_rest_memory)

    cls.get_cell_size_per_token = get_cell_size_per_token
    cls.handle_max_mamba_cache = handle_max_mamba_cache
