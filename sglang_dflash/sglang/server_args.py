"""Server arguments for DFLASH_CHAIN and DDTREE: defaults, and refusals with a message before serving starts.

Runs inside `ServerArgs._handle_speculative_decoding` (the plugin's hook), before SGLang's own
handling, on the ServerArgs object itself. Defaults: DFLASH_CHAIN verifies the drafter's whole block
(`--speculative-num-draft-tokens` = block size, a chain); DDTREE takes its node count from
`--speculative-num-draft-tokens` (default 32: the root and a budget of 31), tree depth up to
block size - 1. Ours keep SGLang's scheduler choice (overlap unless --disable-overlap-schedule).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..kernels.tree_build import MAX_TRITON_BUDGET as MAX_BUDGET
from ..models.config import DraftConfig, PairError, check_pair, target_dims, text_part
from .graph_memory import GRAPH_BUDGET_GIB, graph_sizes_within, verify_graph_token_bytes, verify_graphs_gib
from .names import DFLASH_CHAIN

logger = logging.getLogger(__name__)


class ServerArgsError(ValueError):
    """A server argument our algorithms cannot take, named with what is accepted (raised before serving starts)."""


DDTREE_DEFAULT_NODES = 32  # budget 31: whole blocks of the tree GDN verify, no root pass (`verify_blocks`)
# > 1 puts SGLang's attention backends in tree-mask mode. The scheduler also reserves max(steps x topk, nodes) KV slots
# a request and step from it (its decode estimate, which retracts below it): DDTREE takes steps = nodes // 2.
DDTREE_TOPK = 2


def load_config_dict(path: str, revision: str | None = None) -> dict:
    """config.json of a local checkpoint directory or of a Hugging Face Hub repository."""
    local = Path(path)
    if local.is_dir():
        file = local / "config.json"
        if not file.is_file():
            raise ServerArgsError(f"{path} has no config.json")
        return json.loads(file.read_text())
    from huggingface_hub import hf_hub_download

    return json.loads(Path(hf_hub_download(path, "config.json", revision=revision)).read_text())


def hybrid_target(cfg: dict) -> bool:
    """A target config with linear-attention (Gated DeltaNet) layers: SGLang's mamba scheduler strategies apply."""
    text = text_part(cfg)
    return "linear_attention" in (text.get("layer_types") or []) or "linear_num_value_heads" in text


def resolve_radix_cache(args) -> None:
    """The hybrid models' --mamba-scheduler-strategy for DFLASH / DDTREE, in place, from SGLang's own radix-cache
    switch; run before SGLang's model-specific checks (which refuse speculative decoding with the radix cache under
    no_buffer, and extra_buffer without the radix cache), and again with the other speculative arguments (idempotent).

    The radix cache is on unless --disable-radix-cache (prefix hits, second turns and sampled batches with the
    workers are lossless at TP=1 and TP=2 on H200s: benchmarks/RESULTS.md). With it, a hybrid
    target takes extra_buffer, whose states tracked every --mamba-track-interval tokens are what a hit restores
    (the workers write them: `TreeVerifyWorkspace.track`, or SGLang's per-node path); without it, no_buffer."""
    name = str(args.speculative_algorithm).upper()
    strategy = getattr(args, "mamba_scheduler_strategy", None)
    if args.disable_radix_cache and strategy == "extra_buffer":
        logger.warning("%s: --mamba-scheduler-strategy no_buffer (extra_buffer needs the radix cache, which is off).", name)
        args.mamba_scheduler_strategy = "no_buffer"
    elif (
        not args.disable_radix_cache
        and strategy in ("auto", "no_buffer")
        and hybrid_target(load_config_dict(args.model_path, getattr(args, "revision", None)))
    ):
        logger.warning(
            "%s: --mamba-scheduler-strategy extra_buffer (with the radix cache, the GDN states to restore a prefix from "
            "are tracked every --mamba-track-interval tokens; --disable-radix-cache for no_buffer).", name,
        )  # fmt: skip
        args.mamba_scheduler_strategy = "extra_buffer"


