"""The hooks, each around one SGLang function, in SGLang's HookRegistry AROUND form: `hook(original, *args, **kwargs)`.

`versions` says which function each goes around, in which release, and why. The stock hooks call SGLang's own code
unchanged for any algorithm but ours; the runtime hooks exist only in a scheduler process that serves ours. The
work itself is done by the SGLang-facing modules (`..server_args`, `..memory_plan`, `..tree_gdn_backend`, ...),
imported where a hook first needs them: a stock SGLang process imports none of them (nor torch through us).
"""

from __future__ import annotations

import sys

from ... import env
from ..algorithm import DraftTreeAlgorithm, is_ours
from ..names import ALGORITHMS, NUM_REQS_ATTR, canonical_name, resolved

_overlap_spec_v2 = False  # the running release runs spec v2 under its overlap scheduler only (0.5.11, `configure`)
_off: str | None = None  # why the plugin turned off after some stock hooks were on (`disable`)
_command_line = False  # a launch_server command line asked for ours: refusals print one line, exit code 2

CHOICES_HELP = (
    " DDTREE: a DFlash block drafter's best --speculative-num-draft-tokens - 1 prefixes verified as one tree; "
    "DFLASH_CHAIN: the same drafter verified as a chain (both from sglang-dflash)."
)


def configure(overlap_spec_v2: bool) -> None:
    global _overlap_spec_v2
    _overlap_spec_v2 = overlap_spec_v2


def disable(reason: str) -> None:
    """The plugin turned off (a later check failed): our names are refused from now on, with the reason."""
    global _off
    _off = reason


def command_line() -> None:
    """This process is a launch_server command line that asks for ours (`activate.refuse_if_asked`)."""
    global _command_line
    _command_line = True


def _resolving(resolve, args) -> None:
    """resolve(args); on a command line, a refusal of our server arguments is one line on stderr and exit code 2
    (the Engine API gets the exception)."""
    from ..server_args import ServerArgsError

    try:
        resolve(args)
    except ServerArgsError as e:
        if not _command_line:
            raise
        from ...cli import Refusal

        raise Refusal(str(e)) from None


def ours(name) -> str | None:
    """Our canonical name for a --speculative-algorithm value, or None where the name is SGLang's."""
    return canonical_name(name, env.OVERRIDE_DFLASH.on())


# ----------------------------------------------------------------------------- stock: every SGLang process


def from_string(original, cls, name):
    name_ours = ours(name)
    if name_ours and _off:
        raise ValueError(f"--speculative-algorithm {name} needs sglang-dflash, which is off: {_off}")
    return DraftTreeAlgorithm(name_ours) if name_ours else original(cls, name)


def add_cli_args(original, parser):
    original(parser)
    for action in parser._actions:
        if "--speculative-algorithm" in action.option_strings:
            if action.choices is not None:
                action.choices = list(action.choices) + [a for a in ALGORITHMS if a not in action.choices]
            action.help = (action.help or "Speculative algorithm.") + CHOICES_HELP + (
                " DFLASH is SGLang's own (SGLANG_DFLASH_OVERRIDE_DFLASH=1: DFLASH_CHAIN).")  # fmt: skip


def post_init(original, self):
    name_ours = ours(self.speculative_algorithm)
    if name_ours:
        from ..server_args import USER_GRAPH_SIZES

        self.speculative_algorithm = name_ours
        setattr(self, USER_GRAPH_SIZES, self.cuda_graph_bs is not None or self.cuda_graph_max_bs is not None)
    return original(self)


def model_specific_adjustments(original, self):
    if is_ours(self):
        from ..server_args import resolve_radix_cache

        _resolving(resolve_radix_cache, self)
    return original(self)


def speculative_decoding(original, self):
    if is_ours(self):
        from ..algorithm import refuse_non_overlap
        from ..server_args import resolve_speculative_args

        def resolve(args):
            resolve_speculative_args(args)
            if _overlap_spec_v2:  # after the checks of flags that turn overlap off themselves (--pp-size)
                refuse_non_overlap(args)

        _resolving(resolve, self)
    return original(self)


# ----------------------------------------------------------------------------- runtime: a scheduler serving ours


