"""Every SGLang internal the plugin patches, per supported release, with the shape it expects and why.

A `Patch` names its target as "module:Class.attribute" and the hook in `patches` that goes around it; `params` are
the leading parameters the original must have (its shape). `activate` checks every target of a release before it
touches anything: a missing module, class or attribute, or other parameters, and the plugin stays off.

- `stock` patches go on in every SGLang process: they only add our names to `--speculative-algorithm` and resolve
  our server arguments; for any other algorithm they call SGLang's own code unchanged.
- `runtime` patches go on in a scheduler process only when it serves our algorithm (`patches.scheduler_init`),
  before its model runner exists; a stock server never has them.
- `field_owners`: SGLang fields the worker fills by name (EAGLE's verify input), checked with the runtime patches.
- `registry`: the release has `SpeculativeAlgorithm.register` (0.5.23): our names are registered there, with their
  server-argument validation and worker factory, instead of patched into `from_string` and `--speculative-algorithm`.
- `overlap_spec_v2`: the release runs spec v2 under its overlap scheduler only (0.5.11, its default):
  --disable-overlap-schedule is refused for ours there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Patch:
    target: str  # "module:Class.attribute"
    hook: str  # the function in `patches` that goes around it
    params: tuple[str, ...]  # the original's leading parameters
    why: str

    @property
    def module(self) -> str:
        return self.target.split(":")[0]

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.target.split(":")[1].split("."))

    @property
    def dotted(self) -> str:
        return self.target.replace(":", ".")


@dataclass(frozen=True)
class Field:
    owner: str  # "module:Class"
    name: str  # a dataclass field or an attribute its __init__ sets


@dataclass(frozen=True)
class Release:
    versions: tuple[str, ...]
    stock: tuple[Patch, ...]
    runtime: tuple[Patch, ...]
    registry: bool = False
    overlap_spec_v2: bool = False

    @property
    def field_owners(self) -> tuple[Field, ...]:
        return VERIFY_INPUT_FIELDS


SPEC_INFO = "sglang.srt.speculative.spec_info"
SERVER_ARGS = "sglang.srt.server_args"
SCHEDULER = "sglang.srt.managers.scheduler"
MODEL_RUNNER = "sglang.srt.model_executor.model_runner"
HYBRID = "sglang.srt.layers.attention.hybrid_linear_attn_backend"
GDN = "sglang.srt.layers.attention.linear.gdn_backend"
MEMORY_POOL = "sglang.srt.mem_cache.memory_pool"
KV_MIXIN = "sglang.srt.model_executor.model_runner_kv_cache_mixin"
POOL_CONFIGURATOR = "sglang.srt.model_executor.pool_configurator"
DECODE_GRAPHS = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
KV_CONFIGURATOR = "sglang.srt.mem_cache.kv_cache_configurator"
BASE_GRAPHS = "sglang.srt.model_executor.runner.base_runner"
TP_WORKER = "sglang.srt.managers.tp_worker"
EAGLE_INFO = "sglang.srt.speculative.eagle_info"
SCHEDULE_BATCH = "sglang.srt.managers.schedule_batch"

NAMES = (  # our names and server arguments, where SGLang has no registry for them
    Patch(
        f"{SPEC_INFO}:SpeculativeAlgorithm.from_string",
        "from_string",
        ("cls", "name"),
        "our names resolve to `DraftTreeAlgorithm` values; every other name to SGLang's enum",
    ),
    Patch(
        f"{SERVER_ARGS}:ServerArgs.add_cli_args",
        "add_cli_args",
        ("parser",),
        "--speculative-algorithm lists DDTREE and DFLASH_CHAIN (its choices are a fixed list)",
    ),
    Patch(
        f"{SERVER_ARGS}:ServerArgs.__post_init__",
        "post_init",
        ("self",),
        "`DFLASH` becomes DFLASH_CHAIN where it is ours, before SGLang's checks read the name; whether the user gave "
        "CUDA-graph sizes, before SGLang fills in its defaults",
    ),
    Patch(
        f"{SERVER_ARGS}:ServerArgs._handle_model_specific_adjustments",
        "model_specific_adjustments",
        ("self",),
        "the hybrid model's mamba strategy for the radix cache, before SGLang's mamba checks",
    ),
    Patch(
        f"{SERVER_ARGS}:ServerArgs._handle_speculative_decoding",
        "speculative_decoding",
        ("self",),
        "our speculative defaults and refusals, before SGLang's own handling",
    ),
)

SCHEDULER_INIT = Patch(
    f"{SCHEDULER}:Scheduler.__init__",
    "scheduler_init",
    ("self", "server_args"),
    "the runtime patches, in a scheduler process that serves our algorithm, before its model runner exists",
)

STOCK = (*NAMES, SCHEDULER_INIT)

ADMISSION = Patch(
    f"{SCHEDULER}:Scheduler._add_request_to_queue",
    "add_request_to_queue",
    ("self", "req"),
    "requests the workers cannot serve are aborted at admission with a message",
)

RUNTIME_TREE_VERIFY = (
    Patch(
        f"{HYBRID}:MambaAttnBackendBase._replay_metadata",
        "replay_metadata",
        ("self", "bs", "req_pool_indices", "forward_mode", "spec_info", "seq_lens_cpu"),
        "a one-token request is not CUDA-graph padding in our verify batches",
    ),
    Patch(
        f"{HYBRID}:HybridLinearAttnBackend.forward_extend",
        "hybrid_forward_extend",
        ("self", "layer", "forward_batch", "save_kv_cache", "q", "k", "v"),
        "the full-attention layers' TARGET_VERIFY through our tree attention where it is faster",
    ),
    Patch(
        f"{GDN}:GDNAttnBackend.forward_extend",
        "gdn_forward_extend",
        ("self", "layer", "forward_batch", "mixed_qkv", "a", "b"),
        "the GDN layers' TARGET_VERIFY through our tree kernels",
    ),
    Patch(
        f"{MEMORY_POOL}:HybridReqToTokenPool.__init__",
        "req_to_token_pool_init",
        ("self",),
        "SGLang's per-node GDN verify states for one request slot: our tree verify never reads them",
    ),
)

RUNTIME_COMMON = (
    ADMISSION,
    Patch(
        f"{MODEL_RUNNER}:ModelRunner.init_device_graphs",
        "init_device_graphs",
        ("self",),
        "the drafter's hidden-state taps and the tree-verify workspace, before the target's graphs are captured",
    ),
    *RUNTIME_TREE_VERIFY,
    Patch(
        f"{KV_MIXIN}:ModelRunnerKVCacheMixin.handle_max_mamba_cache",
        "handle_max_mamba_cache",
        ("self", "total_rest_memory"),
        "the memory plan holds the drafter's weights back and gets back the per-node GDN states",
    ),
)

PROFILE = Patch(f"{TP_WORKER}:TpModelWorker.forward_batch_generation", "profile_decode", ("self",),  # 0.5.23 says `batch`
                "SGLANG_DFLASH_PROFILE only: stock decode steps timed as our workers' steps are")  # fmt: skip


VERIFY_INPUT_FIELDS = (  # the tree's verify input, by EagleVerifyInput's field names (`verify_io.eagle_verify_fields`)
    Field(f"{EAGLE_INFO}:EagleVerifyInput", "retrieve_index"),
    Field(f"{EAGLE_INFO}:EagleVerifyInput", "retrieve_next_token"),
    Field(f"{EAGLE_INFO}:EagleVerifyInput", "retrieve_next_sibling"),
    Field(f"{EAGLE_INFO}:EagleVerifyInput", "retrieve_cum_len"),
)

RELEASES = (
    Release(
        versions=("0.5.11",),
        stock=STOCK,
        runtime=(
            *RUNTIME_COMMON,
            Patch(f"{POOL_CONFIGURATOR}:DefaultPoolConfigurator._compute_cell_size", "compute_cell_size",
                  ("self", "mr", "num_layers"), "every KV-cache token also pays for the drafter's context K/V"),
            Patch(f"{SCHEDULE_BATCH}:Req.update_spec_acceptance_histogram", "acceptance_histogram",
                  ("self", "accepted_draft_tokens"), "the spec-v2 worker's step that ended its batch aborted emits "
                  "nothing (accept length 0, so -1 accepted drafts): not a histogram entry"),
            Patch(f"{SCHEDULE_BATCH}:Req.check_finished", "check_finished", ("self", "new_accepted_len"),
                  "the spec-v2 output processing checks a step's stop strings once, over the last few tokens (one "
                  "completed early in the step was missed or emitted past), and the length cap before an EOS in the "
                  "step; checked token by token as stock decode"),
        ),
        overlap_spec_v2=True,
    ),
    Release(
        versions=("0.5.23",),
        stock=(SCHEDULER_INIT,),  # our names: SpeculativeAlgorithm.register (`registry`)
        runtime=(
            # no target-graph hook: the spec-v2 worker's init_attention_backends runs before the target's capture,
            # and the drafter's weights are counted through its preloaded_weights_bytes
            ADMISSION,
            *RUNTIME_TREE_VERIFY,
            Patch(f"{DECODE_GRAPHS}:DecodeCudaGraphRunner.get_spec_info", "graph_spec_info", ("self", "num_tokens"),
                  "the captured TARGET_VERIFY graphs get our tree's verify input (SGLang builds one for its own only)"),
            Patch(f"{BASE_GRAPHS}:create_dummy_verify_input", "dummy_verify_input",
                  ("spec_algorithm", "custom_mask", "num_tokens_per_req", "is_draft_worker"),
                  "the same for the graph runners' shared capture path"),
            Patch(f"{POOL_CONFIGURATOR}:DefaultPoolConfigurator._compute_cell_size", "compute_cell_size",
                  ("self", "kvc", "num_layers"), "every KV-cache token also pays for the drafter's context K/V"),
            Patch(f"{KV_CONFIGURATOR}:KVCacheConfigurator._handle_max_mamba_cache", "plan_mamba_states",
                  ("self", "total_rest_memory"), "the memory plan reserves per-node GDN states for the one slot kept"),
            Patch(f"{SCHEDULE_BATCH}:Req.update_finish_state", "check_finished", ("self", "new_accepted_len"),
                  "of a step's stop strings, the first listed that its tokens hold ends the request, not the first "
                  "completed, which stock decode stops at; checked token by token as stock decode"),
        ),
        registry=True,
    ),
)  # fmt: skip

SUPPORTED = tuple(v for r in RELEASES for v in r.versions)


def release(version: str) -> Release | None:
    """The table of an installed SGLang version string, or None where it is not supported."""
    return next((r for r in RELEASES if version in r.versions), None)
