"""What DFLASH/DDTREE change in SGLang's memory plan, which sizes the KV cache from the memory left after the
target's weights (`ModelRunnerKVCacheMixin.profile_max_num_token`):

- the workers' drafter keeps its context K/V in a token pool at the target's KV slots (a drafter entry for every
  KV-cache token, read through req_to_token), so `draft_bytes`' per-token cost joins SGLang's cell size: the pools
  grow and shrink together, and a prefix-cache hit finds the drafter's context where the target's KV is;
- its weights (TP-sharded where its heads split, `draft_tp_size`) are loaded after that plan, so `reserve_gib`
  holds them back;
- with the tree-GDN verify, SGLang's per-node GDN verify states are allocated for one request, so the
  plan gets back what it reserves for the others: SGLang counts the drafter's weights itself and solves
  the GDN state slots jointly with that reservation, so the slots are planned as without it, then
  `one_slot_states_gib` is taken off;
- with SGLANG_DFLASH_WIDTHS, the narrower verify widths' CUDA graphs are captured after that plan too, so
  `tiers_gib` holds them back.

At Qwen3.6-27B with z-lab's 5-layer drafter in bf16, whole: 3.5 GB of weights, and 20 KiB per cached token beside
the target's 32 KiB at TP=2; sharded over the two GPUs, about half of both on each.
"""

from __future__ import annotations

import logging
import os

import torch

from .. import env
from ..models.config import DraftConfig, text_part
from .graph_memory import GRAPH_BUDGET_GIB, graph_sizes_within, verify_graph_token_bytes, verify_graphs_gib
from .names import DFLASH_CHAIN, resolved

logger = logging.getLogger(__name__)

DEFAULT_MAX_LEN = 8192


def draft_max_len(context_len: int) -> int:
    """Positions per request the drafter reads (its page table's width): min(context length, 8192), or
    SGLANG_DFLASH_DRAFT_MAX_LEN. It bounds a request's length, and sets how the drafter's attention splits the
    context (by this width, not by the actual lengths, so that it is CUDA-graph safe)."""
    return env.DRAFT_MAX_LEN.integer(min(context_len, DEFAULT_MAX_LEN))


def draft_tp_size(config: DraftConfig, tp_size: int) -> int:
    """Over how many ranks the workers shard the drafter (`models.tp_shard`): tp_size, or 1 (replicated) when its
    heads or MLP do not split or SGLANG_DFLASH_DRAFT_TP=0."""
    from ..models.tp_shard import shard_plan

    if tp_size == 1 or not env.DRAFT_TP.on() or shard_plan(config, tp_size) is not None:
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


def draft_cell_bytes(runner) -> int:
    """Bytes a target runner's KV-cache token adds for the drafter's context K/V (joins SGLang's cell size)."""
    args = resolved(runner.server_args)
    return draft_bytes(draft_config(args), runner.model_config.dtype, args.tp_size)[1]


def one_slot_states_gib(configurator) -> float:
    """0.5.23: GiB of the per-node GDN verify states the pool keeps for its one slot where our tree verify runs
    (mamba_cache_per_req x verify tokens; `KVCacheConfigurator` fields)."""
    args = resolved(configurator.server_args)
    per_req = configurator.mambaish_config.mamba2_cache_params.mamba_cache_per_req
    return per_req * args.speculative_num_draft_tokens / (1 << 30)


FLASHINFER_WORKSPACE = 384 << 20  # SGLang's SGLANG_FLASHINFER_WORKSPACE_SIZE default (0.5.11 and 0.5.23)


def tiers_gib(server_args, graph_sizes: list[int] | None, cut: bool = False) -> float:
    """GiB the verify-width tiers (SGLANG_DFLASH_WIDTHS, built by the worker after the KV cache is sized) keep: each
    narrower width's TARGET_VERIFY graphs at the captured batch sizes, as `graph_memory` estimates them (H100, 27B
    one-rank shapes, Triton attention, sizes 1 / 8 / 32, widths 1-16: 4.21 GiB estimated, 4.81 GiB taken), and with
    FlashInfer attention the workspace each width's backend allocates (SGLANG_FLASHINFER_WORKSPACE_SIZE). `cut`:
    graph_sizes are SGLang's, yet to be cut to the graphs' budget (0.5.23's, `server_args.fit_decode_graphs`). 0
    without tiers or graphs, and for a drafter whose head drafts (the tiers are off for it)."""
    from ..proposal import uses_heads
    from .server_args import load_config_dict
    from .width_control import parse_tiers

    args = resolved(server_args)
    nodes = int(args.speculative_num_draft_tokens)
    tiers = parse_tiers(env.WIDTHS.get(), nodes)
    if tiers is None or len(tiers) == 1 or not graph_sizes:
        return 0.0
    algo = "dflash" if args.speculative_algorithm == DFLASH_CHAIN else "ddtree"
    if args.tp_size == 1 and uses_heads(draft_config(args), algo):
        return 0.0
    target = text_part(load_config_dict(args.model_path, getattr(args, "revision", None)))
    token = verify_graph_token_bytes(target, args.tp_size)
    sizes = graph_sizes_within(graph_sizes, nodes, token, GRAPH_BUDGET_GIB) if cut else graph_sizes
    workspace = 0
    if args.attention_backend == "flashinfer":
        workspace = int(os.environ.get("SGLANG_FLASHINFER_WORKSPACE_SIZE", FLASHINFER_WORKSPACE))
    gib = verify_graphs_gib(sizes, sum(tiers[:-1]), token) + (len(tiers) - 1) * workspace / (1 << 30)
    logger.info("%s: the memory plan holds back an estimated %.2f GiB for the verify widths %s' graphs at batch sizes up "
                "to %d (%s).", args.speculative_algorithm, gib, list(tiers[:-1]), max(sizes), env.WIDTHS.name)  # fmt: skip
    return gib
