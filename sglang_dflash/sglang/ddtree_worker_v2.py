"""DDTreeWorkerV2: DDTREE and DFLASH_CHAIN on SGLang's spec-v2 schema (0.5.23; spec v1 is gone there).

The phases are the v1 worker's (`dflash_worker`): the same drafter, tree build, accept, tree GDN verify and commit,
and drafter context. What moves is the bookkeeping. Under spec v2 the scheduler maps the KV slots of 2 x N tokens
past each request's committed length before the step (req_to_token), appends the tokens the worker returns, counts
acceptance and frees what is left over when the request ends. The worker returns per request the accepted tokens
and the bonus (`next_token_ids` [bs * N], row i's first `accept_lens[i]`), the new lengths and the next step's
draft input (the bonus, SGLang's `DFlashDraftInputV2`).

Lifecycle (0.5.23 `Scheduler.init_model_worker`):
  __init__               the drafter's weights (`preloaded_weights_bytes`: the target's memory plan counts them)
  alloc_memory_pool      the drafter's context K/V at the target's KV slots
  init_attention_backends the hidden capture and the tree-verify workspace on the target, before its CUDA graphs
  init_cuda_graphs       the drafter's graphs (warm-up)

Decode step (`_forward_decode`):
  draft   roots = spec_info.bonus_tokens; one drafter pass -> chain or tree (`_build_tree`)
  verify  EagleVerifyInput over req_to_token[seq_len : seq_len + N] (`eagle_prepare_for_verify`), TARGET_VERIFY
  accept  `accept_greedy` / `accept_sampling` (rank 0's draws at TP > 1)
  commit  the accepted nodes' KV slots to the front of the window (`front_accepted_slots`: a permutation inside the
          window, so the request keeps exactly the slots the scheduler mapped), GDN states, drafter context

Runs on the synchronous (non-overlap) scheduler for now: `registered_spec_class` says supports_overlap=False.
"""

from __future__ import annotations

import torch
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from torch import Tensor

from ..ddtree import DraftTree, accept_greedy, accept_sampling
from .dflash_worker import DDTreeWorker, DFlashWorker, extend_tap_layout, sampling_args, track_cuts
from .names import DFLASH_CHAIN, resolved
from .verify_io import committed_tokens, front_accepted_slots
from .vocab_parallel import broadcast_decisions


