"""Our tree kernels in SGLang's GDN backend for the DFLASH_CHAIN / DDTREE workers' TARGET_VERIFY.

SGLang verifies the Gated DeltaNet layers node by node, writing a full state per node into
`intermediate_ssm` / `intermediate_conv_window`, and `update_mamba_state_after_mtp_verify` then copies
the accepted node's back. For DFLASH_CHAIN and DDTREE, the verify of
each GDN layer runs `kernels.tree_causal_conv1d` and `kernels.tree_gdn_verify` instead: outputs for
every node, the pools untouched, no per-node state (so SGLang's per-node buffers are allocated for one
request slot only). After acceptance the worker calls
`TreeVerifyWorkspace.commit`: `tree_conv_commit` / `tree_gdn_commit` of every GDN layer, one launch
each. Layouts are SGLang's: conv state [S, D, W - 1], SSM state [S, HV, V, K] float32, mixed_qkv rows
[q | k | v] per token, requests packed N tokens apart.

CUDA graphs. The verify forward is captured once per padded batch size, so:
- the trees' parent pointers live in one static buffer per captured batch size, allocated before
  capture (`install`) and written by the worker before each verify (`set_parents`); padding rows keep
  `padding_tree` (a chain as deep as the trees may be, the rest children of the root) and GDN slot -1
  (zero state read, never committed);
- the first GDN layer of a forward derives the ancestor mask, the GDN verify's tables and the conv windows
  from that buffer inside the graph, and later layers reuse them; which GDN verify kernel runs
  (`kernels.tree_gdn.gather_tables`) depends on the batch size, the node count and the depth bound only;
- what the commit needs (each layer's pre-conv input and kernel context) is recorded per (batch size,
  captured or not), so the commit after a replay reads the tensors that replay wrote.

Full-attention layers: their TARGET_VERIFY runs `kernels.tree_attention` instead of the server's attention backend,
over the prefix in SGLang's KV pool through req_to_token and the nodes through the ancestor mask of the same parents
(the one the forward's first GDN layer made). SGLANG_DFLASH_TREE_ATTENTION=1 / 0 turns it on / off; by default
(`attention_default`) it is on where it was measured faster than the server's backend: on Hopper against SGLang's
flashinfer (its custom-mask prefill, SGLang's pick for trees: 1.5x slower at 64 nodes over 4096 tokens, 2.2x at
8 x 64) and triton backends (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import logging
from collections import Counter

import torch
from torch import Tensor

from .. import env
from ..kernels import device as gpu
from ..kernels import tree_causal_conv1d, tree_conv_commit, tree_gdn_commit, tree_gdn_verify
from ..kernels.layer_table import LayerTable
from ..kernels.tree_attention import ancestor_bits, tree_attention
from ..kernels.tree_build import ancestors
from ..kernels.tree_conv import conv_windows
from ..kernels.tree_gdn import fused_nodes, stack_contexts, uses_gather, verify_blocks, verify_step_inputs
from ..kernels.tree_gdn.tree_gdn import context_tables
from .names import resolved

logger = logging.getLogger(__name__)

_workspace: TreeVerifyWorkspace | None = None  # the active one: the verify width of the step (`activate`)
_workspaces: dict[int, TreeVerifyWorkspace] = {}  # by verify width (nodes)


def attention_switch() -> bool | None:
    """The full-attention layers' verify through `kernels.tree_attention` too:
    SGLANG_DFLASH_TREE_ATTENTION=1 on, 0 off; unset (or "auto"): None, `attention_default` decides."""
    value = env.TREE_ATTENTION.get()
    return None if value == "auto" else value == "1"


MEASURED_BACKENDS = ("FlashInferAttnBackend", "TritonAttnBackend")  # SGLang's, slower than ours on an H200


def attention_default(full_attn_backend, device) -> bool:
    """On where the tree attention was measured faster than the server's full-attention backend: compute capability
    9.x (an H200) with SGLang's flashinfer or triton backend. Off where not measured: other backends (fa3, SGLang's
    pick on Hopper for DFLASH's chains, takes no tree mask and was not timed), other GPUs (an A6000 runs a build of the
    kernel with 32-key tiles)."""
    cap = gpu.capability(torch.device(device))
    return cap is not None and cap[0] == 9 and type(full_attn_backend).__name__ in MEASURED_BACKENDS


def attention_serves(layer, kv_pool, q: Tensor) -> bool:
    """Whether `TreeVerifyWorkspace.attention` computes what SGLang's backends would for this layer: plain softmax
    attention (no logit cap, sliding window or cross attention), K and V of one head dim, a KV pool in q's dtype
    (not an fp8 cache)."""
    return (
        not layer.logit_cap
        and layer.sliding_window_size in (None, -1)
        and not layer.is_cross_attention
        and layer.v_head_dim == layer.head_dim
        and getattr(kv_pool, "dtype", None) == q.dtype
    )


def forward_pools(forward_batch, full_attn_backend):
    """(req_to_token_pool, token_to_kv_pool) of a forward: on the batch up to SGLang 0.5.11, on the attention backend
    from 0.5.23 (its ForwardBatch no longer carries them)."""
    if hasattr(forward_batch, "token_to_kv_pool"):
        return forward_batch.req_to_token_pool, forward_batch.token_to_kv_pool
    return full_attn_backend.req_to_token_pool, full_attn_backend.token_to_kv_pool


def workspace() -> TreeVerifyWorkspace | None:
    """The active workspace, once `install` ran (DFLASH_CHAIN / DDTREE)."""
    return _workspace


def activate(num_nodes: int) -> TreeVerifyWorkspace:
    """Make the workspace of verify width `num_nodes` (installed) the active one: the next verify's."""
    global _workspace
    _workspace = _workspaces[num_nodes]
    return _workspace


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def padding_tree(num_nodes: int, max_depth: int, device=None) -> Tensor:
    """Parents long [num_nodes] of a tree no deeper than max_depth (>= 1): a chain of max_depth + 1 nodes, the rest
    children of the root. The tree of graph padding rows, and of every row at capture; a chain for DFLASH."""
    i = torch.arange(num_nodes, device=device)
    return torch.where(i <= max_depth, i - 1, 0)