def add_request_to_queue(original, self, req, *args, **kwargs):
    """A request the workers cannot serve yet (`request_unsupported`) or whose prompt does not fit the drafter's
    positions (`fit_to_drafter`, which also caps max_new_tokens) finishes at admission with an error naming why."""
    if is_ours(getattr(self, "spec_algorithm", None)) and not req.finished():
        from ..worker_common import fit_to_drafter, request_unsupported

        worker = self.draft_worker
        # the overlap scheduler runs one more step after a request's last: its verify starts up to N tokens further
        reach = worker.num_nodes * (2 if getattr(self, "enable_overlap", False) else 1)
        message = request_unsupported(req) or fit_to_drafter(req, worker.max_len, reach)
        if message:
            req.set_finish_with_abort(message)
    return original(self, req, *args, **kwargs)


def acceptance_histogram(original, self, accepted_draft_tokens, *args, **kwargs):
    """0.5.11's spec-v2 output processing counts a step's accepted drafts as accept length - 1; a step of ours that
    ended its batch aborted (accept length 0) accepted none and is left out, as the request ends with it."""
    if accepted_draft_tokens < 0:
        return None
    return original(self, accepted_draft_tokens, *args, **kwargs)


def check_finished(original, self, new_accepted_len: int = 1, *args, **kwargs):
    """A spec-v2 step's tokens checked one at a time, as stock decode checks them (0.5.23: `update_finish_state`),
    where checking them at once differs: 0.5.11 checks a step's stop strings and regexes once, over its last
    stop_str_max_len + 1 tokens, so one completed early in the step is missed, and one found sets no finished_len
    (tokens after it are emitted); and it checks the length cap before stop tokens, so a step that holds an EOS and
    crosses max_new_tokens ends at the cap. 0.5.23 locates the first stop string in list order that the step holds,
    not the first completed. output_ids stays the same object (truncated and refilled in place)."""
    ids, sp = self.output_ids, self.sampling_params
    capped = sp.max_new_tokens is not None and len(ids) >= sp.max_new_tokens
    if new_accepted_len <= 1 or self.finished() or not (sp.stop_strs or sp.stop_regex_strs or capped):
        return original(self, new_accepted_len, *args, **kwargs)
    start = len(ids) - new_accepted_len
    tail = ids[start:]
    del ids[start:]
    try:
        for token in tail:
            ids.append(token)
            original(self, 1, *args, **kwargs)
            if self.finished():
                if self.finished_len is None:
                    self.finished_len = len(ids)
                return None
    finally:
        ids.extend(tail[len(ids) - start :])  # its NaN check may have rewritten a token in place: kept
    return None


def init_device_graphs(original, self):
    """The target runner's hidden-state capture and tree-verify workspace, installed before its graphs are captured
    (should this not have run, the worker installs the capture itself and recaptures once)."""
    if is_ours(self.server_args) and not self.is_draft_worker:
        from ..hidden_capture import install_before_graphs
        from ..tree_gdn_backend import install

        install_before_graphs(self)
        install(self)
    return original(self)


def replay_metadata(original, self, bs, req_pool_indices, forward_mode, spec_info, seq_lens_cpu, *args, **kwargs):
    """SGLang's GDN backend counts CUDA-graph padding as the requests whose seq_lens_cpu equals the graph fill value
    (1), so a real request of sequence length 1 (a one-token prompt at its first verify) is taken for padding and
    verified from state slot -1, and the batch's last request loses its slot. For verify batches of our workers,
    which record the real request count on their spec_info, the real entries are counted as real; the values are
    only counted there, never used as lengths."""
    n = getattr(spec_info, NUM_REQS_ATTR, None)
    if n is not None and seq_lens_cpu is not None:
        fill = self.get_cuda_graph_seq_len_fill_value()
        seq_lens_cpu = seq_lens_cpu.clone()
        seq_lens_cpu[:n] = seq_lens_cpu[:n].masked_fill(seq_lens_cpu[:n] == fill, fill + 1)
    return original(self, bs, req_pool_indices, forward_mode, spec_info, seq_lens_cpu, *args, **kwargs)