class DDTreeWorkerV2(DDTreeWorker, BaseSpecWorker):
    """DDTREE or DFLASH_CHAIN (by `server_args.speculative_algorithm`) on spec v2; see the module docstring."""

    def __init__(self, server_args, gpu_id: int, nccl_port: int, target_worker):
        BaseSpecWorker.__init__(self)
        self._draft_worker = None  # no SGLang draft worker: SGLang's hooks for one (pools, graphs, weights) skip it
        self.nccl_port = nccl_port
        from sglang.srt.runtime_context import get_parallel

        self._load_drafter(resolved(server_args), gpu_id, get_parallel().tp_rank, target_worker)

    def __getattr__(self, name):
        # what SGLang asks of a spec worker that only the target worker has (as its own v2 workers do)
        if name == "_target_worker":
            raise AttributeError(name)
        return getattr(self._target_worker, name)

    @property
    def draft_worker(self):
        return None

    @property
    def preloaded_weights_bytes(self) -> int:
        """The drafter's weights, already on the GPU: the scheduler adds them to the target's memory plan."""
        return sum(t.numel() * t.element_size() for t in self.drafter.state_dict().values())

    # --- the scheduler's lifecycle
    def alloc_memory_pool(self, memory_pool_config=None, req_to_token_pool=None, token_to_kv_pool_allocator=None):
        self._init_context()

    def init_attention_backends(self) -> None:
        from .hidden_capture import install_before_graphs
        from .tree_gdn_backend import install

        install_before_graphs(self.model_runner)
        install(self.model_runner, self.draft_config.block_size - 1)  # unless SGLANG_DFLASH_TREE_GDN=0
        self._install_capture()

    def init_cuda_graphs(self) -> None:
        self._warm_up(min(2, self.server_args.max_running_requests or 2))

    def init_hicache_draft_plan(self) -> None:
        pass

    def clear_cache_pool(self) -> None:
        self.ctx_lens = [0] * len(self.ctx_lens)

    def _check_num_nodes(self, block_size: int) -> None:
        (DFlashWorker if self.name == DFLASH_CHAIN else DDTreeWorker)._check_num_nodes(self, block_size)

    def _build_tree(self, roots: Tensor, local: Tensor) -> DraftTree:
        return (DFlashWorker if self.name == DFLASH_CHAIN else DDTreeWorker)._build_tree(self, roots, local)

    # --- one scheduler step
    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None, pp_proxy_tensors=None):
        if batch.forward_mode.is_idle():
            raise ValueError(f"{self.name}: idle batches (DP attention) are not supported")
        self._check_batch(batch)
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            result = self._forward_extend(batch, pp_proxy_tensors)
        else:
            result = self._forward_decode(batch)
        if on_publish is not None:
            on_publish(result.new_seq_lens)
        return result

    def _draft_input(self, bonus: Tensor, new_seq_lens: Tensor):
        from sglang.srt.speculative.draft_worker_common import make_draft_input_v2

        return make_draft_input_v2(bonus_tokens=bonus, new_seq_lens=new_seq_lens)

    def _forward_extend(self, batch, pp_proxy_tensors):
        """Target prefill (first token sampled as usual), then the drafter's context for the extend tokens."""
        result = self.target_worker.forward_batch_generation(batch, pp_proxy_tensors=pp_proxy_tensors)
        ext, pre = list(batch.extend_lens), list(batch.prefix_lens)
        for p, e in zip(pre, ext):
            self._check_fits(p + e)
        taps = self.capture.taps(sum(ext))
        rows, nodes, starts = extend_tap_layout(pre, ext, device=taps.device)
        self.drafter.append_context(self.cache, taps[rows], batch.req_pool_indices.long(), starts, nodes)
        for slot, p, e in zip(batch.req_pool_indices.tolist(), pre, ext):
            self.ctx_lens[slot] = p + e
        result.logits_output.hidden_states = None
        result.new_seq_lens = batch.seq_lens
        result.next_draft_input = self._draft_input(result.next_token_ids, batch.seq_lens)
        return result

    def _forward_decode(self, batch):
        from sglang.srt.managers.utils import GenerationBatchResult
        from sglang.srt.speculative.eagle_utils import eagle_prepare_for_verify

        bs, N = batch.batch_size(), self.num_nodes
        slots, seq_lens = batch.req_pool_indices.long(), batch.seq_lens.long()
        slots_cpu, seq_cpu = self._check_step(batch)

        # draft
        self.profile.start()
        roots = batch.spec_info.bonus_tokens.long()
        tree = self._build_tree(roots, self._run_drafter(roots, slots, seq_lens))
        self.profile.mark("tree")

        # verify
        spec_info, tree_gdn, graph_bs = self._verify_input(batch, tree, seq_cpu)
        batch.spec_info = spec_info  # the scheduler restores the batch's fields after the step
        forward_batch, _ = eagle_prepare_for_verify(spec_info, self.model_runner.req_to_token_pool, batch, self.target_worker)
        self.profile.mark("prepare")
        result = self.target_worker.forward_batch_generation(None, forward_batch=forward_batch, is_verify=True)
        self.profile.mark("verify")
        logits_output = result.logits_output

        # accept
        logits = logits_output.next_token_logits.view(bs, N, -1)
        sampling = sampling_args(batch.sampling_info)
        if sampling is None:
            acc = accept_greedy(tree, logits)
        else:
            acc = accept_sampling(tree, logits, **sampling)
            if self.tp_size > 1:
                broadcast_decisions([acc.accept_len, acc.accepted_nodes, acc.bonus_tokens], self.tp_src, self.tp_group)
        tokens = committed_tokens(tree, acc, N)
        accept_lens = (acc.accept_len + 1).to(torch.int32)
        new_seq_lens = seq_lens + accept_lens.to(seq_lens.dtype)
        self.profile.mark("accept")

        # commit: KV slots, GDN states, drafter context
        req_to_token = self.model_runner.req_to_token_pool.req_to_token
        front_accepted_slots(req_to_token, slots, seq_lens, acc.accepted_nodes, N)
        keep = accept_lens.tolist()
        self.profile.mark("commit")
        if tree_gdn is not None:
            runner = self.model_runner
            mamba_slots = runner.attn_backend.linear_attn_backend.forward_metadata.mamba_cache_indices[:bs]
            graph = graph_bs if result.can_run_cuda_graph else None
            if batch.mamba_track_indices is not None:  # extra_buffer: the state at a tracking point, for the radix cache
                cuts = track_cuts(seq_cpu, keep, self.server_args.mamba_track_interval)
                if any(c >= 0 for c in cuts):
                    cut = torch.tensor(cuts, device=self.device)
                    track = torch.where(cut >= 0, batch.mamba_track_indices[:bs], -1)
                    tree_gdn.track(runner.req_to_token_pool, mamba_slots, track, acc.accepted_nodes, cut, graph)
            tree_gdn.commit(runner.req_to_token_pool, mamba_slots, acc.accepted_nodes, graph)
        else:
            raise RuntimeError(f"{self.name} on spec v2 needs the tree GDN verify (SGLANG_DFLASH_TREE_GDN=0 is v1 only)")
        self.profile.mark("gdn_commit")
        self._append_verified(bs, slots, seq_lens, acc.accepted_nodes)
        for slot, s, k in zip(slots_cpu, seq_cpu, keep):
            self.ctx_lens[slot] = s + k
        self.profile.mark("context")
        self.profile.end(bs)

        logits_output.hidden_states = None
        return GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=tokens.reshape(-1),
            accept_lens=accept_lens,
            can_run_cuda_graph=result.can_run_cuda_graph,
            next_draft_input=self._draft_input(acc.bonus_tokens, new_seq_lens),
            speculative_num_draft_tokens=N,
            new_seq_lens=new_seq_lens,
        )


def dummy_verify_input(custom_mask: Tensor, num_draft_tokens: int):
    """The verify input SGLang's TARGET_VERIFY graph capture runs with, for ours: EAGLE's, with the graph's tree
    custom-mask buffer and our steps / topk (SGLang 0.5.23 builds one for its own algorithms only)."""
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.runtime_context import get_spec
    from sglang.srt.speculative.eagle_info import EagleVerifyInput

    spec = get_spec()
    return EagleVerifyInput(
        draft_token=None,
        custom_mask=custom_mask,
        positions=None,
        retrieve_index=None,
        retrieve_next_token=None,
        retrieve_next_sibling=None,
        retrieve_cum_len=None,
        spec_steps=spec.speculative_num_steps,
        topk=spec.speculative_eagle_topk,
        draft_token_num=num_draft_tokens,
        capture_hidden_mode=CaptureHiddenMode.FULL,
        seq_lens_sum=None,
        seq_lens_cpu=None,
    )
