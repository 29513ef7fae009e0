"""The patches `bootstrap` applies to SGLang's modules, class attributes only (module-level
`from x import f` bindings would go stale). Each is idempotent and changes nothing for other
algorithm names, except that `--speculative-algorithm` lists DFLASH and DDTREE among its choices."""

from __future__ import annotations

import functools
import logging
import os

from .algorithm import ALGORITHMS, DraftTreeAlgorithm

_MARK = "_sglang_dflash_patched"


def claim(cls) -> bool:
    """True once per class: marks cls as patched by us. The mark is read from cls's own namespace, never
    inherited: GDNAttnBackend subclasses MambaAttnBackendBase, and each has its own patch."""
    if vars(cls).get(_MARK, False):
        return False
    setattr(cls, _MARK, True)
    return True


def patch_module(module) -> None:
    patch = {
        "sglang.srt.speculative.spec_info": patch_spec_info,
        "sglang.srt.server_args": patch_server_args,
        "sglang.srt.models.registry": register_draft_model,
        "sglang.srt.model_executor.model_runner": patch_model_runner,
        "sglang.srt.layers.attention.hybrid_linear_attn_backend": patch_hybrid_linear_attn_backend,
        "sglang.srt.layers.attention.linear.gdn_backend": patch_gdn_backend,
        "sglang.srt.mem_cache.memory_pool": patch_memory_pool,
        "sglang.srt.model_executor.model_runner_kv_cache_mixin": patch_kv_cache_mixin,
        "sglang.srt.managers.scheduler": patch_scheduler,
        "sglang.srt.managers.tp_worker": patch_tp_worker,
    }.get(module.__name__)
    if patch is not None:
        patch(module)


def patch_model_runner(module) -> None:
    """The target's hidden-state capture, installed just before its CUDA graphs are captured
    (`hidden_capture.patch_model_runner`; only for the experimental DFLASH worker's runs)."""
    from .hidden_capture import patch_model_runner as patch

    patch(module)


# Set on our EagleVerifyInput: the number of real requests in the verify batch.
NUM_REQS_ATTR = "sglang_dflash_num_reqs"


def patch_mamba_replay(module) -> None:
    """SGLang 0.5.10's GDN backend counts CUDA-graph padding as the requests whose seq_lens_cpu equals the
    graph fill value (1), so a real request of sequence length 1 (a one-token prompt at its first verify)
    is taken for padding and verified from state slot -1, and the batch's LAST request loses its slot
    (measured in the harness: garbage tokens for that request; correct without CUDA graphs). For verify
    batches of our workers, which record the real request count on their spec_info, the real entries
    are counted as real; the values are only counted there, never used as lengths."""
    cls = module.MambaAttnBackendBase
    if not claim(cls):
        return
    original = cls._replay_metadata

    @functools.wraps(original)
    def _replay_metadata(self, bs, req_pool_indices, forward_mode, spec_info, seq_lens_cpu):
        n = getattr(spec_info, NUM_REQS_ATTR, None)
        if n is not None and seq_lens_cpu is not None:
            fill = self.get_cuda_graph_seq_len_fill_value()
            seq_lens_cpu = seq_lens_cpu.clone()
            seq_lens_cpu[:n] = seq_lens_cpu[:n].masked_fill(seq_lens_cpu[:n] == fill, fill + 1)
        return original(self, bs, req_pool_indices, forward_mode, spec_info, seq_lens_cpu)

    cls._replay_metadata = _replay_metadata


def patch_hybrid_linear_attn_backend(module) -> None:
    """The replay padding fix above (`patch_mamba_replay`), and the full-attention layers' TARGET_VERIFY through our
    tree attention when the tree verify has it on (`tree_gdn_backend.patch_hybrid_backend`; otherwise SGLang's own)."""
    from .tree_gdn_backend import patch_hybrid_backend

    patch_mamba_replay(module)
    patch_hybrid_backend(module)


def patch_gdn_backend(module) -> None:
    """The GDN layers' TARGET_VERIFY through our tree kernels, only once `tree_gdn_backend.install` ran
    (DFLASH/DDTREE served by our workers, unless SGLANG_DFLASH_TREE_GDN=0); otherwise SGLang's own path."""
    from .tree_gdn_backend import patch_gdn_backend as patch

    patch(module)


def patch_memory_pool(module) -> None:
    """SGLang's per-node GDN verify states allocated for one slot when our tree verify replaces them
    (`tree_gdn_backend.patch_memory_pool`; only when that tree verify runs)."""
    from .tree_gdn_backend import patch_memory_pool as patch

    patch(module)


def patch_kv_cache_mixin(module) -> None:
    """SGLang's memory plan holds the drafter back and stops reserving the per-node GDN verify states the tree
    verify does not allocate (`memory_plan.patch_kv_cache_mixin`; only when our workers serve)."""
    from .memory_plan import patch_kv_cache_mixin as patch

    patch(module)