class TreeVerifyWorkspace:
    """Static parents per batch size, the step's tree tables, and each GDN layer's verify record. max_depth: a bound
    on the trees' depth (DFLASH: num_nodes - 1, a chain; DDTREE: the drafter's block size - 1)."""

    def __init__(self, num_nodes: int, batch_sizes, device, max_depth: int | None = None, attention: bool | None = False):
        self.num_nodes = num_nodes
        self.device = device
        self.attention_on = attention  # the full-attention layers' verify too (`attention`); None: `attention_for`
        self.max_depth = num_nodes - 1 if max_depth is None else min(max_depth, num_nodes - 1)
        padding = padding_tree(num_nodes, max(self.max_depth, 1), device)
        self.parents = {bs: padding.repeat(bs, 1) for bs in sorted(set(batch_sizes))}
        # bs -> (GDN slots, the GDN verify's per-step inputs, conv windows)
        self.tables: dict[int, tuple[Tensor, dict, Tensor]] = {}
        self.masks: dict[int, Tensor] = {}  # bs -> the step's ancestor mask, made by the first GDN layer
        self.attention_words: dict[int, Tensor] = {}  # bs -> the step's ancestor mask as `ancestor_bits`
        self.records: dict[tuple[int, bool], dict[int, tuple[Tensor, object]]] = {}
        self.forwards: Counter[tuple[int, bool]] = Counter()  # verify forwards seen per (rows, captured)
        self.commit_tables: dict[int, tuple] = {}  # graph batch size -> (its record, x table, context tables)

    def set_parents(self, parents: Tensor, graph_bs: int | None) -> None:
        """Before a verify of the trees `parents` [R, N]: into the eager buffer of R rows and, when the forward
        will replay the graph of graph_bs >= R rows, into that graph's buffer (its rows past R keep `padding_tree`)."""
        R = parents.shape[0]
        if R not in self.parents:
            self.parents[R] = parents.clone()
        for bs in {R, graph_bs} - {None}:
            self.parents[bs][:R].copy_(parents)

    def verify(self, backend, layer, forward_batch, mixed_qkv: Tensor, a: Tensor, b: Tensor) -> Tensor:
        """One GDN layer's TARGET_VERIFY: core attention output [1, R * N, HV, V] for mixed_qkv [R * N, D]."""
        N = forward_batch.spec_info.draft_token_num
        R = mixed_qkv.shape[0] // N
        if N != self.num_nodes or R not in self.parents:
            raise RuntimeError(f"tree GDN verify: {R} trees of {N} nodes, workspace has {self.num_nodes} nodes and "
                               f"batch sizes {sorted(self.parents)}")  # fmt: skip
        cache = backend.req_to_token_pool.mamba2_layer_cache(layer.layer_id)
        conv_state, ssm_state = cache.conv[0], cache.temporal
        parents = self.parents[R]
        first = min(backend.req_to_token_pool.mamba_map) if hasattr(backend.req_to_token_pool, "mamba_map") else None
        if layer.layer_id == first or R not in self.tables:  # once per forward: shared by every GDN layer
            slots = backend.forward_metadata.mamba_cache_indices[:R].long()  # -1: graph padding
            self.masks[R] = ancestors(parents, self.max_depth)
            gdn = verify_step_inputs(self.masks[R], self.max_depth)
            self.tables[R] = (slots, gdn, conv_windows(parents, layer.conv_weights.shape[1]))
            self.records[(R, _capturing())] = {}
            self.forwards[(R, _capturing())] += 1
        slots, gdn, windows = self.tables[R]
        x = mixed_qkv.view(R, N, -1)
        y = tree_causal_conv1d(x, conv_state, layer.conv_weights, layer.bias, slots, parents, windows)
        q, k, v = y.split([layer.q_dim, layer.k_dim, layer.v_dim], dim=-1)
        o, ctx = tree_gdn_verify(
            q.view(R, N, layer.num_q_heads, layer.head_q_dim),
            k.view(R, N, layer.num_k_heads, layer.head_k_dim),
            v.view(R, N, layer.num_v_heads, layer.head_v_dim),
            a.view(R, N, -1),
            b.view(R, N, -1),
            layer.A_log,
            layer.dt_bias,
            ssm_state,
            slots,
            parents,
            **gdn,
        )
        self.records[(R, _capturing())][layer.layer_id] = (x, ctx)
        return o.view(1, R * N, layer.num_v_heads, layer.head_v_dim)

    def attention(self, layer, forward_batch, pools, q: Tensor, k: Tensor, v: Tensor, save_kv_cache: bool, first: bool) -> Tensor:
        """One full-attention layer's TARGET_VERIFY: o [R * N, HQ * Dh] for q [R * N, HQ * Dh] and the nodes' k, v
        [R * N, HKV * Dh], which are saved to the KV pool first, as SGLang's backends do (pools: `forward_pools`).
        The prefix (seq_lens[r] tokens) is read from the pool through req_to_token at row req_pool_indices[r], the
        nodes through the trees' ancestor mask, taken as bits by the forward's first full-attention layer (`first`)
        for all: the mask the forward's first GDN layer made where that layer came before this one (Qwen3.5/3.6:
        layers 0-2, then 3), else made here from the parents."""
        N = self.num_nodes
        R = q.shape[0] // N
        req_to_token_pool, pool = pools
        if N != forward_batch.spec_info.draft_token_num or R not in self.parents:
            raise RuntimeError(f"tree attention: {R} trees of {forward_batch.spec_info.draft_token_num} nodes, "
                               f"workspace has {N} nodes and batch sizes {sorted(self.parents)}")  # fmt: skip
        if first or R not in self.attention_words:
            gdn_layers = getattr(req_to_token_pool, "mamba_map", None)
            made = gdn_layers and min(gdn_layers) < layer.layer_id and R in self.masks
            self.attention_words[R] = ancestor_bits(self.masks[R] if made else ancestors(self.parents[R], self.max_depth))
        if save_kv_cache:
            pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v, layer.k_scale, layer.v_scale)
        HQ, HKV, Dh = layer.tp_q_head_num, layer.tp_k_head_num, layer.head_dim
        o = tree_attention(
            q.reshape(R, N, HQ, Dh),  # reshape: q, k, v may reach the backend strided
            pool.get_key_buffer(layer.layer_id),
            pool.get_value_buffer(layer.layer_id),
            forward_batch.seq_lens,
            k.reshape(R, N, HKV, Dh),
            v.reshape(R, N, HKV, Dh),
            self.attention_words[R],
            scale=layer.scaling,
            slots=forward_batch.req_pool_indices,
            table=req_to_token_pool.req_to_token,
        )
        return o.view(R * N, HQ * Dh)

    def attention_for(self, full_attn_backend) -> bool:
        """Whether `attention` serves the full-attention layers' verify: the switch, else `attention_default` for the
        server's backend, decided (and logged) at the first verify forward, which is before any graph capture."""
        if self.attention_on is None:
            self.attention_on = attention_default(full_attn_backend, self.device)
            name = type(full_attn_backend).__name__
            if self.attention_on:
                logger.info("sglang-dflash: tree attention verify in the full-attention layers, not %s (measured faster "
                            "on this GPU; %s=0 turns it off)", name, env.TREE_ATTENTION.name)  # fmt: skip
            else:
                logger.info("sglang-dflash: the full-attention layers' verify stays with %s (the tree attention was not "
                            "measured against it on this GPU; %s=1 turns it on)", name, env.TREE_ATTENTION.name)  # fmt: skip
        return self.attention_on

    def commit(self, req_to_token_pool, slots: Tensor, accepted_nodes: Tensor, graph_bs: int | None) -> None:
        """After the verify of R requests (graph_bs: the graph it replayed, None if eager): GDN slot slots[r] <-
        the state after request r's accepted path (accepted_nodes [R, L + 1] from node 0, padded -1), every layer."""
        R = accepted_nodes.shape[0]
        rows = R if graph_bs is None else graph_bs
        record = self.records.get((rows, graph_bs is not None))
        if record is None:
            raise RuntimeError(f"tree GDN commit: no verify recorded for {rows} rows ({'graph' if graph_bs else 'eager'}); "
                               f"verify forwards seen (rows, captured): {dict(self.forwards)}")  # fmt: skip
        order = getattr(req_to_token_pool, "mamba_map", {i: i for i in record})
        layers = sorted(record, key=order.__getitem__)
        pools = req_to_token_pool.get_speculative_mamba2_params_all_layers()
        if len(layers) != pools.temporal.shape[0]:
            raise RuntimeError(f"tree GDN commit: {len(layers)} layers recorded, the pool has {pools.temporal.shape[0]}")
        path = torch.full((rows, accepted_nodes.shape[1]), -1, dtype=torch.long, device=accepted_nodes.device)
        path[:, 0] = 0
        path[:R] = accepted_nodes
        targets = torch.full((rows,), -1, dtype=torch.long, device=slots.device)
        targets[:R] = slots[:R]
        x, ctx = self._commit_inputs(record, layers, rows if graph_bs is not None else None)
        tree_conv_commit(pools.conv[0], targets, x, path)
        tree_gdn_commit(pools.temporal, targets, ctx, path)

    def _commit_inputs(self, record: dict, layers: list[int], graph_rows: int | None, by_address: bool | None = None):
        """Every layer's pre-conv input and verify context for one commit launch each. By address on the GPU
        (`LayerTable`s: nothing stacked); the record of a captured graph (graph_rows: its batch size) is static, so
        its tables are made once. Else stacked."""
        xs, ctxs = [record[layer][0] for layer in layers], [record[layer][1] for layer in layers]
        if not (xs[0].is_cuda if by_address is None else by_address):
            return torch.stack(xs), stack_contexts(ctxs)
        cached = self.commit_tables.get(graph_rows)
        if cached is None or cached[0] is not record:  # eager, or a new capture: other tensors
            cached = (record, LayerTable.of(xs), context_tables(ctxs))
            if graph_rows is not None:
                self.commit_tables[graph_rows] = cached
        return cached[1], cached[2]

    def track(self, req_to_token_pool, slots: Tensor, track_slots: Tensor, accepted_nodes: Tensor, cut: Tensor, graph_bs,
              rows: list[int]) -> None:  # fmt: skip
        """Before `commit`, for extra_buffer's prefix-cache tracking: GDN slot track_slots[r] <- the state after the
        first cut[r] + 1 nodes of request r's accepted path, where cut[r] >= 0 (slots[r]'s state copied, then
        committed); other track slots are left as they are. rows: host-known requests, a superset of those with
        cut >= 0 (the copy touches only them; nothing is read back from the device)."""
        pools = req_to_token_pool.get_speculative_mamba2_params_all_layers()
        index = torch.tensor(rows, dtype=torch.long, device=slots.device)
        src, dst, hit = slots[index].long(), track_slots[index].long(), cut[index] >= 0
        for pool in (pools.temporal, pools.conv[0]):  # [layers, slots, ...]
            keep = hit.view(1, -1, *[1] * (pool.dim() - 2))
            pool[:, dst] = torch.where(keep, pool[:, src], pool[:, dst])
        depth = torch.arange(accepted_nodes.shape[1], device=accepted_nodes.device)
        prefix = torch.where(depth[None, :] <= cut[:, None], accepted_nodes, -1)
        self.commit(req_to_token_pool, torch.where(cut >= 0, track_slots, -1), prefix, graph_bs)


