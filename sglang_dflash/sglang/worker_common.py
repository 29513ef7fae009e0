"""The common part of the DDTREE / DFLASH_CHAIN worker (`ddtree_worker_v2`; the plugin subclasses it for SGLang
0.5.11's schema): the drafter (its weights, TP sharding, context K/V at the target's KV slots and CUDA
graphs), the hidden capture on the target's tapped layers, the draft (`_build_tree`: a chain or tree as the standalone
engine's `proposal` drafts it), the verify input, the per-request checks of a step, and the pure helpers (CPU-tested,
tests/sglang/test_worker_common.py).

The drafter is the standalone `models.dflash_draft.DFlashDrafter`, TP-sharded where its heads and MLP split
(`models.tp_shard`; SGLANG_DFLASH_DRAFT_TP=0 replicates it), with its `DraftCache` at the target's KV slots: an entry
per KV-cache token, read through SGLang's req_to_token, so a prefix-cache hit finds the prefix's drafter context where
the target's KV is. It borrows the target's embedding and LM-head shard; the chain is the full-vocabulary argmax
merged over TP (`vocab_parallel`), so every rank drafts the same tokens. Not an SGLang-layer drafter model (SGLang's
`models/dflash.py`): that needs a draft ModelRunner, a draft KV pool at the target's slot indices, an ENCODER_ONLY
attention backend in TARGET_VERIFY mode and its own graph runner, each a new SGLang-internals surface; the standalone
drafter is checked against transformers. `memory_plan` counts its weights and K/V per rank in SGLang's plan. Its pass
and the verified context append are CUDA-graphed at the target's captured batch sizes, padded as its verify is, and
captured at start-up (SGLANG_DFLASH_DRAFT_GRAPHS=0: eager).

Requests with min-p, penalties, custom logit processors, logit_bias, min_new_tokens, a sampling seed, beam search,
watermarking, grammar or logprobs are aborted at admission with a message naming the feature (`request_unsupported`,
the plugin's `add_request_to_queue` hook); page size > 1 is refused at start; with the radix cache (SGLang's default)
a hybrid target's mamba strategy becomes extra_buffer (`server_args.resolve_radix_cache`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import env
from ..budget import tree_accept_probs
from ..conditional_tree import prefix_count
from ..cuda_graph import CapturedStep
from ..ddtree import PATH_WALK_ROWS, DraftTree, accept_greedy, build_ddtree_from_top_k, draft_log_probs
from ..dflash import chain_tree
from ..kernels.accept_commit import commit_accepted
from ..models.tp_shard import shard_drafter, shard_plan
from ..proposal import draft, uses_heads
from .hidden_capture import graph_capacity, install_on_model_runner
from .memory_plan import draft_max_len, draft_tp_size
from .names import ALGORITHMS, DFLASH_CHAIN, NUM_REQS_ATTR
from .server_args import verify_steps
from .step_profile import StepProfile
from .tree_gdn_backend import activate as activate_tree_gdn
from .tree_gdn_backend import workspace as tree_gdn_workspace
from .verify_io import eagle_verify_fields
from .vocab_parallel import argmax_vocab_parallel, draft_log_probs_vocab_parallel
from .width_control import StepCosts, StepWidth, parse_tiers

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- pure helpers (CPU-tested)


def draft_graphs_enabled(device: torch.device) -> bool:
    """The drafter pass as CUDA graphs on a GPU, at any TP (lossless inside SGLang at TP=1 and TP=2 on H200s);
    SGLANG_DFLASH_DRAFT_GRAPHS=0 runs it eagerly."""
    return device.type == "cuda" and env.DRAFT_GRAPHS.on()


class StaticBlockEmbedding:
    """The draft block's input embeddings for a CUDA-graphed drafter pass, from static rows: the roots' rows are
    looked up before each replay (`load`), the mask token's once. At TP > 1 SGLang's vocabulary-parallel embedding
    all-reduces outside SGLang's graph-capture context, so it stays outside the graph (a sharded drafter's own
    all-reduces are captured inside that context). Called on the block [R, B] (roots, then mask tokens) inside the
    graph -> [R, B, H]."""

    @torch.no_grad()
    def __init__(self, embed, mask_token_id: int, max_rows: int, device: torch.device):
        self.embed = embed
        self.mask = embed(torch.tensor([mask_token_id], device=device))  # [1, H]
        self.roots = self.mask.new_zeros(max_rows, self.mask.shape[1])

    @torch.no_grad()
    def load(self, roots: Tensor) -> None:
        self.roots[: roots.shape[0]].copy_(self.embed(roots))

    def __call__(self, block: Tensor) -> Tensor:
        R, B = block.shape
        return torch.cat([self.roots[:R, None], self.mask[None].expand(R, B - 1, -1)], dim=1)


TIERS_HEADROOM_GIB = 1.0  # GPU memory a server should keep after the width tiers (a 27B one-rank server had 0.27 GiB)


def pad_rows(G: int, *columns: tuple[Tensor, int]) -> tuple[Tensor, ...]:
    """Each (tensor [R, ...], fill) as [G, ...]: its R rows, then G - R rows of fill (G >= R)."""
    return tuple(torch.cat([t, t.new_full((G - t.shape[0], *t.shape[1:]), fill)]) if G > t.shape[0] else t
                 for t, fill in columns)  # fmt: skip


def free_gib(device: torch.device) -> float:
    """The GPU's free memory in GiB once torch's caching allocator has handed back its unused blocks (0 off CUDA):
    without that, a capture that empties the cache between two readings made the width tiers' memory come out
    negative (-0.87 GiB at 27B shapes)."""
    if device.type != "cuda":
        return 0.0
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info(device)[0] / (1 << 30)


def extend_tap_layout(prefix_lens: list[int], extend_lens: list[int], device=None) -> tuple[Tensor, Tensor, Tensor]:
    """For an extend batch whose tokens are packed request after request: (rows long [R, P] = the packed
    row of request r's j-th extend token (0 where j >= extend_lens[r]), nodes long [R, P] = j or -1,
    starts long [R] = prefix_lens), P = max extend length. `drafter.append_context(cache, taps[rows],
    slots, starts, nodes)` then writes position prefix_lens[r] + j."""
    R = len(extend_lens)
    P = max(extend_lens) if R else 0
    ext = torch.tensor(extend_lens, dtype=torch.long, device=device)
    offsets = torch.cumsum(ext, 0) - ext
    j = torch.arange(P, device=device)
    valid = j[None, :] < ext[:, None]
    rows = torch.where(valid, offsets[:, None] + j[None, :], 0)
    nodes = torch.where(valid, j[None, :].expand(R, P), -1)
    return rows, nodes, torch.tensor(prefix_lens, dtype=torch.long, device=device)


def track_cuts(seq_lens: Tensor, keep: Tensor, interval: int) -> Tensor:
    """--mamba-scheduler-strategy extra_buffer's prefix-cache tracking, as SGLang's `_mamba_verify_update`: per
    request, the index on its accepted path (keep[r] nodes from position seq_lens[r]) whose state ends at a
    multiple of `interval`, or -1 where this step crosses none. long [R] on keep's device, no host read."""
    s, end = seq_lens.long(), seq_lens.long() + keep.long()
    return torch.where(s // interval != end // interval, end // interval * interval - s - 1, -1)


def track_candidates(seq_lens: list[int], max_keep: int, interval: int) -> list[int]:
    """The requests (indices) whose accepted path of up to max_keep nodes from seq_lens[r] may cross a multiple of
    `interval`: a superset of those with a cut, known on the host before the device's acceptance is."""
    return [r for r, s in enumerate(seq_lens) if s // interval != (s + max_keep) // interval]


class ContextLengths:
    """Each request slot's drafter context length, kept on the host: exact after an extend; after
    a spec-v2 decode step, a range (`set(slot, low, up_to=high)`), as the accepted count stays on the device. The next
    step's sequence length, which the scheduler knows, must lie in it (`check`) and makes it exact again."""

    def __init__(self, num_slots: int):
        self.low, self.high = [0] * num_slots, [0] * num_slots

    def set(self, slot: int, length: int, up_to: int | None = None) -> None:
        self.low[slot], self.high[slot] = length, length if up_to is None else up_to

    def forget(self, slot: int) -> None:
        """The slot's context is not to be trusted (its step failed) until an extend sets it again."""
        self.low[slot], self.high[slot] = -1, -1

    def check(self, slot: int, length: int) -> str | None:
        """None, and the slot's length known exactly, if `length` lies in its range; else what is wrong."""
        low, high = self.low[slot], self.high[slot]
        if low < 0:
            return f"slot {slot}'s drafter context was dropped with a failed step"
        if not low <= length <= high:
            drafter = f"{low}" if low == high else f"{low}..{high}"
            return f"slot {slot} has {length} tokens in the KV cache, the drafter {drafter}"
        self.set(slot, length)
        return None

    def clear(self) -> None:
        self.__init__(len(self.low))


def device_usable(device: torch.device) -> bool:
    """After an exception in a step: False where the device's context is broken (a sticky CUDA error, after which every
    call fails), so the server must end rather than go on."""
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize(device)
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return False
    return True


FAILURE_WAIT_S = 30.0  # how long a TP rank whose step failed waits for every other rank to report the same failure


class FailureAgreement:
    """At TP > 1: whether every rank of the TP group failed the same step (`all_failed`). A failure that follows from
    the batch (its requests: the same code on the same inputs) reaches every rank at the same point, and then all ranks
    abort that batch alike and serve on; a rank that failed alone has left the others inside a GPU collective it never
    joins, so its wait times out and the server ends, as before. A gloo group of its own, made by every rank at start
    (torch's new_group is collective): no collective of SGLang's can pair with these."""

    def __init__(self, ranks: list[int], timeout_s: float = FAILURE_WAIT_S):
        import torch.distributed as dist

        self.group = dist.new_group(ranks=ranks, backend="gloo")
        self.size, self.timeout_s = len(ranks), timeout_s

    def all_failed(self) -> bool:
        from datetime import timedelta

        import torch.distributed as dist

        failed = torch.ones(1)
        work = dist.all_reduce(failed, group=self.group, async_op=True)
        try:
            work.wait(timedelta(seconds=self.timeout_s))
        except RuntimeError:  # gloo's "Operation timed out!": some rank did not fail this step
            return False
        return int(failed.item()) == self.size


def request_slot(req) -> int | None:
    """A request's req_to_token row (SGLang 0.5.23 keeps it in `req.kv`, earlier releases on the request)."""
    kv = getattr(req, "kv", None)
    return kv.req_pool_idx if hasattr(kv, "req_pool_idx") else req.req_pool_idx


def request_unsupported(req) -> str | None:
    """What of an SGLang Req the workers cannot serve losslessly yet, named (None: all supported). The scheduler
    hook (`add_request_to_queue`) aborts such a request with this message; the worker refuses a batch with one."""
    p = req.sampling_params
    checks = {
        "logprobs": getattr(req, "return_logprob", False),
        "grammar-constrained decoding": any(getattr(p, k, None) for k in ("json_schema", "regex", "ebnf", "structural_tag")),
        "min_p sampling": (getattr(p, "min_p", 0.0) or 0.0) > 0.0,
        "frequency / presence / repetition penalties": (
            getattr(p, "frequency_penalty", 0.0) != 0.0
            or getattr(p, "presence_penalty", 0.0) != 0.0
            or getattr(p, "repetition_penalty", 1.0) != 1.0
        ),
        "logit_bias": bool(getattr(p, "logit_bias", None)),
        "custom logit processors": getattr(req, "custom_logit_processor", None) is not None,
        # SGLang masks EOS until then with a logits penalizer, which the verify does not run
        "min_new_tokens": (getattr(p, "min_new_tokens", 0) or 0) > 0,
        # the sampled acceptance draws from its own generator, not the request's seeded one
        "sampling_seed": getattr(p, "sampling_seed", None) is not None,
        "beam search": (getattr(p, "beam_width", None) or 1) > 1,  # 0.5.23
        "watermarking": getattr(p, "watermark", None) is not None,  # 0.5.23: a logits processor
    }
    found = [name for name, on in checks.items() if on]
    return "sglang-dflash workers do not support " + ", ".join(found) + " yet" if found else None


def fit_to_drafter(req, max_len: int, reach: int) -> str | None:
    """At admission: a request must fit the drafter's page table of max_len positions (SGLANG_DFLASH_DRAFT_MAX_LEN),
    its prompt and every verify after it, which writes up to `reach` positions past its last verify's start (N verify
    tokens; 2N under the overlap scheduler, which runs one more step, up to N tokens further, after a request's
    last). max_new_tokens is lowered so that everything fits (the request then finishes for length, as at SGLang's
    context length); a prompt that leaves no room gets a message (the request is aborted) instead of a failed step
    that would stop the server."""
    prompt = len(req.origin_input_ids)
    room = max_len - reach - prompt + 2  # the last verify starts at <= prompt + max_new_tokens - 2 cached tokens
    if room < 1:
        return (
            f"sglang-dflash: a prompt of {prompt} tokens does not fit the drafter's {max_len} positions with "
            f"{reach} verify positions after it; start the server with a larger {env.DRAFT_MAX_LEN.name}"
        )
    params = req.sampling_params
    if params.max_new_tokens is None or params.max_new_tokens > room:
        params.max_new_tokens = room
    return None


def sampling_args(info) -> dict | None:
    """`ddtree.accept_sampling`'s temperature / top_p / top_k ([R] tensors) from SGLang's SamplingBatchInfo, or
    None when every request is greedy. SGLang marks greedy requests top_k = 1 (temperature then 1): they get
    temperature 0 here (argmax); top_k = TOP_K_ALL (1 << 30) means no top-k filter."""
    if info.is_all_greedy:
        return None
    top_k = info.top_ks.long()
    return dict(
        temperature=torch.where(top_k <= 1, 0.0, info.temperatures.view(-1).float()),
        top_p=info.top_ps.float(),
        top_k=torch.where(top_k >= 1 << 30, -1, top_k),
    )


def local_vocab_range(lm_head) -> tuple[int, int]:
    """(global id of local row 0, number of real vocabulary rows) of a vocabulary-parallel LM head shard."""
    s = getattr(lm_head, "shard_indices", None)
    if s is None:
        return 0, lm_head.weight.shape[0]
    return s.org_vocab_start_index, s.org_vocab_end_index - s.org_vocab_start_index


def resolve_draft_path(path: str, revision: str | None = None) -> Path:
    local = Path(path)
    if local.is_dir():
        return local
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, revision=revision))