def patch_scheduler(module) -> None:
    """Under DFLASH/DDTREE, a request the workers cannot serve yet (logprobs, grammar, min-p, penalties,
    logit_bias, custom logit processors: `dflash_worker.request_unsupported`) or whose prompt does not fit the
    drafter's positions (`fit_to_drafter`, which also caps max_new_tokens) finishes at admission with an error
    naming why, as SGLang aborts an over-long prompt; other algorithms are untouched."""
    cls = module.Scheduler
    if not claim(cls):
        return
    original = cls._add_request_to_queue

    @functools.wraps(original)
    def _add_request_to_queue(self, req, *args, **kwargs):
        if isinstance(getattr(self, "spec_algorithm", None), DraftTreeAlgorithm) and not req.finished():
            from .dflash_worker import fit_to_drafter, request_unsupported

            worker = self.draft_worker
            message = request_unsupported(req) or fit_to_drafter(req, worker.max_len, worker.num_nodes)
            if message:
                req.set_finish_with_abort(message)
        return original(self, req, *args, **kwargs)

    cls._add_request_to_queue = _add_request_to_queue


def patch_tp_worker(module) -> None:
    """With SGLANG_DFLASH_PROFILE set: each plain decode forward of the target (stock SGLang's decode step; our
    workers' target forwards are TARGET_VERIFY or EXTEND) timed as the phase "decode" of `step_profile`, so a stock
    run's steps are measured as the workers' are. Nothing without the variable."""
    import torch

    from .step_profile import ENV, StepProfile

    cls = module.TpModelWorker
    if not os.environ.get(ENV) or not claim(cls):
        return
    original = cls.forward_batch_generation

    @functools.wraps(original)
    def forward_batch_generation(self, model_worker_batch, *args, **kwargs):
        if not model_worker_batch.forward_mode.is_decode():
            return original(self, model_worker_batch, *args, **kwargs)
        profile = vars(self).get("_sglang_dflash_profile")
        if profile is None:
            profile = self._sglang_dflash_profile = StepProfile.from_env(torch.device(self.model_runner.device), self.tp_rank)
        profile.start()
        out = original(self, model_worker_batch, *args, **kwargs)
        profile.mark("decode")
        profile.end(len(model_worker_batch.seq_lens))
        return out

    cls.forward_batch_generation = forward_batch_generation


def register_draft_model(module) -> None:
    """`DFlashDraftModel` in SGLang's model registry, unless SGLang has its own. A failure is logged, never
    raised: the registry serves every model, and only a DFLASH/DDTREE start-up needs this one."""
    if "DFlashDraftModel" in module.ModelRegistry.models:
        return
    try:
        from .draft_model import DFlashDraftModel
    except Exception as e:  # noqa: BLE001
        logging.getLogger(__name__).warning("sglang-dflash: DFlashDraftModel not registered: %s", e)
        return
    module.ModelRegistry.models["DFlashDraftModel"] = DFlashDraftModel


def patch_spec_info(module) -> None:
    cls = module.SpeculativeAlgorithm
    if not claim(cls):
        return
    original = cls.from_string.__func__

    @functools.wraps(original)
    def from_string(klass, name):
        if isinstance(name, str) and name.upper() in ALGORITHMS and name.upper() not in klass.__members__:
            return DraftTreeAlgorithm(name.upper())
        return original(klass, name)

    cls.from_string = classmethod(from_string)


def patch_server_args(module) -> None:
    cls = module.ServerArgs
    if not claim(cls):
        return
    add_cli_args = cls.add_cli_args
    handle = cls._handle_speculative_decoding
    adjust = cls._handle_model_specific_adjustments

    @functools.wraps(add_cli_args)
    def add_cli_args_with_ours(parser):
        add_cli_args(parser)
        for action in parser._actions:
            if "--speculative-algorithm" in action.option_strings and action.choices is not None:
                action.choices = list(action.choices) + [a for a in ALGORITHMS if a not in action.choices]
                action.help = (action.help or "Speculative algorithm.") + (
                    " DFLASH: a DFlash block drafter verified as a chain; DDTREE: its best "
                    "--speculative-num-draft-tokens - 1 prefixes verified as one tree (both from sglang-dflash)."
                )

    @functools.wraps(handle)
    def handle_with_ours(self):
        from .server_args import is_ours, resolve_speculative_args

        if is_ours(self.speculative_algorithm):
            resolve_speculative_args(self)
        return handle(self)

    @functools.wraps(adjust)
    def adjust_with_ours(self):
        from .server_args import is_ours, resolve_radix_cache

        if is_ours(self.speculative_algorithm):
            resolve_radix_cache(self)
        return adjust(self)

    cls.add_cli_args = staticmethod(add_cli_args_with_ours)
    cls._handle_speculative_decoding = handle_with_ours
    cls._handle_model_specific_adjustments = adjust_with_ours
