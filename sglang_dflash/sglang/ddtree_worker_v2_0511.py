"""DDTreeWorkerV2For0511: the spec-v2 worker (`ddtree_worker_v2`) on SGLang 0.5.11's spec-v2 schema.

0.5.11 runs spec v2 only under its overlap scheduler, its default (--disable-overlap-schedule is refused for ours:
`algorithm.refuse_non_overlap`). What its schema changes:

  construction  the scheduler passes the ranks too and calls no lifecycle method: the phases run in __init__ (the
                target's taps went on before its graphs: the plugin's init_device_graphs)
  draft_worker  the scheduler reads a spec-v2 worker's draft KV pool as draft_worker.draft_runner: the target's
  step input    a ModelWorkerBatch (extend_seq_lens / extend_prefix_lens, no batch_size(), no tree_cache)
  draft input   EAGLE's: the bonus as verified_id; zero top-k and hidden rows [bs, 1] for its future map; the new
                lengths, which the host reads once the `verify_done` event has passed (`maybe_wait_verify_done`):
                recording that event is this schema's publish
  verify        planned by EAGLE's `prepare_for_v2_verify` (attention metadata or graph replay), then the target
                forward with skip_attn_backend_init
  result        GenerationBatchResult without 0.5.23's speculative_num_draft_tokens / new_seq_lens; SGLang counts a
                step's accepted drafts as accept length - 1, so an aborted step (length 0) gives -1, which the
                plugin's hook on Req.update_spec_acceptance_histogram leaves out
  tracking      extra_buffer tracks every --mamba-track-interval tokens

The CPU tests run its step by hand and its draft input through 0.5.11's own FutureMap; the GPU harness and serving
suite run it (RESULTS).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from types import SimpleNamespace

import torch
from torch import Tensor

from ..ddtree import Acceptance, DraftTree
from .ddtree_worker_v2 import DDTreeWorkerV2

logger = logging.getLogger(__name__)

NAN_LOGIT = -1e5  # SGLang 0.5.11's sampler puts NaN logits here under --enable-nan-detection


def screen_nan(logits: Tensor, enabled: bool) -> Tensor:
    """SGLang 0.5.11's --enable-nan-detection, applied to the verify logits as its sampler applies it to a decode's:
    NaN entries become NAN_LOGIT, with its warning (and its error under crash_on_warnings), so the tokens are what
    stock SGLang with the flag would emit. Off: logits as they are, unread.
    The check reads one flag back to the host, as SGLang's does."""
    if not enabled or not bool(torch.isnan(logits).any()):
        return logits
    from sglang.srt.utils import crash_on_warnings

    logger.warning("Detected errors during sampling! NaN in the logits.")
    if crash_on_warnings():
        raise ValueError("Detected errors during sampling! NaN in the logits.")
    return logits.masked_fill(torch.isnan(logits), NAN_LOGIT)


class DDTreeWorkerV2For0511(DDTreeWorkerV2):
    """DDTREE or DFLASH_CHAIN on 0.5.11's spec v2 (its overlap scheduler); see the module docstring."""

    graph_runner_attr = "graph_runner"

    def __init__(self, server_args, gpu_id: int, nccl_port: int, target_worker, tp_rank: int, **_ranks):
        self._verify_done = None  # the step's event, recorded at the publish
        self.nan_detection = bool(server_args.enable_nan_detection)
        super().__init__(server_args, gpu_id, nccl_port, target_worker, tp_rank=tp_rank)
        self._install_capture()
        self._init_context()
        self.init_cuda_graphs()

    def update_weights_from_disk(self, recv_req) -> tuple[bool, str]:
        """0.5.11's scheduler asks its speculative worker after the target's weights were updated (from disk or IPC):
        the drafter keeps its own; its embedding and LM head are the target's tensors. (Not passed on to the target
        worker, which has just been updated.)"""
        return True, f"{self.name}: drafter weights unchanged"

    update_weights_from_ipc = update_weights_from_disk

    def _accept(self, batch, tree: DraftTree, logits: Tensor) -> Acceptance:
        return super()._accept(batch, tree, screen_nan(logits, self.nan_detection))

    @property
    def draft_worker(self):
        return SimpleNamespace(draft_runner=self.model_runner)  # its token_to_kv_pool: the target's

    def _publisher(self, on_publish):
        self._verify_done = event = torch.get_device_module(self.device).Event()
        return lambda new_seq_lens: event.record()

    @contextmanager
    def _speculative_fields(self, values: dict):
        """0.5.11's server arguments (read by its backends and graph runner) set to `values` inside, restored after; the
        scheduler's KV reservation, made before, keeps --speculative-num-draft-tokens."""
        args = self.model_runner.server_args
        saved = {f: getattr(args, f) for f in values}
        for f, v in values.items():
            setattr(args, f, v)
        try:
            yield
        finally:
            for f, v in saved.items():
                setattr(args, f, v)

    def _graph_runner_class(self):
        from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner

        return CudaGraphRunner

    def _roots(self, draft_input) -> Tensor:
        return draft_input.verified_id

    def _extend_lengths(self, batch) -> tuple[list[int], list[int]]:
        return list(batch.extend_seq_lens), list(batch.extend_prefix_lens)

    def _prepare_verify(self, spec_info, batch) -> tuple:
        forward_batch, _ = spec_info.prepare_for_v2_verify(self.model_runner.req_to_token_pool, batch, self.target_worker)
        return forward_batch, dict(skip_attn_backend_init=True)

    def _warm_up(self, sizes: list[int]) -> None:
        """Also `prepare_for_v2_verify`'s cache-location kernel at each power of two up to --max-running-requests: it
        is built per next power of two of the batch size (0.5.23's is not), 0.1-0.2 s the first time a server's batch
        reaches one. Reads row 0 of req_to_token, writes only a new buffer."""
        from sglang.srt.speculative.eagle_info_v2 import assign_extend_cache_locs_func

        super()._warm_up(sizes)
        most = self.server_args.max_running_requests or 1
        req_to_token = self.model_runner.req_to_token_pool.req_to_token
        for R in sorted({1 << (r - 1).bit_length() for r in range(1, most + 1)}):
            zeros = torch.zeros(R, dtype=torch.int64, device=self.device)
            assign_extend_cache_locs_func(zeros, req_to_token, zeros, zeros + self.num_nodes, R, self.num_nodes, self.device)

    def _track_interval(self, batch) -> int:
        return self.server_args.mamba_track_interval

    def _result_fields(self, new_seq_lens: Tensor, bonus_emitted: bool) -> dict:
        return {}  # none of 0.5.23's: the row width is the worker's, the lengths ride in the draft input

    def _draft_input(self, bonus: Tensor, new_seq_lens: Tensor):
        from sglang.srt.speculative.eagle_info import EagleDraftInput

        zeros = bonus.new_zeros(bonus.shape[0], 1)
        return EagleDraftInput(
            verified_id=bonus, new_seq_lens=new_seq_lens, verify_done=self._verify_done,
            topk_p=zeros.float(), topk_index=zeros.long(), hidden_states=zeros.to(self.model_runner.model_config.dtype),
        )  # fmt: skip
