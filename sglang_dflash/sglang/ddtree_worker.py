"""DDTreeWorker: DDTREE (tree) and DFLASH_CHAIN (chain) for SGLang's spec-v1 (non-overlap) scheduler, on the common
part in `worker_common` (drafter, capture, draft, verify input, checks).

The pure helpers and the hidden capture are tested on CPU (tests/sglang/test_worker_common.py). On H200s inside
stock SGLang (benchmarks/gpu/harness.py, bf16, CUDA graphs on, batch 1 and 8, the random tiny pair and the
trained one with deep accepts): the tokens of both workers, with the tree-GDN verify or SGLang's own, are
the target's argmax up to bf16 near ties at TP=1 and TP=2, also after radix-cache hits (TP=1), and sampled
batches finish (benchmarks/RESULTS.md).
SGLANG_DFLASH_PROFILE=FILE writes per-phase step times (`step_profile.py`).
SGLANG_DFLASH_DEBUG_STEPS=K logs the first K verify steps (slots, GDN state slots, lengths, draft,
acceptance). Written against SGLang's spec v1 (0.5.11), modelled on
`speculative/ngram_worker.py` (external drafts verified through TARGET_VERIFY) and on EAGLE v1's
post-verify bookkeeping (`eagle_info.EagleVerifyInput.verify`, `eagle_worker._mamba_verify_update`).

Design (calls in order)
-----------------------
Construction (scheduler `maybe_init_draft_worker`, after the target TpModelWorker exists and its
CUDA graphs are captured):
  1. Hidden capture (`hidden_capture.py`) on the target's decoder layers for the drafter's
     `target_layer_ids`. If the plugin's `init_device_graphs` hook already installed it before the
     target's graph capture, it is reused; otherwise it is installed now and the target's graphs
     are recaptured once (`ModelRunner.init_device_graphs()`), so graph replays write the taps.
  2. The drafter: the standalone `models.dflash_draft.DFlashDrafter`, TP-sharded where its heads and MLP
     split (`models.tp_shard`: each rank 1/TP of the query and key/value heads and of the MLP, o_proj and
     down_proj all-reduced; SGLANG_DFLASH_DRAFT_TP=0 replicates it), with its `DraftCache` (this rank's
     key/value heads) at the target's KV slots: a token pool with an entry per KV-cache token,
     read through SGLang's req_to_token (row `req_pool_idx`), so a prefix-cache hit finds the prefix's
     drafter context where the target's KV is. It borrows the target's
     embedding (SGLang's VocabParallelEmbedding returns full rows on every rank) and the target's
     LM-head shard; the chain is the full-vocabulary argmax merged over TP
     (`vocab_parallel.argmax_vocab_parallel`), so every rank drafts the same tokens (a DFlash2 / DSpark
     drafter at TP = 1: its conditional head's chain or tree, `proposal.draft`).
     Why not an SGLang-layer drafter model (SGLang's `models/dflash.py`): it needs a draft ModelRunner, a draft
     KV pool at the target's slot indices, an ENCODER_ONLY attention backend in TARGET_VERIFY mode and
     its own graph runner; each is a new SGLang-internals surface. The standalone drafter is already
     checked against transformers and runs in the standalone engine on GPU, so this worker
     only adds the SGLang glue. `memory_plan` counts the drafter's weights and K/V per rank in SGLang's
     plan. Requests are bounded by SGLANG_DFLASH_DRAFT_MAX_LEN (default min(context length, 8192)). The
     drafter's pass is CUDA-graphed per batch size (SGLANG_DFLASH_DRAFT_GRAPHS=0: eager; a sharded drafter's
     all-reduces are captured inside SGLang's `graph_capture`); the block
     embedding is looked up outside the graph (`StaticBlockEmbedding`), and the context append of each
     verify is graphed too. The radix cache is on (hits ran lossless at TP=1 and TP=2).
Prefill / extend (`batch.forward_mode.is_extend()`):
  3. `batch.get_model_worker_batch()` -> `target_worker.forward_batch_generation(mwb)` (target
     samples the first token as usual) -> taps of the extend tokens -> `drafter.append_context` at
     positions prefix_len .. prefix_len + extend_len - 1 of slot req_pool_idx (chunked prefill
     continues the same slot; after a prefix-cache hit, positions < prefix_len are pooled already).
Decode:
  4. roots = each request's last output token (not yet in the KV cache, at position seq_len);
     `drafter(cache, roots, req_pool_indices, seq_lens, embed, lm_head shard)` -> TP-merged argmax ->
     `dflash.chain_tree` (N = --speculative-num-draft-tokens nodes; DDTREE: `ddtree.build_ddtree` of the
     drafter's marginals, budget N - 1, top-K merged over TP; `_build_tree`) ->
     `verify_io.eagle_verify_fields` -> `EagleVerifyInput(topk=1, DDTREE: > 1 for SGLang's tree-mode GDN
     verify)` (the algorithm answers
     is_eagle(), so SGLang's TARGET_VERIFY graphs expect exactly this class) ->
     `EagleVerifyInput.prepare_for_verify` (allocates N KV slots per request, writes req_to_token,
     sets mamba_track_indices) -> forward mode TARGET_VERIFY ->
     `target_worker.forward_batch_generation(mwb, is_verify=True)`.
  5. `ddtree.accept_greedy` on the verify logits (LogitsProcessor gathers the full vocabulary on
     every rank, so each rank decides the same), or for a batch with sampled requests
     `ddtree.accept_sampling` (SGLang's temperature / top-p / top-k; greedy rows argmax) with rank 0's
     decisions broadcast over TP -> `verify_io.eagle_acceptance` ->
     `_commit` (EAGLE v1's page-size-1 bookkeeping: output_ids, check_finished, spec_verify_ct,
     spec_accepted_tokens, acceptance histogram, kv_committed_len, free rejected KV slots,
     req_to_token of the accepted slots, seq_lens).
  6. GDN state: by default `tree_gdn_backend.TreeVerifyWorkspace.commit` (our tree
     kernels ran the verify; every layer's accepted path committed in one launch each); with
     SGLANG_DFLASH_TREE_GDN=0, `EAGLEWorker._mamba_verify_update` itself (called unbound with this worker as self),
     i.e. `attn_backend.update_mamba_state_after_mtp_verify(accepted_steps=accept_len, ...)`, SGLang's
     own intermediate-state path.
  7. Drafter context: `drafter.append_context` with the verify taps of the accepted nodes, at
     positions seq_len_before .. seq_len_before + accept_len.
  8. `GenerationBatchResult` as NGRAMWorker returns it; `batch.spec_info` is reset to None.

Sampled batches ran on the GPU (harness --sampled: they finish); their distribution is tested on CPU. A decode step
that raises before `_commit` (drafter, tree, verify input, verify forward, accept) gives its verify KV slots back and
ends its batch's requests aborted with the error, emitting nothing, kept out of the radix cache; the server goes on.
From `_commit` on tokens are emitted and lengths move, so an exception there still ends the server, as does a broken
CUDA context.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import torch
from torch import Tensor

from ..ddtree import Acceptance, DraftTree, accept_greedy, accept_sampling
from .names import fields
from .verify_io import eagle_acceptance
from .vocab_parallel import broadcast_decisions
from .worker_common import (
    DDTreeWorkerBase,
    extend_tap_layout,
    request_slot,
    sampling_args,
    screen_nan,
    track_cuts,
)

logger = logging.getLogger(__name__)


def truncate_acceptance(acc: Acceptance, keep: list[int]) -> Acceptance:
    """The acceptance with request r's path cut to its first keep[r] nodes (root included; a request that
    finished mid-path keeps the nodes up to its finishing token)."""
    nodes = acc.accepted_nodes
    k = torch.tensor(keep, dtype=torch.long, device=nodes.device)
    j = torch.arange(nodes.shape[1], device=nodes.device)
    cut = torch.where(j[None, :] < k[:, None], nodes, -1)
    return Acceptance(accept_len=(k - 1).clamp(min=0), accepted_nodes=cut, bonus_tokens=acc.bonus_tokens)


def emit_tokens(req, tokens: list[int], think_end_id: int | None = None) -> int:
    """Append tokens to req.output_ids one at a time, stopping after the one that finishes it (EAGLE v1's
    rule); a reasoning request counts its reasoning tokens as SGLang's own verify does (0.5.11's
    `require_reasoning`; think_end_id from the model config). Returns how many were appended."""
    n = 0
    for t in tokens:
        req.output_ids.append(t)
        n += 1
        if getattr(req, "require_reasoning", False) and think_end_id is not None:
            req.update_reasoning_tokens(t, think_end_id)
        req.check_finished()
        if req.finished():
            break
    return n


class DDTreeWorker(DDTreeWorkerBase):
    """DDTREE or DFLASH_CHAIN (by `server_args.speculative_algorithm`) on SGLang's spec v1; see the module docstring."""

    overlap_ready = False  # spec v1 steps read the device back: SGLang's overlap scheduler is refused

    def __init__(
        self,
        server_args,
        gpu_id: int,
        tp_rank: int,
        dp_rank,
        moe_ep_rank: int,
        attn_cp_rank: int,
        moe_dp_rank: int,
        nccl_port: int,
        target_worker,
    ):
        self._load_drafter(server_args, gpu_id, tp_rank, target_worker)
        self._install_capture()
        self._init_context()
        self._warm_up(min(2, server_args.max_running_requests or 2))

    @property
    def draft_worker(self):
        return self

    # --- one scheduler step
    def forward_batch_generation(self, batch):
        from sglang.srt.managers.utils import GenerationBatchResult

        if batch.forward_mode.is_idle():
            raise ValueError(f"{self.name} experimental worker: idle batches (DP attention) are not supported")
        self._check_batch(batch)
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            return self._forward_extend(batch, GenerationBatchResult)
        step = SimpleNamespace(out_before=batch.out_cache_loc, committing=False)  # how far the step got
        try:
            return self._forward_decode(batch, GenerationBatchResult, step)
        except Exception as error:
            if step.committing:  # tokens emitted, lengths moved: nothing to undo it with
                raise
            self._abort_batch(batch, error)
            return self._abandon_step(batch, step, GenerationBatchResult)

    def _abandon_step(self, batch, step, GenerationBatchResult):
        """A decode step that failed before `_commit`: its verify KV slots go back to the pool, the batch is a decode
        batch again, and every request (aborted by `_abort_batch`) finishes now with nothing emitted, as spec v1
        finishes requests inside the worker."""
        from sglang.srt.layers.logits_processor import LogitsProcessorOutput
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        if batch.out_cache_loc is not step.out_before:  # the verify's slots (prepare_for_verify allocated them)
            batch.token_to_kv_pool_allocator.free(batch.out_cache_loc)
        batch.forward_mode, batch.spec_info = ForwardMode.DECODE, None
        for req in batch.reqs:
            req.check_finished()
        bs = len(batch.reqs)
        return GenerationBatchResult(
            logits_output=LogitsProcessorOutput(next_token_logits=None),
            next_token_ids=torch.zeros(0, dtype=torch.long, device=self.device),
            can_run_cuda_graph=False,
            accept_lens=torch.zeros(bs, dtype=torch.int32, device=self.device),
            **{fields().result_accepted: 0, fields().result_accepted_per_req: [0] * bs},
        )

    def _forward_extend(self, batch, GenerationBatchResult):
        mwb = batch.get_model_worker_batch()
        result = self.target_worker.forward_batch_generation(mwb)
        ext, pre = list(batch.extend_lens), list(batch.prefix_lens)
        slots_cpu = [request_slot(req) for req in batch.reqs]
        for p, e in zip(pre, ext):  # p > 0: a chunked prefill goes on, or a prefix-cache hit (context already pooled)
            self._check_fits(p + e)
        taps = self.capture.taps(sum(ext))
        rows, nodes, starts = extend_tap_layout(pre, ext, device=taps.device)
        self.drafter.append_context(self.cache, taps[rows], batch.req_pool_indices.long(), starts, nodes)
        for slot, p, e in zip(slots_cpu, pre, ext):
            self.ctx_lens.set(slot, p + e)
        return GenerationBatchResult(
            logits_output=result.logits_output,
            next_token_ids=result.next_token_ids,
            can_run_cuda_graph=result.can_run_cuda_graph,
            **{fields().result_accepted: 0},
        )

    def _roots(self, batch, faults: dict[int, str]) -> Tensor:
        """Each request's last token, the root of its draft (long [R]); one outside the embedding's rows is a fault
        (added to faults) and 0 instead."""
        last = [req.output_ids[-1] if req.output_ids else req.origin_input_ids[-1] for req in batch.reqs]
        for i, t in enumerate(last):
            if not 0 <= t < self.vocab_rows:
                faults.setdefault(i, f"{self.name}: last token {t} outside the embedding's {self.vocab_rows} rows")
                last[i] = 0
        return torch.tensor(last, dtype=torch.long, device=self.device)

    def _draft_tree(self, roots: Tensor, slots: Tensor, seq_lens: Tensor) -> DraftTree:
        drafted = self._run_drafter(roots, slots, seq_lens)
        self.profile.mark("drafter")
        return self._build_tree(roots, *drafted)

    def _forward_decode(self, batch, GenerationBatchResult, step):
        """draft -> verify -> accept -> commit (EAGLE v1's bookkeeping) -> GDN commit -> drafter context. step: where a
        failure leaves the batch (`out_before`: the batch's out_cache_loc before the verify allocated its KV slots;
        `committing`: tokens being emitted)."""
        from sglang.srt.model_executor.forward_batch_info import ForwardMode
        from sglang.srt.speculative.eagle_worker import EAGLEWorker

        bs, N = batch.batch_size(), self.num_nodes
        slots_cpu, seq_cpu, faults = self._check_step(batch)
        roots = self._roots(batch, faults)
        draft_slots, draft_lens = self._drafter_rows(batch, faults)

        # 4. draft (chain or tree), verify input
        self.profile.start()
        tree = self._draft_tree(roots, draft_slots, draft_lens)
        self.profile.mark("tree")
        spec_info, tree_gdn, graph_bs = self._verify_input(batch, tree, seq_cpu)
        seq_lens_pre = batch.seq_lens.clone()
        spec_info.prepare_for_verify(batch, self.page_size)
        spec_info.num_tokens_per_req = N
        batch.return_hidden_states = False
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        batch.spec_info = spec_info
        mwb = batch.get_model_worker_batch(seq_lens_cpu_cache=spec_info.seq_lens_cpu)
        self.profile.mark("prepare")
        result = self.target_worker.forward_batch_generation(mwb, is_verify=True)
        self.profile.mark("verify")
        logits_output = result.logits_output
        taps = self.capture.taps(bs * N).view(bs, N, -1)

        # 5. accept (ours), commit (EAGLE v1 bookkeeping)
        logits = screen_nan(logits_output.next_token_logits.view(bs, N, -1), self.nan_detection)
        sampling = sampling_args(batch.sampling_info)
        if sampling is None:
            acc = accept_greedy(tree, logits)  # every rank has the full-vocabulary logits: the same decisions
        else:  # the sample-at-node walk; rank 0's draws decide for every rank
            acc = accept_sampling(tree, logits, **sampling)
            if self.tp_size > 1:
                broadcast_decisions([acc.accept_len, acc.accepted_nodes, acc.bonus_tokens], self.tp_src, self.tp_group)
        if self.debug_steps > 0:
            self._log_step(batch, slots_cpu, seq_cpu, tree, acc, result.can_run_cuda_graph)
        predict, accept_index, _ = eagle_acceptance(tree, acc)
        self.profile.mark("accept")
        step.committing = True
        keep, flat_accept, verified_id = self._commit(batch, predict, accept_index, acc)
        self.profile.mark("commit")
        acc = truncate_acceptance(acc, keep)
        accept_len_cpu = [k - 1 for k in keep]
        accept_length = torch.tensor(accept_len_cpu, dtype=torch.int32, device=self.device)

        # 6. GDN state: our tree commit, else (SGLANG_DFLASH_TREE_GDN=0) SGLang's intermediate-state path
        runner = self.model_runner
        if tree_gdn is not None:
            slots = runner.attn_backend.linear_attn_backend.forward_metadata.mamba_cache_indices[:bs]
            graph = graph_bs if result.can_run_cuda_graph else None
            if batch.mamba_track_indices is not None:  # extra_buffer: the state at a tracking point, for the radix cache
                interval = self.server_args.mamba_track_interval
                cut = track_cuts(torch.tensor(seq_cpu), torch.tensor(keep), interval)
                hits = (cut >= 0).nonzero().flatten().tolist()  # host tensors: no device read
                if hits:
                    track_slots, cut = batch.mamba_track_indices[:bs], cut.to(self.device)
                    tree_gdn.track(runner.req_to_token_pool, slots, track_slots, acc.accepted_nodes, cut, graph, hits)
            tree_gdn.commit(runner.req_to_token_pool, slots, acc.accepted_nodes, graph)
        elif any(getattr(runner, a, None) is not None for a in ("hybrid_gdn_config", "mamba2_config", "hybrid_lightning_config")):
            res = SimpleNamespace(accepted_indices=flat_accept, **{fields().result_accepted_per_req: accept_len_cpu})
            # it reads only .hidden_states.device of its logits_output argument
            EAGLEWorker._mamba_verify_update(self, batch, res, SimpleNamespace(hidden_states=taps), spec_info, seq_lens_pre)
        self.profile.mark("gdn_commit")

        # 7. drafter context for the committed tokens
        self._append_verified(bs, draft_slots, seq_lens_pre.long() if not faults else draft_lens, acc.accepted_nodes)
        for i, (slot, s, k) in enumerate(zip(slots_cpu, seq_cpu, keep)):
            if i not in faults:
                self.ctx_lens.set(slot, s + k)
        self.profile.mark("context")
        self.profile.end(bs)

        logits_output.next_token_logits = logits_output.next_token_logits[flat_accept]
        if logits_output.hidden_states is not None:
            logits_output.hidden_states = logits_output.hidden_states[flat_accept]
        batch.forward_mode = ForwardMode.DECODE
        batch.spec_info = None
        return GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=verified_id,
            can_run_cuda_graph=result.can_run_cuda_graph,
            accept_lens=accept_length,
            **{fields().result_accepted: sum(accept_len_cpu), fields().result_accepted_per_req: accept_len_cpu},
        )

    def _log_step(self, batch, slots_cpu, seq_cpu, tree: DraftTree, acc: Acceptance, graph: bool) -> None:
        """SGLANG_DFLASH_DEBUG_STEPS: one verify step's slots, GDN state slots, lengths, draft and acceptance."""
        self.debug_steps -= 1
        pool = getattr(self.model_runner.req_to_token_pool, "get_speculative_mamba2_params_all_layers", None)
        if pool is not None and not getattr(self, "_logged_pool", False):
            self._logged_pool = True
            shapes = {
                k: [tuple(t.shape) for t in (v if isinstance(v, (list, tuple)) else [v]) if hasattr(t, "shape")]
                for k, v in getattr(pool(), "__dict__", {}).items()
            }
            logger.warning("%s debug: mamba pools %s", self.name, shapes)
        meta = getattr(getattr(self.model_runner.attn_backend, "linear_attn_backend", None), "forward_metadata", None)
        logger.warning(
            "%s debug: slots %s mamba %s seq_lens %s sum %s/%s roots %s draft %s accept %s bonus %s graph %s",
            self.name,
            slots_cpu,
            getattr(meta, "mamba_cache_indices", None),
            seq_cpu,
            int(batch.seq_lens_sum),
            sum(seq_cpu),
            tree.token_ids[:, 0].tolist(),
            tree.token_ids[:, 1:4].tolist(),
            acc.accept_len.tolist(),
            acc.bonus_tokens.tolist(),
            graph,
        )

    def _commit(self, batch, predict: Tensor, accept_index: Tensor, acc: Acceptance):
        """EAGLE v1's post-verify bookkeeping (eagle_info.EagleVerifyInput.verify, page size 1, topk 1) for our
        accept decisions. Returns (kept nodes per request incl. root, flat accepted indices, their tokens)."""
        from sglang.srt.speculative.spec_utils import assign_req_to_token_pool_func

        bs, N = batch.batch_size(), self.num_nodes
        rows, predict_cpu = accept_index.tolist(), predict.tolist()
        think_end_id = getattr(batch.model_config, "think_end_id", None)
        keep, flat_cpu = [], []
        for req, row in zip(batch.reqs, rows):
            path = [i for i in row if i != -1]
            n = emit_tokens(req, [predict_cpu[i] for i in path], think_end_id)
            keep.append(n)
            flat_cpu += path[:n]
            req.kv_committed_len += n
            req.kv_allocated_len = req.kv_committed_len
            req.spec_verify_ct += 1
            counter = fields().req_accepted
            setattr(req, counter, getattr(req, counter) + n - 1)
            req.update_spec_acceptance_histogram(n - 1)
        flat = torch.tensor(flat_cpu, dtype=torch.long, device=self.device)
        verified_id = predict[flat].long()
        evict = torch.ones(bs * N, dtype=torch.bool, device=self.device)
        evict[flat] = False
        batch.token_to_kv_pool_allocator.free(batch.out_cache_loc[evict])
        kept = torch.tensor(keep, dtype=torch.long, device=self.device)
        accepted_locs = batch.out_cache_loc[flat]
        assign_req_to_token_pool_func(
            batch.req_pool_indices,
            batch.req_to_token_pool.req_to_token,
            batch.seq_lens,
            batch.seq_lens + kept,
            accepted_locs,
            bs,
        )
        batch.out_cache_loc = accepted_locs
        batch.seq_lens.add_(kept.to(batch.seq_lens.dtype))
        batch.seq_lens_cpu.add_(torch.tensor(keep, dtype=batch.seq_lens_cpu.dtype))
        batch.seq_lens_sum = int(batch.seq_lens_cpu.sum())
        return keep, flat, verified_id