# ----------------------------------------------------------------------------- the workers' common part (GPU only)


class DDTreeWorkerBase:
    """The drafting, checks and verify input of DDTREE and DFLASH_CHAIN (by `server_args.speculative_algorithm`);
    the spec-v2 worker adds the step and the lifecycle its scheduler expects."""

    failure_agreement: FailureAgreement | None = None  # TP > 1: whether all ranks failed a step (`_abort_batch`)

    # --- construction, in phases: SGLang 0.5.23's spec-v2 lifecycle calls them at different points
    def _load_drafter(self, server_args, gpu_id: int, tp_rank: int, target_worker) -> None:
        """Fields, checks, the drafter's weights (TP-sharded where they divide) and the target's embedding / LM head."""
        from ..models.config import DraftConfig, read_config
        from ..models.dflash_draft import DFlashDrafter

        self.server_args = server_args
        self.name = str(server_args.speculative_algorithm).upper()  # DFLASH_CHAIN or DDTREE
        if self.name not in ALGORITHMS:
            raise ValueError(f"sglang-dflash workers serve {', '.join(ALGORITHMS)}, not {self.name}")
        self._target_worker = target_worker
        self.model_runner = target_worker.model_runner
        self.tp_rank = tp_rank
        self.page_size = server_args.page_size or 1
        self.num_nodes = self.speculative_num_draft_tokens = int(server_args.speculative_num_draft_tokens)
        self.model_config = self.model_runner.model_config  # the scheduler's disaggregation set-up reads it
        self.device = torch.device(f"cuda:{gpu_id}" if gpu_id >= 0 else "cuda")
        self._check_server_args(server_args)

        model = self.model_runner.model
        draft_path = resolve_draft_path(server_args.speculative_draft_model_path, server_args.speculative_draft_model_revision)
        dtype = self.model_runner.model_config.dtype
        # from parallel_state itself: 0.5.23's sglang.srt.distributed no longer re-exports these getters
        from sglang.srt.distributed.parallel_state import get_tensor_model_parallel_world_size, get_tp_group, graph_capture

        self.tp_size = get_tensor_model_parallel_world_size()
        self.tp_group = get_tp_group().device_group if self.tp_size > 1 else None
        self.tp_src = get_tp_group().first_rank if self.tp_size > 1 else 0  # global rank of TP rank 0
        if self.tp_size > 1:
            import torch.distributed as dist

            if dist.get_world_size() == self.tp_size:  # new_group needs every process of the world (no DP / PP here)
                self.failure_agreement = FailureAgreement(list(get_tp_group().ranks))
        # the drafter's heads and MLP split over the TP ranks where they divide (SGLANG_DFLASH_DRAFT_TP=0: replicated);
        # a sharded one is loaded on the host first, so that the GPU never holds more than the memory plan's share,
        # and its graphs capture the all-reduces inside SGLang's graph_capture
        c = self.draft_config = DraftConfig.from_dict(read_config(draft_path))
        self._check_num_nodes(c.num_depths + 1)
        self.draft_tp = draft_tp_size(c, self.tp_size)
        self.drafter = DFlashDrafter.from_pretrained(draft_path, device="cpu" if self.draft_tp > 1 else self.device, dtype=dtype)
        shard_drafter(self.drafter, tp_rank, self.draft_tp, get_tp_group().all_reduce)
        self.drafter.to(self.device)
        self.graph_context = graph_capture if self.draft_tp > 1 else None
        self.heads = self._choose_heads(c)
        if self.draft_tp != self.tp_size:
            logger.warning("%s: drafter replicated on the %d TP ranks (%s).", self.name, self.tp_size,
                           shard_plan(c, self.tp_size) or f"{env.DRAFT_TP.name}=0")  # fmt: skip
        elif self.tp_size > 1:
            logger.info("%s: drafter sharded over the %d TP ranks.", self.name, self.tp_size)
        self.debug_steps = env.DEBUG_STEPS.integer(0)  # log this many verify steps
        self.profile = StepProfile.from_env(self.device, tp_rank)  # SGLANG_DFLASH_PROFILE=file: per-phase step times

        # borrowed embedding / LM head shard
        lm = getattr(model, "lm_head", None) or model.model.lm_head
        self.embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else model.model.embed_tokens
        self.lm_head_weight = lm.weight
        self.vocab_start, self.vocab_local = local_vocab_range(lm)
        self.vocab_rows = self.embed.num_embeddings if hasattr(self.embed, "num_embeddings") else self.embed.weight.shape[0]
        if not 0 <= self.drafter.config.mask_token_id < self.vocab_rows:
            raise ValueError(
                f"{self.name}: the drafter's mask_token_id {self.drafter.config.mask_token_id} is not among the target "
                f"embedding's {self.vocab_rows} rows"
            )

    def _install_capture(self) -> None:
        """The hidden capture on the target's tapped layers (before its CUDA graphs where the plugin's hook ran, else
        installed now and the graphs recaptured once)."""
        runner = self.model_runner
        self.capture = install_on_model_runner(
            runner, self.draft_config.target_layer_ids, self.draft_config.hidden_size, graph_capacity(self.server_args)
        )
        if not getattr(self.capture, "before_graphs", False) and getattr(runner, "graph_runner", None) is not None:
            logger.warning("%s: hidden capture installed after the target's CUDA graphs; recapturing them once.", self.name)
            runner.init_device_graphs()
            self.capture.before_graphs = True

    def _init_context(self) -> None:
        """The drafter's context K/V at the target's KV slots (needs the target's KV pool), and its graph tables.
        Position p of request slot s is entry req_to_token[s, p] (a prefix-cache hit finds it there); the pool has an
        entry per KV-cache token (`memory_plan`)."""
        runner = self.model_runner
        req_to_token = runner.req_to_token_pool.req_to_token
        num_slots = req_to_token.shape[0]
        self.max_len = min(draft_max_len(runner.model_config.context_len), req_to_token.shape[1])
        pool_size = runner.max_total_num_tokens + self.page_size  # SGLang's KV buffers: size + page_size entries
        self.cache = self.drafter.new_cache(num_slots, self.max_len, table=req_to_token[:, : self.max_len], pool_size=pool_size)
        logger.info(
            "%s: drafter K/V for %d KV-cache tokens = %.2f GiB per rank (counted in SGLang's cell size); requests up to "
            "%d tokens (%s=N to change).",
            self.name, pool_size, 2 * self.cache.k.numel() * self.cache.k.element_size() / 2**30, self.max_len,
            env.DRAFT_MAX_LEN.name,
        )  # fmt: skip
        self.ctx_lens = ContextLengths(num_slots)
        # the drafter pass and the context append of a verify as CUDA graphs per padded batch size (the block embedding
        # looked up outside the graph)
        self.draft_graphs: dict[int, CapturedStep] | None = None
        self.context_graphs: dict[tuple[int, int], CapturedStep] = {}  # by (requests, verify width)
        self.width, self.tiers = None, {}  # `_init_width_control`
        if draft_graphs_enabled(self.device):
            self.draft_graphs = {}
            self.graph_pools = (torch.cuda.graph_pool_handle(), torch.cuda.graph_pool_handle())  # drafter, context
            self.block_embed = StaticBlockEmbedding(self.embed, self.drafter.config.mask_token_id, num_slots, self.device)

    def _warm_up_sizes(self) -> list[int]:
        """The batch sizes `_warm_up` runs: 1 and 2 (torch.compile's recompile for a second size: dynamic shapes from
        then on) up to --max-running-requests, and with graphs on every size a batch of up to that many pads to
        (`_draft_graph_rows`: the target's captured batch sizes)."""
        most = self.server_args.max_running_requests or 2
        graphed = {self._draft_graph_rows(R) for R in range(1, most + 1)} - {None}
        return sorted({R for R in (1, 2) if R <= most} | graphed)

    def _warm_up(self, sizes: list[int]) -> None:
        """A drafter step for batches of each size on the scratch slot (slots -1: nothing live is read or written),
        before serving: first compiles and, with graphs on, the drafter and context-append graphs of every size a
        batch pads to. Lazily, the first batch of 2 stalled a TP=2 server for 13 s, and a 27B server's first batch of
        7 and of 16 requests 2.6 and 2.4 s. Then the extend's context append of one token a request, for 1 and 2
        requests (`layers.gpu_compiled` compiles again for each new pattern of size-1 dimensions; a prefix-cache hit
        extends one token)."""
        with torch.no_grad():
            for R in sorted(sizes, reverse=True):  # the graphs of each kind share a memory pool: largest first
                zeros = torch.zeros(R, dtype=torch.long, device=self.device)
                slots = torch.full_like(zeros, -1)
                hidden, local = self._run_drafter(zeros, slots, zeros)
                tree = self._build_tree(zeros, hidden, local)
                if self.width is not None:  # the tree the width controller's steps draft
                    tree = self._marginal_tree(zeros, local)[0]
                for n in sorted(self.tiers) or [self.num_nodes]:
                    nodes = torch.full((R, tree.max_depth + 1), -1, device=self.device)
                    self._append_verified(R, slots, zeros, nodes, n)
            self._warm_up_step_kernels(tree)
            for R in (1, 2):  # eager, as `_forward_extend`: taps [R, 1, n_taps * D]
                zeros = torch.zeros(R, dtype=torch.long, device=self.device)
                taps = self.capture.taps(R).view(R, 1, -1)
                self.drafter.append_context(self.cache, taps, torch.full_like(zeros, -1), zeros, zeros[:, None])

    def _warm_up_step_kernels(self, tree: DraftTree) -> None:
        """At each verify width, the step's kernels outside the graphs, on copies of row 0 of a warm-up tree: the
        verify input, the greedy acceptance both ways a batch may take it (`accept_greedy`: below and from
        PATH_WALK_ROWS rows) and the KV commit with nothing accepted (row 0 of req_to_token: its window is rewritten
        as it is). A width is a compile-time constant of these kernels, a batch size is not; lazily, the width
        controller's first step at a new width spent 0.2-0.3 s compiling them."""
        req_to_token = self.model_runner.req_to_token_pool.req_to_token
        vocab = self.model_runner.model_config.vocab_size
        for n in sorted(self.tiers) or [self.num_nodes]:
            for R in sorted({1, -(-PATH_WALK_ROWS // n)}):
                zeros = torch.zeros(R, dtype=torch.long, device=self.device)
                t = tree.prefix(n).rows(zeros)
                eagle_verify_fields(t, zeros, 0)
                acc = accept_greedy(t, torch.zeros(R, n, vocab, device=self.device))
                commit_accepted(req_to_token, zeros, zeros, t.token_ids, acc.accepted_nodes,
                                torch.zeros_like(acc.accept_len), acc.bonus_tokens)  # fmt: skip

    # --- verify widths chosen per step (SGLANG_DFLASH_WIDTHS, `width_control`)
    def _init_width_control(self) -> None:
        """With SGLANG_DFLASH_WIDTHS naming tiers: each narrower tier's verify runtime (attention backend, target
        graphs, tree-verify workspace: `_build_tier`) beside the widest's (SGLang's own), and the per-step controller
        `self.width`; else (None) every step verifies --speculative-num-draft-tokens nodes."""
        self.width, self.tiers = None, {}
        tiers = parse_tiers(env.WIDTHS.get(), self.num_nodes)
        if tiers is None or len(tiers) == 1:
            return
        if self.heads:
            logger.warning("%s: %s is off for this drafter (its head drafts its own chain or tree, not the marginals' "
                           "best prefixes).", self.name, env.WIDTHS.name)  # fmt: skip
            return
        runner = self.model_runner
        self.tiers[self.num_nodes] = (runner.attn_backend, getattr(runner, self.graph_runner_attr), tree_gdn_workspace())
        free = free_gib(self.device)
        for n in tiers[:-1]:
            self.tiers[n] = self._build_tier(n)
        self._activate_tier(self.num_nodes)
        graphs = sorted(getattr(self.tiers[self.num_nodes][1], "capture_bs", None) or [])
        most = max([*graphs, self.server_args.max_running_requests or 1])
        self.width = StepWidth(tiers, self.draft_config.num_depths, most, self.device, self._step_costs(graphs, tiers))
        left = free_gib(self.device)
        logger.info("%s: verify widths %s chosen per step by cost (%s); the narrower tiers took %.2f GiB of GPU memory "
                    "(graphs included; the memory plan's estimate was logged as the KV cache was sized).", self.name,
                    list(tiers), env.WIDTHS.name, free - left)  # fmt: skip
        if self.device.type == "cuda" and left < TIERS_HEADROOM_GIB:
            logger.warning("%s: only %.2f GiB of GPU memory is left after the verify-width tiers; lower "
                           "--mem-fraction-static by about %.2f or name fewer tiers in %s.", self.name, left,
                           (free - left) / (torch.cuda.mem_get_info(self.device)[1] / (1 << 30)), env.WIDTHS.name)  # fmt: skip

    def _step_costs(self, graph_sizes: list[int], tiers: tuple[int, ...]) -> StepCosts:
        """The measured step costs; at TP > 1 averaged over the ranks (a gloo group of their own, made by every rank
        here) so that every rank picks the same width."""
        if self.tp_size == 1:
            return StepCosts({})
        import torch.distributed as dist
        from sglang.srt.distributed.parallel_state import get_tp_group

        group = dist.new_group(ranks=list(get_tp_group().ranks), backend="gloo")
        keys = tuple((bs, n) for bs in graph_sizes for n in tiers)
        return StepCosts({}, sync=lambda sums: dist.all_reduce(sums, group=group), keys=keys)

    def _activate_tier(self, n: int) -> None:
        """Tier n's attention backend, target graphs and tree-verify workspace become the target's (the next verify's)."""
        backend, graphs, _ = self.tiers[n]
        self.model_runner.attn_backend = backend
        setattr(self.model_runner, self.graph_runner_attr, graphs)
        activate_tree_gdn(n)

    # --- what the scheduler expects of a spec worker
    @property
    def target_worker(self):
        return self._target_worker

    def clear_cache_pool(self):
        self.ctx_lens.clear()

    def _choose_heads(self, c) -> bool:
        """Whether the drafter's conditional head (DFlash2's selector, DSpark's Markov head) drafts, as `proposal`
        does: at TP = 1 only (past it the vocabulary is sharded: the draft is the marginals', said at start). A DDTREE
        budget that a DFlash2 selector cannot fill (its selector_top_k candidates per depth) is refused."""
        heads = uses_heads(c, "dflash" if self.name == DFLASH_CHAIN else "ddtree")
        if heads and self.tp_size > 1:
            logger.warning("%s: the %s drafter's conditional head is used at TP = 1 only; at TP = %d the draft is "
                           "scored by its per-depth logits.", self.name, c.format, self.tp_size)  # fmt: skip
            return False
        if heads and self.name != DFLASH_CHAIN and c.format == "dflash2":
            most = prefix_count(c.selector_top_k, c.num_depths)
            if self.num_nodes - 1 > most:
                raise ValueError(f"{self.name}: --speculative-num-draft-tokens {self.num_nodes} asks a budget of "
                                 f"{self.num_nodes - 1} nodes; the DFlash2 drafter's selector offers {most} prefixes "
                                 f"(selector_top_k {c.selector_top_k}, {c.num_depths} depths)")  # fmt: skip
        return heads

    def _check_num_nodes(self, chain_nodes: int) -> None:
        """DFLASH_CHAIN verifies up to the drafter's chain (root included); DDTREE any budget >= 1."""
        if self.name == DFLASH_CHAIN and not 2 <= self.num_nodes <= chain_nodes:
            raise ValueError(f"{self.name}: --speculative-num-draft-tokens {self.num_nodes} not in [2, {chain_nodes}]")
        if self.num_nodes < 2:
            raise ValueError(f"{self.name}: --speculative-num-draft-tokens {self.num_nodes} < 2 (the root and a budget >= 1)")

    def _graph_batch_size(self, bs: int) -> int | None:
        """The captured batch size a TARGET_VERIFY of bs requests replays (SGLang pads up to the next), if any."""
        runner = self.model_runner
        graphs = getattr(runner, "graph_runner", None) or getattr(runner, "decode_cuda_graph_runner", None)  # 0.5.23's name
        sizes = sorted(getattr(graphs, "capture_bs", None) or [])
        return next((s for s in sizes if s >= bs), None)

    def _check_step(self, batch) -> tuple[list[int], list[int], dict[int, str]]:
        """A decode step's requests: each must have as many tokens in the KV cache as in the drafter's context, and
        room for the step's nodes in the drafter's page table. Returns their request slots and sequence lengths (host
        lists) and what is wrong with a request, by batch index (`_drafter_rows` isolates those)."""
        slots_cpu, seq_cpu = [request_slot(req) for req in batch.reqs], batch.seq_lens_cpu.tolist()
        faults = {}
        for i, (slot, s) in enumerate(zip(slots_cpu, seq_cpu)):
            wrong = self.ctx_lens.check(slot, s) or self._misfit(s + self.num_nodes)
            if wrong:
                faults[i] = f"{self.name}: {wrong}"
        return slots_cpu, seq_cpu, faults

    def _drafter_rows(self, batch, faults: dict[int, str]) -> tuple[Tensor, Tensor]:
        """The drafter's request slots and lengths [bs] for a decode step: the batch's, except that a request with a
        fault rides the step on the scratch slot (-1, length 0), where it reads and writes nothing live, and ends
        aborted with the fault as its message (the verify is the target's as ever, so its one token this step is
        right). Its client gets the error; SGLang frees it
        as any finished request; the rest of the batch goes on. Without faults the batch's own tensors are returned;
        with faults, new ones."""
        slots, seq_lens = batch.req_pool_indices.long(), batch.seq_lens.long()
        if not faults:
            return slots, seq_lens
        from sglang.srt.managers.schedule_batch import FINISH_ABORT

        for i, message in faults.items():
            logger.error("%s: request %s aborted: %s", self.name, batch.reqs[i].rid, message)
            if getattr(batch.reqs[i], "to_finish", None) is None:  # an earlier abort's message stays
                batch.reqs[i].to_finish = FINISH_ABORT(f"{message} (please report this sglang-dflash bug)")
        bad = torch.zeros(len(batch.reqs), dtype=torch.bool, pin_memory=slots.is_cuda)
        bad[list(faults)] = True
        bad = bad.to(slots.device, non_blocking=True)  # no stall of the overlap scheduler's stream
        return torch.where(bad, -1, slots), torch.where(bad, 0, seq_lens)

    def _verify_input(self, batch, tree: DraftTree, seq_cpu: list[int]):
        """EAGLE's verify input for the step's tree, marked with the batch's real request count, and the tree-verify
        workspace (None: SGLang's own GDN verify) given the tree's parents. Returns (spec_info, workspace, graph batch
        size or None)."""
        from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
        from sglang.srt.speculative.eagle_info import EagleVerifyInput

        bs = len(batch.reqs)  # a ScheduleBatch's or a ModelWorkerBatch's (which has no batch_size())
        f = eagle_verify_fields(tree, batch.seq_lens.long(), sum(seq_cpu))
        spec_info = EagleVerifyInput(
            draft_token=f["draft_token"],
            custom_mask=f["custom_mask"],
            positions=f["positions"],
            retrieve_index=f["retrieve_index"],
            retrieve_next_token=f["retrieve_next_token"],
            retrieve_next_sibling=f["retrieve_next_sibling"],
            retrieve_cum_len=None,
            spec_steps=verify_steps(self.name, tree.num_nodes),
            topk=self.server_args.speculative_eagle_topk,  # > 1: SGLang's verify (GDN, attention) in tree mode
            draft_token_num=tree.num_nodes,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            seq_lens_sum=sum(seq_cpu),
            seq_lens_cpu=batch.seq_lens_cpu,
        )
        setattr(spec_info, NUM_REQS_ATTR, bs)  # the plugin's replay_metadata hook: a length-1 request is not graph padding
        tree_gdn, graph_bs = tree_gdn_workspace(), self._graph_batch_size(bs)
        if tree_gdn is not None:
            tree_gdn.set_parents(tree.parents, graph_bs)
        return spec_info, tree_gdn, graph_bs

    def _misfit(self, num_tokens: int) -> str | None:
        if num_tokens > self.max_len:
            return f"{num_tokens} tokens exceed the drafter's page table ({env.DRAFT_MAX_LEN.name}={self.max_len})"
        return None

    def _check_fits(self, num_tokens: int) -> None:
        wrong = self._misfit(num_tokens)
        if wrong:
            raise RuntimeError(f"{self.name}: {wrong}")

    def _check_server_args(self, args) -> None:
        problems = []
        if (args.page_size or 1) != 1:
            problems.append("--page-size 1 (this first worker frees rejected KV slots one by one)")
        if not args.disable_overlap_schedule and not self.overlap_ready:
            problems.append("the non-overlap scheduler")
        if problems:
            raise ValueError(f"{self.name} experimental worker needs " + "; ".join(problems))

    def _check_batch(self, batch) -> None:
        """A guard behind the admission hook (`add_request_to_queue`), which aborts such requests: SGLang still runs
        an aborted request's one-token prefill, with its parameters as sent, so requests already finishing pass."""
        for req in batch.reqs:
            if getattr(req, "to_finish", None) is not None or getattr(req, "finished_reason", None) is not None:
                continue
            unsupported = request_unsupported(req)
            if unsupported:
                raise ValueError(f"{self.name}: {unsupported} (request {req.rid})")

    def _abort_batch(self, batch, error: Exception) -> None:
        """Inside an `except`: every request of the batch ends aborted with the error as its message, kept out of the
        radix cache (its GDN state or drafter context may be half written).
        Re-raises where the device is unusable afterwards, and at TP > 1 unless every rank failed this step
        (`FailureAgreement`: a rank that failed alone leaves the others waiting in a collective it never joins, so
        there the server ends as before)."""
        from sglang.srt.managers.schedule_batch import FINISH_ABORT

        if not device_usable(self.device):
            raise  # the exception being handled
        if self.tp_size > 1 and (self.failure_agreement is None or not self.failure_agreement.all_failed()):
            raise
        logger.exception("%s: a decode step of %d requests failed; they end aborted", self.name, len(batch.reqs))
        message = f"{self.name}: the decode step failed ({type(error).__name__}: {error}); please report this sglang-dflash bug"
        for req in batch.reqs:
            req.to_finish = FINISH_ABORT(message)
            req.skip_radix_cache_insert = True
            slot = request_slot(req)
            if slot is not None:  # under the overlap scheduler the request may ride one more step: a fault there
                self.ctx_lens.forget(slot)

    def _draft_graph_rows(self, R: int) -> int | None:
        """The rows of the drafter's CUDA graphs for R requests: the batch size the target's verify of R replays
        (`_graph_batch_size`), whose pad rows ride on the scratch slot; None: eager (graphs off, or R past the target's
        largest graph)."""
        if self.draft_graphs is None:
            return None
        G = self._graph_batch_size(R)
        return G if G is not None and G <= self.block_embed.roots.shape[0] else None

    def _run_drafter(self, roots: Tensor, slots: Tensor, seq_lens: Tensor) -> tuple[Tensor | None, Tensor]:
        """The drafter pass for roots [R] at request slots / sequence lengths [R] -> its hidden rows [R, D, H] (None
        unless a conditional head drafts: `heads`) and logits over this rank's vocabulary shard [R, D, Vs]: eager, or
        the graph of `_draft_graph_rows(R)` requests replayed (captured at its first pass, on the scratch slot), the
        rows past R on the scratch slot."""
        R = roots.shape[0]
        G = self._draft_graph_rows(R)
        if G is None:
            return self._drafter_pass(roots, slots, seq_lens, self.embed)
        roots, slots, seq_lens = pad_rows(G, (roots, 0), (slots, -1), (seq_lens, 0))
        self.block_embed.load(roots)
        if G not in self.draft_graphs:
            self.draft_graphs[G] = CapturedStep.for_requests(self._graphed_drafter, G, self.device, self.graph_context,
                                                             self.graph_pools[0])  # fmt: skip
        hidden, logits = self.draft_graphs[G](roots, slots, seq_lens)
        return (None if hidden is None else hidden[:R]), logits[:R]

    def _graphed_drafter(self, roots: Tensor, slots: Tensor, seq_lens: Tensor) -> tuple[Tensor | None, Tensor]:
        """`_drafter_pass` with the block embedding of `block_embed` (loaded before the replay; SGLang's
        vocabulary-parallel embedding all-reduces outside the graph). A sharded drafter's all-reduces are captured
        inside `graph_context`."""
        return self._drafter_pass(roots, slots, seq_lens, self.block_embed)

    def _drafter_pass(self, roots: Tensor, slots: Tensor, seq_lens: Tensor, embed) -> tuple[Tensor | None, Tensor]:
        """(hidden [R, D, H] or None, logits [R, D, Vs]), D = config.num_depths: `_run_drafter`'s pass."""
        if not self.heads:
            return None, self.drafter(self.cache, roots, slots, seq_lens, embed, self._lm_head)
        hidden = self.drafter.hidden(self.cache, roots, slots, seq_lens, embed)
        return hidden, self.drafter.logits(hidden, self._lm_head)

    def _append_verified(self, R: int, slots: Tensor, start: Tensor, nodes: Tensor, N: int) -> None:
        """Drafter context of a verify of R x N nodes, its accepted nodes [R, P] (its taps: the capture buffer's first
        R * N rows), as one CUDA graph per (rows, N) where the drafter's pass is graphed (a launch-bound pass: ~60
        small kernels), its rows `_draft_graph_rows(R)` (the target's verify padded alike: pad rows' nodes -1 write
        only the scratch entry)."""
        G = self._draft_graph_rows(R)
        if G is None or G * N > self.capture.capacity:  # past it: not the static buffer
            return self.drafter.append_context(self.cache, self.capture.taps(R * N).view(R, N, -1), slots, start, nodes)
        slots, start, nodes = pad_rows(G, (slots, -1), (start, 0), (nodes, -1))
        if (G, N) not in self.context_graphs:  # capture: slots -1 and nodes -1 write only the scratch entry
            fn = lambda *a: self.drafter.append_context(self.cache, self.capture.taps(G * N).view(G, N, -1), *a)  # noqa: E731
            examples = (torch.full_like(slots, -1), torch.zeros_like(start), torch.full_like(nodes, -1))
            self.context_graphs[G, N] = CapturedStep(fn, examples, pool=self.graph_pools[1])
        self.context_graphs[G, N](slots, start, nodes)

    def _lm_head(self, h: Tensor) -> Tensor:
        return F.linear(h, self.lm_head_weight)[..., : self.vocab_local]

    def _build_tree(self, roots: Tensor, hidden: Tensor | None, local: Tensor) -> DraftTree:
        """The draft from one drafter pass (`_run_drafter`: hidden rows or None, logits over this rank's vocabulary
        shard local [R, D, Vs]), identical on every TP rank. DFLASH_CHAIN: N - 1 tokens after the root (a chain
        drafts depth by depth: its first N - 1 rows); DDTREE: the best budget = N - 1 prefixes. At TP = 1 the
        standalone engine's draft (`proposal.draft`: a conditional head's where `heads`, else the argmax chain and
        the per-depth marginals' tree); at TP > 1 the argmax and the marginals' top-K merged over the shards.
        DDTREE's verify runs SGLang's tree mode (topk > 1: ancestor custom mask, retrieve_next_token /
        retrieve_next_sibling)."""
        n = self.num_nodes - 1
        if self.tp_size == 1:
            if self.name == DFLASH_CHAIN:
                return draft(self.drafter, None if hidden is None else hidden[:, :n], local[:, :n], roots, "dflash", n)
            return draft(self.drafter, hidden, local, roots, "ddtree", n)
        if self.name == DFLASH_CHAIN:
            return chain_tree(argmax_vocab_parallel(local[:, :n], self.vocab_start, self.tp_group), roots)
        return build_ddtree_from_top_k(*self._top_k(local, n), roots, n)

    def _top_k(self, local: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """The full vocabulary's top-k log-probabilities and their token ids per depth [R, D, k] from this rank's logits
        shard local [R, D, Vs], the same on every TP rank."""
        if self.tp_size == 1:
            return draft_log_probs(local, min(k, local.shape[-1]))
        return draft_log_probs_vocab_parallel(local, k, self.vocab_start, self.tp_group)

    def _marginal_tree(self, roots: Tensor, local: Tensor) -> tuple[DraftTree, Tensor]:
        """With the width controller: the widest tier's tree of the drafter's per-depth marginals (DDTREE: the best
        num_nodes - 1 prefixes; DFLASH_CHAIN: the argmax chain, the best prefixes of top-1 lists), as `_build_tree`
        drafts it (the same tokens up to argmax ties), and its nodes' path probabilities [R, num_nodes - 1]
        (`budget.tree_accept_probs`): the controller's estimate of each node's acceptance."""
        n = self.num_nodes - 1
        logp, ids = self._top_k(local[:, :n], 1) if self.name == DFLASH_CHAIN else self._top_k(local, n)
        tree = build_ddtree_from_top_k(logp, ids, roots, n)
        return tree, tree_accept_probs(tree, logp, ids)