def hybrid_forward_extend(original, self, layer, forward_batch, save_kv_cache=True, q=None, k=None, v=None, *args, **kwargs):
    """The full-attention layers' TARGET_VERIFY through the tree-verify workspace where it takes them; every other
    call is SGLang's own."""
    from .. import tree_gdn_backend

    ws = tree_gdn_backend.workspace()
    if (
        ws is not None
        and forward_batch.forward_mode.is_target_verify()
        and layer is not None
        and layer.layer_id in self.full_attn_layers
        and ws.attention_for(self.full_attn_backend)
    ):
        pools = tree_gdn_backend.forward_pools(forward_batch, self.full_attn_backend)
        if tree_gdn_backend.attention_serves(layer, pools[1], q):
            first = layer.layer_id == min(self.full_attn_layers)  # makes the step's mask
            return ws.attention(layer, forward_batch, pools, q, k, v, save_kv_cache, first)
    return original(self, layer, forward_batch, save_kv_cache, q, k, v, *args, **kwargs)


def gdn_forward_extend(original, self, layer, forward_batch, mixed_qkv, a, b, *args, **kwargs):
    """The GDN layers' TARGET_VERIFY through the tree-verify workspace once one is installed; otherwise SGLang's."""
    from ..tree_gdn_backend import workspace

    ws = workspace()
    if ws is not None and forward_batch.forward_mode.is_target_verify():
        return ws.verify(self, layer, forward_batch, mixed_qkv, a, b)
    return original(self, layer, forward_batch, mixed_qkv, a, b, *args, **kwargs)


def req_to_token_pool_init(original, self, *args, **kwargs):
    """SGLang's per-node GDN verify states (N states per request and GDN layer, about 2.5 GB per request for
    Qwen3.6-27B at TP=2 and 33 nodes) for one request slot: our tree verify replaces them (SGLang still asserts
    they exist; `handle_max_mamba_cache` gives the memory plan the rest back)."""
    from .. import tree_gdn_backend

    if "mamba_spec_state_size" in kwargs:
        tree_gdn_backend.logger.info("sglang-dflash: tree GDN verify: SGLang's per-node GDN states allocated for 1 slot, "
                                     "not %s", kwargs["mamba_spec_state_size"])  # fmt: skip
        kwargs["mamba_spec_state_size"] = 0
    return original(self, *args, **kwargs)


def handle_max_mamba_cache(original, self, total_rest_memory, *args, **kwargs):
    """0.5.11, before the KV cache is sized: the memory left (GiB) less the drafter's weights (`memory_plan.reserve_gib`)
    and the verify-width tiers' graphs (`memory_plan.tiers_gib`), plus, since our tree-GDN verify replaces them,
    SGLang's reservation of per-node GDN states (mamba_cache_per_req x requests x verify tokens) but for one request
    (at 27B, TP=2, 33 nodes and 32 requests about 80 GB)."""
    server_args = resolved(self.server_args)
    if not self.is_draft_worker and server_args.max_running_requests:
        from ..memory_plan import reserve_gib, tiers_gib
        from ..server_args import graph_batch_sizes

        requests = server_args.max_running_requests // (self.dp_size if server_args.enable_dp_attention else 1)
        per_req = self.mambaish_config.mamba2_cache_params.mamba_cache_per_req
        states = per_req * (requests - 1) * server_args.speculative_num_draft_tokens / (1 << 30)
        held = reserve_gib(server_args, self.model_config.dtype) + tiers_gib(server_args, graph_batch_sizes(server_args))
        total_rest_memory += states - held
    return original(self, total_rest_memory, *args, **kwargs)