def install(model_runner, max_depth: int | None = None, num_nodes: int | None = None) -> TreeVerifyWorkspace:
    """For DFLASH_CHAIN/DDTREE, the active workspace for the target runner's verify of num_nodes nodes (default
    --speculative-num-draft-tokens; static buffers for every graph), to be installed before those graphs are captured.
    max_depth: the trees' deepest node, by default `server_args.tree_depth` (the drafter's depths, at most nodes - 1)."""
    global _workspace
    args = resolved(model_runner.server_args)
    num_nodes = int(args.speculative_num_draft_tokens) if num_nodes is None else num_nodes
    if max_depth is None:
        from .server_args import tree_depth

        max_depth = tree_depth(args)
    graph_sizes = getattr(args, "cuda_graph_bs", None) or getattr(args, "cuda_graph_bs_decode", None) or []  # 0.5.23
    largest = max([*graph_sizes, args.max_running_requests or 1, 1])  # SGLang may add the latter
    device = next(model_runner.model.parameters()).device
    _workspace = _workspaces[num_nodes] = TreeVerifyWorkspace(num_nodes, range(1, largest + 1), device, max_depth,
                                                              attention_switch())  # fmt: skip
    logger.info("sglang-dflash: tree GDN verify: %d nodes, depth <= %d, batch sizes up to %d", num_nodes,
                _workspace.max_depth, largest)  # fmt: skip
    if _workspace.attention_on is not None:
        logger.info("sglang-dflash: tree attention verify in the full-attention layers: %s (%s=%d)",
                    "on" if _workspace.attention_on else "off", env.TREE_ATTENTION.name, _workspace.attention_on)  # fmt: skip
    if uses_gather(num_nodes, _workspace.max_depth):
        logger.info("sglang-dflash: tree GDN verify: %d nodes: the ancestor-gather kernel", num_nodes)
    elif device.type == "cuda" and verify_blocks(num_nodes, device)[2] > 1:
        fused = fused_nodes(device)
        logger.warning("sglang-dflash: %d verify nodes exceed the root plus the %d of one block of the tree GDN "
                       "verify on this GPU: it runs block by block, with cross-block terms (--speculative-num-draft-"
                       "tokens %d is one whole block; fewer nodes also accept less, so measure both)",
                       num_nodes, fused, fused)  # fmt: skip
    return _workspace