def verify_steps(name: str, nodes: int) -> int:
    """SGLang's speculative_num_steps for our algorithm `name` verifying `nodes` nodes: DFLASH_CHAIN its drafts; DDTREE
    nodes // 2, so that with topk 2 the scheduler's max(steps x topk, nodes) reservation stays the verify's; at least
    1 (a verify of the root alone)."""
    return max(1, nodes - 1 if name == DFLASH_CHAIN else nodes // 2)


def verify_nodes(name: str, nodes: int | None, block: int) -> int:
    """--speculative-num-draft-tokens for our algorithm `name` with a drafter of `block` tokens: the default where None,
    else checked (ValueError naming the accepted range)."""
    if name == DFLASH_CHAIN:
        nodes = block if nodes is None else nodes
        if not 2 <= nodes <= block:
            raise ServerArgsError(
                f"{name} verifies a chain of at most the drafter's block size ({block}) tokens, anchor included: "
                f"--speculative-num-draft-tokens must be in [2, {block}], got {nodes}"
            )
        return nodes
    nodes = DDTREE_DEFAULT_NODES if nodes is None else nodes
    if not 2 <= nodes <= MAX_BUDGET + 1:
        raise ServerArgsError(
            f"DDTREE needs --speculative-num-draft-tokens >= 2 (the root and a budget >= 1) and <= {MAX_BUDGET + 1}, got {nodes}"
        )
    return nodes


def draft_config(args) -> DraftConfig:
    """The drafter's config, from --speculative-draft-model-path (and its revision) of server arguments `args`."""
    return DraftConfig.from_dict(load_config_dict(args.speculative_draft_model_path, args.speculative_draft_model_revision))


def tree_depth(args) -> int:
    """The deepest node a verified tree of resolved server arguments `args` can hold: min(nodes - 1, the drafter's
    depths). Not speculative_num_steps, which spec v2 sizes for its KV reservation."""
    return min(int(args.speculative_num_draft_tokens) - 1, draft_config(args).num_depths)


def graph_batch_sizes(args, sizes: list[int] | None = None) -> list[int] | None:
    """The batch sizes SGLang will capture TARGET_VERIFY graphs at: `sizes` (by default 0.5.11's, resolved by the
    time the speculative arguments are; 0.5.23 resolves its own later: `fit_decode_graphs`), at most
    --max-running-requests as SGLang captures them; None where graphs are off or no list is known yet."""
    sizes = getattr(args, "cuda_graph_bs", None) if sizes is None else sizes
    if args.disable_cuda_graph or not sizes:
        return None
    return [bs for bs in sizes if args.max_running_requests is None or bs <= args.max_running_requests]


# Set on ServerArgs by the plugin before SGLang fills in its default graph sizes (0.5.11): whether the user gave
# --cuda-graph-bs or --cuda-graph-max-bs. Absent: taken as given.
USER_GRAPH_SIZES = "_sglang_dflash_user_graph_sizes"


def fitted_graph_sizes(sizes: list[int], user_gave: bool, name: str, nodes: int, target: dict, tp_size: int,
                       flag: str) -> list[int] | None:  # fmt: skip
    """The batch sizes to capture instead of `sizes` where their verify graphs would keep more than SGLang holds back
    for a speculative algorithm's graphs (`graph_memory.GRAPH_BUDGET_GIB`): SGLang's default sizes cut to the smallest
    that fit (a batch past the largest runs without a graph), with one line; None to keep them: they fit, or the user
    gave them (then a warning with the `flag` value that fits)."""
    token = verify_graph_token_bytes(target, tp_size)
    gib = verify_graphs_gib(sizes, nodes, token)
    if gib <= GRAPH_BUDGET_GIB:
        return None
    fit = graph_sizes_within(sizes, nodes, token, GRAPH_BUDGET_GIB)
    cost = f"{token / 1e6:.1f} MB a verified token, {nodes} a request"
    if user_gave:
        logger.warning("%s: CUDA graphs at %d batch sizes up to %d would keep an estimated %.1f GiB for the verify (%s), "
                       "beyond the ~%.0f GiB SGLang holds back for them; %s %d keeps them near %.1f GiB (README).",
                       name, len(sizes), max(sizes), gib, cost, GRAPH_BUDGET_GIB, flag, max(fit),
                       verify_graphs_gib(fit, nodes, token))  # fmt: skip
        return None
    logger.warning("%s: CUDA graphs at batch sizes up to %d, not SGLang's default %d: the verify graphs of its %d sizes "
                   "would keep an estimated %.1f GiB (%s), these %.1f GiB, within the ~%.0f GiB SGLang holds back for "
                   "them; larger batches run without a graph. %s to choose (README).", name, max(fit), max(sizes),
                   len(sizes), gib, cost, verify_graphs_gib(fit, nodes, token), GRAPH_BUDGET_GIB, flag)  # fmt: skip
    return fit


def fit_graph_memory(args, name: str, nodes: int, target: dict) -> None:
    """0.5.11, at resolution: `fitted_graph_sizes` of its resolved sizes, into --cuda-graph-bs / --cuda-graph-max-bs."""
    sizes = graph_batch_sizes(args)
    fit = sizes and fitted_graph_sizes(sizes, getattr(args, USER_GRAPH_SIZES, True), name, nodes, target, args.tp_size,
                                       "--cuda-graph-max-bs")  # fmt: skip
    if fit:
        args.cuda_graph_bs, args.cuda_graph_max_bs = fit, max(fit)


def decode_graph_sizes(args, decode) -> tuple[list[int] | None, bool]:
    """0.5.23: `graph_batch_sizes` of its decode graph config `decode` (resolved after our arguments), and whether the
    user gave them (its `_cuda_graph_config_locked` (phase, key) pairs on the resolved arguments `args`)."""
    locked = getattr(args, "_cuda_graph_config_locked", set())
    return graph_batch_sizes(args, decode.bs), bool({("decode", "bs"), ("decode", "max_bs")} & set(locked))


def fit_decode_graphs(args, decode, name: str) -> None:
    """0.5.23: `fitted_graph_sizes` of `decode_graph_sizes`, into its decode graph config `decode` (`bs`, `max_bs`; as
    its paged-experts path cuts them), before the target's graphs are captured."""
    sizes, user_gave = decode_graph_sizes(args, decode)
    if not sizes:
        return
    target = text_part(load_config_dict(args.model_path, getattr(args, "revision", None)))
    nodes = int(args.speculative_num_draft_tokens)
    fit = fitted_graph_sizes(sizes, user_gave, name, nodes, target, args.tp_size, "--cuda-graph-max-bs-decode")
    if fit:
        decode.bs, decode.max_bs = fit, max(fit)


def resolve_speculative_args(args) -> None:
    """Fill in and check the speculative fields of ServerArgs `args` for DFLASH / DDTREE, in place. The scheduler maps
    max(steps x topk, nodes) KV slots per request and step, so DDTREE takes the smallest tree-mode topk (2) and
    steps = nodes // 2; the trees' depth is not steps (`tree_depth`)."""
    name = args.speculative_algorithm.upper()
    args.speculative_algorithm = name
    if not args.speculative_draft_model_path:
        raise ServerArgsError(
            f"--speculative-algorithm {name} needs --speculative-draft-model-path: a DFlash drafter in the z-lab "
            "format (e.g. z-lab/Qwen3.6-27B-DFlash)"
        )
    try:
        draft, target = draft_config(args), load_config_dict(args.model_path, args.revision)
        check_pair(target_dims(target), draft)
    except (PairError, KeyError) as e:
        raise ServerArgsError(f"{name}: drafter {args.speculative_draft_model_path} cannot run on {args.model_path}: {e}") from e

    refused = {
        # 0.5.23 turns --enable-dp-attention into --attn-dp-size before this runs
        "--enable-dp-attention": args.enable_dp_attention or getattr(args, "attn_dp_size", 1) > 1,
        "--pp-size > 1": args.pp_size > 1,
        "--enable-multi-layer-eagle": getattr(args, "enable_multi_layer_eagle", False),
    }
    for flag, on in refused.items():
        if on:
            raise ServerArgsError(f"--speculative-algorithm {name} does not support {flag}")

    block = draft.num_depths + 1  # the longest chain, its root included
    nodes = verify_nodes(name, args.speculative_num_draft_tokens, block)
    steps, topk = verify_steps(name, nodes), 1 if name == DFLASH_CHAIN else DDTREE_TOPK
    if name != DFLASH_CHAIN and args.page_size not in (None, 1):
        raise ServerArgsError(
            f"DDTREE needs --page-size 1 (accepted tree nodes are not contiguous in the KV cache), got {args.page_size}"
        )
    for flag, given, wanted in (("--speculative-num-steps", args.speculative_num_steps, steps),
                                ("--speculative-eagle-topk", args.speculative_eagle_topk, topk)):  # fmt: skip
        if given is not None and given != wanted:
            raise ServerArgsError(f"{flag} is set by {name} from the drafter ({wanted}); got {given}: leave it out")
    args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens = steps, topk, nodes

    if getattr(args, "mamba_scheduler_strategy", None) == "extra_buffer" and args.mamba_track_interval < nodes:
        raise ServerArgsError(
            f"--mamba-track-interval ({args.mamba_track_interval}) must be >= --speculative-num-draft-tokens ({nodes})"
        )
    resolve_radix_cache(args)
    if args.enable_mixed_chunk:
        logger.warning("%s: mixed chunked prefill disabled.", name)
        args.enable_mixed_chunk = False
    for flag in ("disable_piecewise_cuda_graph", "disable_prefill_cuda_graph"):  # 0.5.11's name, 0.5.23's
        if not getattr(args, flag, True):  # on by default for speculative decoding
            logger.warning("%s: prefill (piecewise) CUDA graphs disabled (the drafter's taps are read from the target's "
                           "layers).", name)  # fmt: skip
            setattr(args, flag, True)
    if args.max_running_requests is None:
        args.max_running_requests = 48
        logger.warning("%s: --max-running-requests defaults to 48; set it to override.", name)
    fit_graph_memory(args, name, nodes, text_part(target))
    logger.info("%s: drafter block %d, budget %d (%d verify tokens with the root), depth <= %d, taps %s", name, block,
                nodes - 1, nodes, steps, list(draft.target_layer_ids))  # fmt: skip