def plan_mamba_states(original, self, total_rest_memory, *args, **kwargs):
    """0.5.23 (`KVCacheConfigurator._handle_max_mamba_cache`): for ours (their tree verify), the plan reserves SGLang's
    per-node GDN verify states for the one slot the pool keeps (`req_to_token_pool_init`), not for every running
    request: SGLang plans as it does where a server allocates none (its `_pd_prefill_skips_mamba_spec_state`, for
    this call only), then one slot's states are taken off (`memory_plan.one_slot_states_gib`), and the verify-width
    tiers' graphs (`memory_plan.tiers_gib`, at the decode graph sizes as they will be cut) unless SGLang sizes the KV cache
    after capture (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING: it then sees them)."""
    from ..memory_plan import one_slot_states_gib, tiers_gib

    module = sys.modules[original.__module__]
    skips = getattr(module, "_pd_prefill_skips_mamba_spec_state", None)  # absent: SGLang's reservation stands (safe)
    if skips is None or self.is_draft_worker or not is_ours(self.spec_algorithm):
        return original(self, total_rest_memory, *args, **kwargs)
    module._pd_prefill_skips_mamba_spec_state = lambda: True
    try:
        rest = original(self, total_rest_memory, *args, **kwargs)
    finally:
        module._pd_prefill_skips_mamba_spec_state = skips
    tiers = 0.0
    if not getattr(self, "post_capture_kv_active", False):
        from sglang.srt.runtime_context import get_exec

        from ..server_args import decode_graph_sizes

        sizes, user_gave = decode_graph_sizes(resolved(self.server_args), get_exec().graph.cuda_graph_config.decode)
        tiers = tiers_gib(self.server_args, sizes, cut=not user_gave)
    return rest - one_slot_states_gib(self) - tiers


def compute_cell_size(original, self, mr, num_layers, *args, **kwargs):
    """Every KV-cache token also pays for the drafter's context K/V (`memory_plan.draft_cell_bytes`); `mr` is 0.5.23's
    KV-cache configurator."""
    from ..memory_plan import draft_cell_bytes

    size = original(self, mr, num_layers, *args, **kwargs)
    return size + (0 if getattr(mr, "is_draft_worker", False) else draft_cell_bytes(mr))


def graph_spec_info(original, self, num_tokens, *args, **kwargs):
    """0.5.23: the verify input of the target's captured TARGET_VERIFY graphs, for ours (`dummy_verify_input`)."""
    runner = self.model_runner
    if not is_ours(runner.spec_algorithm) or runner.is_draft_worker:
        return original(self, num_tokens, *args, **kwargs)
    from ..ddtree_worker_v2 import dummy_verify_input

    return dummy_verify_input(self.buffers.custom_mask, self.speculative_num_draft_tokens)


def dummy_verify_input(original, spec_algorithm, custom_mask, num_tokens_per_req, is_draft_worker, *args, **kwargs):
    """0.5.23: the same for the graph runners' shared capture path."""
    if not is_ours(spec_algorithm) or is_draft_worker:
        return original(spec_algorithm, custom_mask, num_tokens_per_req, is_draft_worker, *args, **kwargs)
    from ..ddtree_worker_v2 import dummy_verify_input as build

    return build(custom_mask, num_tokens_per_req)


def validate_server_args(args) -> None:
    """0.5.23: `SpeculativeAlgorithm.register`'s server-argument validation of ours (SGLang runs it on a recorder of
    the fields it writes)."""
    from ..server_args import resolve_speculative_args

    _resolving(resolve_speculative_args, args)


def profile_decode(original, self, *args, **kwargs):
    """With SGLANG_DFLASH_PROFILE set: each plain decode forward of the target (stock SGLang's decode step; our
    workers' target forwards are TARGET_VERIFY or EXTEND, or on 0.5.23 a prepared forward batch and no batch) timed
    as the phase "decode" of `step_profile`. The batch comes first, by position or by keyword (0.5.23's workers pass
    `batch=None`; up to 0.5.11 it is `model_worker_batch`)."""
    batch = args[0] if args else kwargs.get("batch", kwargs.get("model_worker_batch"))
    if batch is None or not batch.forward_mode.is_decode():
        return original(self, *args, **kwargs)
    profile = vars(self).get("_sglang_dflash_profile")
    if profile is None:
        import torch

        from ..step_profile import StepProfile

        device = torch.device(self.model_runner.device)
        profile = self._sglang_dflash_profile = StepProfile.from_env(device, _tp_rank(self))
    profile.start()
    out = original(self, *args, **kwargs)
    profile.mark("decode")
    profile.end(len(batch.seq_lens))
    return out


def _tp_rank(worker) -> int:
    """A TpModelWorker's tensor-parallel rank: its own attribute up to 0.5.11, SGLang's runtime context on 0.5.23."""
    if hasattr(worker, "tp_rank"):
        return worker.tp_rank
    from sglang.srt.runtime_context import get_parallel

    return get_parallel().tp_rank
