"""DDTreeWorkerV2: DDTREE and DFLASH_CHAIN on SGLang's spec-v2 schema (0.5.23; the plugin subclasses it for 0.5.11's).

On the common part (`worker_common`: drafter, tree build, verify input, checks) it adds the step: accept, tree GDN
verify and commit, and the drafter's context. Under spec v2 the scheduler maps the KV slots of 2 x N tokens past each
request's committed length before the step (req_to_token), appends the tokens the worker returns, counts acceptance
and frees what is left over when the request ends. The worker returns per request the accepted tokens and the bonus
(`next_token_ids` [bs * N], row i's first `accept_lens[i]`), the new lengths and the next step's draft input (the
bonus, SGLang's `DFlashDraftInputV2`).

Lifecycle (0.5.23 `Scheduler.init_model_worker`):
  __init__               the drafter's weights (`preloaded_weights_bytes`: the target's memory plan counts them)
  alloc_memory_pool      the drafter's context K/V at the target's KV slots
  init_attention_backends the decode graph sizes cut to fit (`server_args.fit_decode_graphs`), the hidden capture
                         and the tree-verify workspace on the target, before its CUDA graphs
  init_cuda_graphs       the drafter's graphs (warm-up)

Decode step (`_forward_decode`), nothing read back from the device (host values: the scheduler's):
  draft   roots = spec_info.bonus_tokens; one drafter pass -> chain or tree (`_build_tree`)
  verify  EagleVerifyInput over req_to_token[seq_len : seq_len + N] (`eagle_prepare_for_verify`), TARGET_VERIFY
  accept  `accept_greedy` / `accept_sampling` (rank 0's draws at TP > 1)
  commit  the accepted nodes' KV slots to the front of the window, the tokens to emit and the new lengths
          (`kernels.accept_commit`, one launch: a permutation inside the window, so the request keeps exactly the
          slots the scheduler mapped), GDN states; then the new lengths are published (`on_publish`: the overlap
          scheduler prepares the next batch meanwhile), then the drafter context
The drafter's context length per slot is known on the host only as a range after a step (`ContextLengths`); the
next step's sequence length from the scheduler must lie in it.

A decode step that raises ends its batch, not the server (`_abort_batch`): before the target's commits are
published, every request of the batch ends aborted with the error and emits nothing this step (accept length 0);
if the drafter's context append fails after, the step's tokens stand (the target's state is whole) and the requests
end aborted; either way they stay out of the radix cache. Where the CUDA context itself is broken (a sticky error:
every later call fails), at TP > 1 unless every rank failed the step (`FailureAgreement`), or for an exception after
the publish outside the context append, the server ends as before.

The scheduler: SGLang's, overlap by default (the step reads nothing back), synchronous with
--disable-overlap-schedule.

What another release's spec-v2 schema changes goes through a few small methods (`_publisher`, `_roots`,
`_extend_lengths`, `_prepare_verify`, `_track_interval`, `_result_fields`, `_draft_input`), for a subclass to
override.
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from torch import Tensor

from ..ddtree import Acceptance, DraftTree, accept_greedy, accept_sampling
from ..kernels.accept_commit import commit_accepted
from .names import resolved
from .server_args import verify_steps
from .vocab_parallel import broadcast_decisions
from .worker_common import (
    DDTreeWorkerBase,
    extend_tap_layout,
    request_slot,
    sampling_args,
    track_candidates,
    track_cuts,
)

NEEDS_HOST_LENGTHS = SimpleNamespace(needs_cpu_seq_lens=True)  # the step reads batch.seq_lens_cpu


class DDTreeWorkerV2(DDTreeWorkerBase, BaseSpecWorker):
    """DDTREE or DFLASH_CHAIN (by `server_args.speculative_algorithm`) on spec v2; see the module docstring."""

    overlap_ready = True  # its step reads nothing back
    graph_runner_attr = "decode_cuda_graph_runner"  # the target ModelRunner's TARGET_VERIFY graphs

    def __init__(self, server_args, gpu_id: int, nccl_port: int, target_worker, tp_rank: int | None = None):
        BaseSpecWorker.__init__(self)
        self._draft_worker = None  # no SGLang draft worker: SGLang's hooks for one (pools, graphs, weights) skip it
        self.nccl_port = nccl_port
        if tp_rank is None:  # 0.5.23 keeps it in its runtime context
            from sglang.srt.runtime_context import get_parallel

            tp_rank = get_parallel().tp_rank
        self._load_drafter(resolved(server_args), gpu_id, tp_rank, target_worker)

    def __getattr__(self, name):
        # what SGLang asks of a spec worker that only the target worker has (as its own v2 workers do)
        if name == "_target_worker":
            raise AttributeError(name)
        return getattr(self._target_worker, name)

    @property
    def draft_worker(self):
        return None

    @property
    def spec_v2_attn_backends(self) -> tuple:
        """What the overlap scheduler asks before it decides to publish host sequence lengths (`seq_lens_cpu`): the
        target's backend, and the step itself, whose host checks and verify input read them (without this a
        sync-free backend such as triton's left them None and the first overlapped decode stopped)."""
        return (self.target_worker.model_runner.attn_backend, NEEDS_HOST_LENGTHS)

    @property
    def preloaded_weights_bytes(self) -> int:
        """The drafter's weights, already on the GPU: the scheduler adds them to the target's memory plan."""
        return sum(t.numel() * t.element_size() for t in self.drafter.state_dict().values())

    # --- the scheduler's lifecycle
    def alloc_memory_pool(self, memory_pool_config=None, req_to_token_pool=None, token_to_kv_pool_allocator=None):
        self._init_context()

    def init_attention_backends(self) -> None:
        from sglang.srt.runtime_context import get_exec

        from .hidden_capture import install_before_graphs
        from .server_args import fit_decode_graphs
        from .tree_gdn_backend import install

        fit_decode_graphs(resolved(self.server_args), get_exec().graph.cuda_graph_config.decode, self.name)
        install_before_graphs(self.model_runner)
        install(self.model_runner, self.draft_config.num_depths)
        self._install_capture()

    def init_cuda_graphs(self) -> None:
        self._init_width_control()
        self._warm_up(self._warm_up_sizes())

    def _build_tier(self, n: int) -> tuple:
        """(attention backend, TARGET_VERIFY graph runner or None, tree-verify workspace) of a verify of n nodes, made
        as SGLang's adaptive EAGLE makes its tiers (`eagle_worker_v2.build_adaptive_runtime_state`): while the
        release's speculative fields say n nodes (`_speculative_fields`)."""
        from .tree_gdn_backend import install

        runner = self.model_runner
        tier = dict(speculative_num_steps=verify_steps(self.name, n), speculative_num_draft_tokens=n)
        init_new_workspace = runner.init_new_workspace
        with self._speculative_fields(tier):
            try:
                backend = runner._get_attention_backend(init_new_workspace=True)
                workspace = install(runner, self.draft_config.num_depths, num_nodes=n)
                graphs = None
                if getattr(runner, self.graph_runner_attr) is not None:
                    graphs = self._graph_runner_class()(runner, attn_backend=backend, **tier)
            finally:
                runner.init_new_workspace = init_new_workspace
        return backend, graphs, workspace

    @contextmanager
    def _speculative_fields(self, values: dict):
        """0.5.23's resolved speculative fields overridden with `values` inside, restored after."""
        from sglang.srt.runtime_context import get_context, get_spec

        spec = get_spec()
        saved = {f: getattr(spec, f) for f in values}
        get_context().override("sglang_dflash.verify_width", **values)
        try:
            yield
        finally:
            get_context().override("sglang_dflash.verify_width", **saved)

    def _graph_runner_class(self):
        from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner

        return DecodeCudaGraphRunner

    def init_hicache_draft_plan(self) -> None:
        pass

    # --- one scheduler step
    def forward_batch_generation(self, batch, on_publish=None, grammar_barrier=None, pp_proxy_tensors=None):
        """One step. on_publish (the overlap scheduler's): called with the new sequence lengths once the target's
        commits are enqueued, before the drafter's context, so that the scheduler prepares the next batch meanwhile."""
        if batch.forward_mode.is_idle():
            raise ValueError(f"{self.name}: idle batches (DP attention) are not supported")
        self._check_batch(batch)
        publish = self._publisher(on_publish)
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            return self._forward_extend(batch, pp_proxy_tensors, publish)
        draft_input, published = batch.spec_info, []  # the verify replaces spec_info for the step

        def publish_once(new_seq_lens):
            published.append(True)
            publish(new_seq_lens)

        try:
            return self._forward_decode(batch, publish_once)
        except Exception as error:
            if published:  # the scheduler has the step's lengths: nothing to take back
                raise
            self._abort_batch(batch, error)  # before the publish: the batch's requests end, nothing emitted
            publish(batch.seq_lens)
            return self._empty_result(batch, self._roots(draft_input))

    def _publisher(self, on_publish):
        """What the step calls with the new lengths [bs] once the target's commits are enqueued."""
        return on_publish or (lambda new_seq_lens: None)

    def _empty_result(self, batch, bonus: Tensor):
        """A step that emits nothing: accept length 0 for every request (SGLang finishes each by its to_finish); the
        next draft input keeps the step's roots, bonus [bs]."""
        from sglang.srt.layers.logits_processor import LogitsProcessorOutput

        bs, seq_lens = len(batch.reqs), batch.seq_lens
        tokens = torch.zeros(bs * self.num_nodes, dtype=torch.long, device=seq_lens.device)
        accept_lens = torch.zeros(bs, dtype=torch.int32, device=seq_lens.device)
        logits = LogitsProcessorOutput(next_token_logits=None)
        return self._result(logits, tokens, accept_lens, bonus, seq_lens, False, bonus_emitted=False)

    def _result(self, logits_output, tokens: Tensor, accept_lens: Tensor, bonus: Tensor, new_seq_lens: Tensor,
                can_run_cuda_graph: bool, bonus_emitted: bool = True):  # fmt: skip
        """The step's GenerationBatchResult: tokens [bs * N] (row i's first accept_lens[i] are emitted), the new
        lengths [bs] and the next step's draft input (the bonus [bs])."""
        from sglang.srt.managers.utils import GenerationBatchResult

        return GenerationBatchResult(
            logits_output=logits_output,
            next_token_ids=tokens,
            accept_lens=accept_lens,
            can_run_cuda_graph=can_run_cuda_graph,
            next_draft_input=self._draft_input(bonus, new_seq_lens),
            **self._result_fields(new_seq_lens, bonus_emitted),
        )

    def _result_fields(self, new_seq_lens: Tensor, bonus_emitted: bool) -> dict:
        """The release's own GenerationBatchResult fields: 0.5.23's row width, new lengths [bs] and non-draft tokens
        per request (SGLang counts accepted drafts as accept length minus it)."""
        return dict(speculative_num_draft_tokens=self.num_nodes, new_seq_lens=new_seq_lens,
                    num_non_draft_tokens_per_req=1 if bonus_emitted else 0)  # fmt: skip

    def _draft_input(self, bonus: Tensor, new_seq_lens: Tensor):
        from sglang.srt.speculative.draft_worker_common import make_draft_input_v2

        return make_draft_input_v2(bonus_tokens=bonus, new_seq_lens=new_seq_lens)

    def _forward_extend(self, batch, pp_proxy_tensors, publish):
        """Target prefill (first token sampled as usual), then the drafter's context for the extend tokens."""
        result = self.target_worker.forward_batch_generation(batch, pp_proxy_tensors=pp_proxy_tensors)
        result.new_seq_lens = batch.seq_lens
        publish(result.new_seq_lens)
        ext, pre = self._extend_lengths(batch)
        for p, e in zip(pre, ext):
            self._check_fits(p + e)
        taps = self.capture.taps(sum(ext))
        rows, nodes, starts = extend_tap_layout(pre, ext, device=taps.device)
        self.drafter.append_context(self.cache, taps[rows], batch.req_pool_indices.long(), starts, nodes)
        for req, p, e in zip(batch.reqs, pre, ext):
            self.ctx_lens.set(request_slot(req), p + e)
        result.logits_output.hidden_states = None
        result.next_draft_input = self._draft_input(result.next_token_ids, batch.seq_lens)
        return result

    def _extend_lengths(self, batch) -> tuple[list[int], list[int]]:
        """(extend lengths, prefix lengths) of an extend batch."""
        return list(batch.extend_lens), list(batch.prefix_lens)

    def _forward_decode(self, batch, publish):
        """draft -> verify -> accept -> commit, publish -> drafter context. Reads nothing back from the device: under
        the overlap scheduler the host prepares the next batch while this one runs (host values: the scheduler's)."""
        if batch.seq_lens.is_cuda:  # the overlap scheduler made it on its own stream
            batch.seq_lens.record_stream(torch.cuda.current_stream(batch.seq_lens.device))
        slots_cpu, seq_cpu, faults = self._check_step(batch)
        draft_slots, draft_lens = self._drafter_rows(batch, faults)
        keys, nodes, start = self._choose_width(batch)
        self.profile.start()
        tree, drafted = self._draft(batch, draft_slots, draft_lens, nodes)
        self.profile.mark("tree")
        logits, tree_gdn, graph_bs, result = self._verify(batch, tree, seq_cpu)
        self.profile.mark("verify")
        acc = self._accept(batch, tree, logits)
        self.profile.mark("accept")
        max_keep = min(nodes, tree.max_depth + 1)  # nodes an accepted path may hold, the root included
        graph_bs = graph_bs if result.can_run_cuda_graph else None
        tokens, accept_lens, new_seq_lens = self._commit(batch, tree, acc, seq_cpu, max_keep, tree_gdn, graph_bs)
        if self.width is not None:  # a step not replayed from a graph is no graph's cost (graph_bs None)
            self.width.record(keys, nodes, *drafted, acc.accept_len, graph_bs, start)
        result.logits_output.hidden_states = result.logits_output.next_token_logits = None  # [bs * N, V]: read
        tokens = F.pad(tokens, (0, self.num_nodes - nodes))  # rows as wide as the widest tier (the scheduler's stride)
        step = self._result(result.logits_output, tokens.reshape(-1), accept_lens, acc.bonus_tokens, new_seq_lens,
                            result.can_run_cuda_graph)  # fmt: skip
        publish(new_seq_lens)  # after the target's KV and GDN commits (SGLang's own DFLASH: the same point)
        try:
            self._append_verified(len(batch.reqs), draft_slots, draft_lens, acc.accepted_nodes, nodes)
            for i, (slot, s) in enumerate(zip(slots_cpu, seq_cpu)):
                if i not in faults:
                    self.ctx_lens.set(slot, s + 1, up_to=s + max_keep)  # the accepted count is on the device
        except Exception as error:  # the step's tokens stand; the requests' drafter context does not
            self._abort_batch(batch, error)
        self.profile.mark("context")
        self.profile.end(len(batch.reqs), nodes if self.width is not None else None)
        return step

    def _choose_width(self, batch) -> tuple[list | None, int, object]:
        """(request ids, this step's verify width, its start event): the width controller's choice, its tier made the
        target's (`_activate_tier`); without the controller (None, --speculative-num-draft-tokens, None)."""
        if self.width is None:
            return None, self.num_nodes, None
        keys = [req.rid for req in batch.reqs]
        nodes = self.width.nodes(keys, self._graph_batch_size(len(keys)))
        self._activate_tier(nodes)
        return keys, nodes, self.width.start()

    def _draft(self, batch, slots: Tensor, seq_lens: Tensor, nodes: int) -> tuple[DraftTree, tuple | None]:
        """One drafter pass from each request's bonus token (the root) at the drafter's slots and lengths [bs]
        (`_drafter_rows`) -> the chain or tree to verify (its first `nodes` nodes) and, with the width controller, the
        widest tree's node probabilities and depths [bs, num_nodes - 1] (None without)."""
        roots = self._roots(batch.spec_info).long()
        hidden, local = self._run_drafter(roots, slots, seq_lens)
        self.profile.mark("drafter")
        if self.width is None:
            return self._build_tree(roots, hidden, local), None
        tree, probs = self._marginal_tree(roots, local)
        return tree.prefix(nodes), (probs, tree.depths[:, 1:])

    def _roots(self, draft_input) -> Tensor:
        """The previous step's bonus tokens [bs]: this step's roots."""
        return draft_input.bonus_tokens

    def _verify(self, batch, tree: DraftTree, seq_cpu: list[int]):
        """TARGET_VERIFY of the trees over req_to_token[seq_len : seq_len + N] (the scheduler mapped the slots).
        Returns (logits [bs, N, V], tree-verify workspace, graph batch size or None, the target's result)."""
        spec_info, tree_gdn, graph_bs = self._verify_input(batch, tree, seq_cpu)
        batch.spec_info = spec_info  # the scheduler restores the batch's fields after the step
        forward_batch, planned = self._prepare_verify(spec_info, batch)
        self.profile.mark("prepare")
        result = self.target_worker.forward_batch_generation(None, forward_batch=forward_batch, is_verify=True, **planned)
        logits = result.logits_output.next_token_logits.view(len(batch.reqs), tree.num_nodes, -1)
        return logits, tree_gdn, graph_bs, result

    def _prepare_verify(self, spec_info, batch) -> tuple:
        """(the verify's forward batch over req_to_token[seq_len : seq_len + N], the target forward's extra keywords)."""
        from sglang.srt.speculative.eagle_utils import eagle_prepare_for_verify

        forward_batch, _ = eagle_prepare_for_verify(spec_info, self.model_runner.req_to_token_pool, batch, self.target_worker)
        return forward_batch, {}

    def _accept(self, batch, tree: DraftTree, logits: Tensor) -> Acceptance:
        """Greedy or sampled acceptance (rank 0's draws at TP > 1)."""
        sampling = sampling_args(batch.sampling_info)
        if sampling is None:
            return accept_greedy(tree, logits)
        acc = accept_sampling(tree, logits, **sampling)
        if self.tp_size > 1:
            broadcast_decisions([acc.accept_len, acc.accepted_nodes, acc.bonus_tokens], self.tp_src, self.tp_group)
        return acc

    def _commit(self, batch, tree: DraftTree, acc: Acceptance, seq_cpu: list[int], max_keep: int, tree_gdn,
                graph_bs: int | None) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
        """The accepted nodes' KV slots to the front of each window and their GDN states (and extra_buffer's tracking
        states). Returns (tokens [bs, N]: row i's first accept_lens[i] are the accepted tokens and the bonus,
        accept_lens int32 [bs], new sequence lengths [bs])."""
        bs, runner = len(batch.reqs), self.model_runner
        slots, seq_lens = batch.req_pool_indices, batch.seq_lens
        tokens, accept_lens, new_seq_lens = commit_accepted(runner.req_to_token_pool.req_to_token, slots, seq_lens,
                                                            tree.token_ids, acc.accepted_nodes, acc.accept_len,
                                                            acc.bonus_tokens)  # fmt: skip
        self.profile.mark("commit")
        mamba_slots = runner.attn_backend.linear_attn_backend.forward_metadata.mamba_cache_indices[:bs]
        if batch.mamba_track_indices is not None:  # extra_buffer: the state at a tracking point, for the radix cache
            interval = self._track_interval(batch)
            rows = track_candidates(seq_cpu, max_keep, interval)
            if rows:
                cut = track_cuts(seq_lens.long(), accept_lens, interval)
                tree_gdn.track(runner.req_to_token_pool, mamba_slots, batch.mamba_track_indices[:bs], acc.accepted_nodes,
                               cut, graph_bs, rows)  # fmt: skip
        tree_gdn.commit(runner.req_to_token_pool, mamba_slots, acc.accepted_nodes, graph_bs)
        self.profile.mark("gdn_commit")
        return tokens, accept_lens, new_seq_lens

    def _track_interval(self, batch) -> int:
        """The prefix-cache tracking grid of SGLang 0.5.23's extra_buffer: the least common multiple of the mamba
        checkpoint grid and --mamba-track-interval (its own verify tracks there)."""
        from sglang.srt.runtime_context import mamba_track_grid

        return mamba_track_grid(batch.tree_cache.page_size)


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
