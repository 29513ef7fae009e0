"""CPU tests of the experimental DFLASH worker's GPU-free parts: the target hidden capture on a stand-in
decoder stack shaped like SGLang's Qwen3.5 layers, the extend/verify bookkeeping helpers, and the
worker classes. Nothing here imports SGLang's runtime modules (the worker
module imports them only inside its methods), so no `tests/sgl_kernel_stub` is needed; the worker
itself (draft, verify, commit, GDN update) needs a GPU and is not tested here.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from sglang_dflash.ddtree import accept_greedy, accept_sampling, build_ddtree
from sglang_dflash.dflash import chain_tree
from sglang_dflash.sglang.hidden_capture import HiddenCapture, decoder_layers
from sglang_dflash.sglang.step_profile import StepProfile
from sglang_dflash.sglang.worker_common import (
    DDTreeWorkerBase,
    StaticBlockEmbedding,
    draft_graphs_enabled,
    extend_tap_layout,
    fit_to_drafter,
    local_vocab_range,
    request_unsupported,
    sampling_args,
    track_candidates,
    track_cuts,
)

D = 8


class Communicator:
    """SGLang's LayerCommunicator in miniature: prepare_attn / prepare_mlp are fused add + RMSNorm that
    leave the sum in `residual` and update it IN PLACE (as sgl_kernel's fused_add_rmsnorm does)."""

    @staticmethod
    def _add_norm(h, r):
        if r is None:
            return torch.nn.functional.rms_norm(h, (D,)), h.clone()
        r.add_(h)
        return torch.nn.functional.rms_norm(r, (D,)), r

    def prepare_attn(self, hidden_states, residual, forward_batch):
        return self._add_norm(hidden_states, residual)

    def prepare_mlp(self, hidden_states, residual, forward_batch):
        return self._add_norm(hidden_states, residual)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_communicator = Communicator()
        self.attn, self.mlp = nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, positions, hidden_states, residual, forward_batch):
        h, r = self.layer_communicator.prepare_attn(hidden_states, residual, forward_batch)
        h, r = self.layer_communicator.prepare_mlp(self.attn(h), r, forward_batch)
        return self.mlp(h), r


class Stack(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.model = nn.Module()
        self.model.layers = nn.ModuleList(Layer() for _ in range(n))

    def forward(self, x):
        h, r, outs = x, None, []
        for layer in self.model.layers:
            h, r = layer(None, h, r, None)
            outs.append((h + r).clone())  # layer output = hidden + residual (reference)
        return outs


@torch.no_grad()
@pytest.mark.parametrize("T", [5, 12])  # within the static buffer, and over it (a large prefill)
def test_capture_equals_layer_outputs(T):
    torch.manual_seed(0)
    model = Stack(5)
    ids = [1, 2, 4]  # 4 is the last layer: the forward-hook fallback
    cap = HiddenCapture(ids, D, capacity=8, device="cpu", dtype=torch.float32)
    cap.install(decoder_layers(model))
    cap.install(decoder_layers(model))  # idempotent
    x = torch.randn(T, D)
    ref = model(x)
    got = cap.taps(T)
    assert got.shape == (T, len(ids) * D)
    for tap, layer in enumerate(ids):
        torch.testing.assert_close(got[:, tap * D : (tap + 1) * D], ref[layer])
    if T <= 8:
        assert got.data_ptr() == cap.buffer.data_ptr()  # graph-safe: the static buffer


class Boundary:
    """SGLang 0.5.23's StageBoundary in miniature: the residual lives on the batch (`residual_stream`); `prepare`
    adds the owed output into it IN PLACE, hands an attention stage's `capture` callback that sum, returns its norm."""

    def __init__(self, attention: bool):
        self.attention = attention

    def prepare(self, hidden_states, forward_batch, **call):
        assert self.attention or not call, "FFN stages take no capture options"
        r = forward_batch.residual_stream
        if r is None:
            r = forward_batch.residual_stream = hidden_states.clone()
        else:
            r.add_(hidden_states)
        if call.get("capture") is not None:
            call["capture"](r, owned=False)
        return torch.nn.functional.rms_norm(r, (D,))


class BoundaryLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_boundary, self.ffn_boundary = Boundary(True), Boundary(False)
        self.attn, self.mlp = nn.Linear(D, D), nn.Linear(D, D)
        self.capture = None  # a capture of SGLang's own (as its layers pass for EAGLE3 / DFLASH taps)

    def forward(self, positions, hidden_states, forward_batch):
        call = {} if self.capture is None else {"capture": self.capture}
        h = self.attn(self.attn_boundary.prepare(hidden_states, forward_batch, **call))
        return self.mlp(self.ffn_boundary.prepare(h, forward_batch))  # owed to the stream, not yet summed


class BoundaryStack(Stack):
    def __init__(self, n):
        nn.Module.__init__(self)
        self.model = nn.Module()
        self.model.layers = nn.ModuleList(BoundaryLayer() for _ in range(n))

    def forward(self, x):
        batch, h, outs = SimpleNamespace(residual_stream=None), x, []
        for layer in self.model.layers:
            h = layer(None, h, batch)
            outs.append((h + batch.residual_stream).clone())  # layer output = owed + residual (reference)
        return outs


@torch.no_grad()
def test_capture_through_sglang_0_5_23_layer_boundaries():
    """0.5.23's layers return only what they owe the residual stream: the taps come from the next layer's boundary,
    a capture SGLang itself asked for still gets its values, and a tap on the last layer is refused."""
    torch.manual_seed(0)
    model = BoundaryStack(5)
    theirs = []
    model.model.layers[3].capture = lambda value, owned: theirs.append(value.clone())
    ids = [0, 2, 3]
    cap = HiddenCapture(ids, D, capacity=8, device="cpu", dtype=torch.float32)
    cap.install(decoder_layers(model))
    x = torch.randn(6, D)
    ref = model(x)
    for tap, layer in enumerate(ids):
        torch.testing.assert_close(cap.taps(6)[:, tap * D : (tap + 1) * D], ref[layer])
    assert len(theirs) == 1 and torch.equal(theirs[0], cap.taps(6)[:, D : 2 * D])
    with pytest.raises(ValueError, match="last decoder layer"):
        HiddenCapture([4], D, capacity=8, device="cpu", dtype=torch.float32).install(BoundaryStack(5).model.layers)


def test_capture_rejects_bad_layer_ids():
    cap = HiddenCapture([7], D, capacity=4, device="cpu", dtype=torch.float32)
    with pytest.raises(ValueError, match="out of range"):
        cap.install(Stack(3).model.layers)
    cap = HiddenCapture([0], D, capacity=4, device="cpu", dtype=torch.float32)
    with pytest.raises(RuntimeError, match="asked for 9 tokens"):
        cap.taps(9)


def test_extend_tap_layout():
    rows, nodes, starts = extend_tap_layout([0, 5, 2], [3, 1, 2])
    assert rows.tolist() == [[0, 1, 2], [3, 0, 0], [4, 5, 0]]
    assert nodes.tolist() == [[0, 1, 2], [0, -1, -1], [0, 1, -1]]
    assert starts.tolist() == [0, 5, 2]


def test_local_vocab_range():
    assert local_vocab_range(SimpleNamespace(weight=torch.zeros(6, 2))) == (0, 6)
    head = SimpleNamespace(
        weight=torch.zeros(8, 2), shard_indices=SimpleNamespace(org_vocab_start_index=8, org_vocab_end_index=15)
    )
    assert local_vocab_range(head) == (8, 7)


@pytest.mark.parametrize("tp", [1, 2])
def test_worker_classes(tp):
    """One worker serves DFLASH_CHAIN/DDTREE at any TP on 0.5.11, under its overlap scheduler (SGLang's default; the
    non-overlap one, spec v1 there, is refused by name); SGLang's names (DFLASH included, once resolved) are not ours."""
    from sglang_dflash.sglang.algorithm import DraftTreeAlgorithm, is_ours
    from sglang_dflash.sglang.ddtree_worker_v2_0511 import DDTreeWorkerV2For0511
    from sglang_dflash.sglang.server_args import ServerArgsError

    def args(name, overlap=True):
        return SimpleNamespace(speculative_algorithm=name, tp_size=tp, disable_overlap_schedule=not overlap)

    for name in ("DFLASH_CHAIN", "DDTREE"):
        assert DraftTreeAlgorithm(name).create_worker(args(name)) is DDTreeWorkerV2For0511
        with pytest.raises(ServerArgsError, match=f"{name} on SGLang 0.5.11 .* drop --disable-overlap-schedule"):
            DraftTreeAlgorithm(name).create_worker(args(name, overlap=False))
    assert is_ours(args("DDTREE")) and is_ours(args("DFLASH_CHAIN")) and is_ours(DraftTreeAlgorithm("DDTREE"))
    assert not any(is_ours(args(name)) for name in ("EAGLE", "DFLASH", None))
    assert not DraftTreeAlgorithm("DDTREE").is_dflash()  # SGLang 0.5.11's own DFLASH paths stay off for ours


def test_a_weight_update_leaves_the_drafter_and_is_not_passed_on():
    """0.5.11's scheduler asks the speculative worker to update after the target: the worker answers success without
    calling the target worker again (it forwards unknown names to it) or failing. (0.5.23 asks the worker for its
    weight_update_runners, none: test_sglang_surface.py.)"""
    from sglang_dflash.sglang.ddtree_worker_v2_0511 import DDTreeWorkerV2For0511

    w = object.__new__(DDTreeWorkerV2For0511)
    called = []
    w.name, w._target_worker = "DDTREE", SimpleNamespace(update_weights_from_disk=called.append)
    assert w.update_weights_from_disk("req") == (True, "DDTREE: drafter weights unchanged")
    assert w.update_weights_from_ipc("req") == (True, "DDTREE: drafter weights unchanged") and called == []


def sampling_info(**overrides):
    """SGLang's SamplingBatchInfo fields the worker reads: request 0 greedy (SGLang's top_k = 1), request 1
    temperature 0.7 with top-p 0.9 and no top-k (TOP_K_ALL), request 2 temperature 1.3 with top-k 5."""
    info = dict(
        is_all_greedy=False,
        temperatures=torch.tensor([[1.0], [0.7], [1.3]]),
        top_ps=torch.tensor([1.0, 0.9, 1.0]),
        top_ks=torch.tensor([1, 1 << 30, 5], dtype=torch.int32),
        need_min_p_sampling=False,
        penalizer_orchestrator=SimpleNamespace(is_required=False),
        has_custom_logit_processor=False,
        logit_bias=None,
    )
    return SimpleNamespace(**{**info, **overrides})


def test_sampling_args_map_sglang_sampling_info():
    args = sampling_args(sampling_info())
    assert args["temperature"].tolist() == pytest.approx([0.0, 0.7, 1.3])
    assert args["top_p"].tolist() == pytest.approx([1.0, 0.9, 1.0])
    assert args["top_k"].tolist() == [1, -1, 5]
    assert sampling_args(sampling_info(is_all_greedy=True)) is None

    # end to end: the greedy request of a sampled batch accepts exactly what greedy acceptance does, draw after
    # draw (flat target logits over 11 tokens: had it lost both its top_k 1 and temperature 0, it would leave the
    # argmax in most of 20 draws), while the others sample
    gen = torch.Generator().manual_seed(0)
    tree = build_ddtree(torch.randn(3, 4, 11, generator=gen), torch.tensor([1, 2, 3]), 6)
    logits = torch.randn(3, 7, 11, generator=gen) * 0.3
    greedy = accept_greedy(tree, logits)
    bonus = set()
    for _ in range(20):
        sampled = accept_sampling(tree, logits, **args, generator=gen)
        assert torch.equal(sampled.accepted_nodes[0], greedy.accepted_nodes[0])
        assert sampled.bonus_tokens[0] == greedy.bonus_tokens[0]
        bonus.add(int(sampled.bonus_tokens[1]))
    assert len(bonus) > 1  # request 1 does sample


def request(**params):
    """An SGLang Req as `request_unsupported` reads it: SamplingParams' defaults, overridden."""
    defaults = dict(min_p=0.0, frequency_penalty=0.0, presence_penalty=0.0, repetition_penalty=1.0, logit_bias=None,
                    json_schema=None, regex=None, ebnf=None, structural_tag=None, min_new_tokens=0, sampling_seed=None,
                    beam_width=None, watermark=None)  # fmt: skip
    return_logprob = params.pop("return_logprob", False)
    processor = params.pop("custom_logit_processor", None)
    return SimpleNamespace(sampling_params=SimpleNamespace(**{**defaults, **params}), return_logprob=return_logprob,
                           custom_logit_processor=processor)  # fmt: skip


@pytest.mark.parametrize(
    "override, named",
    [
        (dict(return_logprob=True), "logprobs"),
        (dict(regex="[a-z]+"), "grammar"),
        (dict(json_schema="{}"), "grammar"),
        (dict(min_p=0.05), "min_p"),
        (dict(frequency_penalty=0.5), "penalties"),
        (dict(repetition_penalty=1.1), "penalties"),
        (dict(logit_bias={"7": 2.0}), "logit_bias"),
        (dict(custom_logit_processor="serialized"), "custom logit processors"),
        (dict(min_new_tokens=4), "min_new_tokens"),
        (dict(sampling_seed=7), "sampling_seed"),
        (dict(beam_width=4), "beam search"),
        (dict(watermark=object()), "watermarking"),
    ],
)
def test_requests_the_workers_cannot_serve_are_named(override, named):
    assert request_unsupported(request(temperature=0.7, top_p=0.9)) is None  # plain sampling is served
    message = request_unsupported(request(**override))
    assert message.startswith("sglang-dflash workers do not support") and named in message


def test_scheduler_aborts_unsupported_requests_at_admission_under_our_algorithms_only():
    from hooks import around

    from sglang_dflash.sglang.algorithm import DraftTreeAlgorithm
    from sglang_dflash.sglang.plugin.patches import add_request_to_queue

    class Req:
        def __init__(self, prompt=10, **params):
            self.__dict__.update(vars(request(max_new_tokens=100, **params)))
            self.origin_input_ids, self.aborted = [1] * prompt, None

        def finished(self):
            return self.aborted is not None

        def set_finish_with_abort(self, message):
            self.aborted = message

    class Scheduler:  # the method the hook wraps, as SGLang's scheduler calls it
        def __init__(self, algorithm):
            self.spec_algorithm, self.queue = algorithm, []
            self.draft_worker = SimpleNamespace(max_len=64, num_nodes=17)

        def _add_request_to_queue(self, req, is_retracted=False):
            self.queue.append(req)

    around(Scheduler, "_add_request_to_queue", add_request_to_queue)
    ours, other = Scheduler(DraftTreeAlgorithm("DDTREE")), Scheduler(object())
    for scheduler in (ours, other):
        scheduler._add_request_to_queue(Req(min_p=0.1))
        scheduler._add_request_to_queue(Req(temperature=0.5))
        scheduler._add_request_to_queue(Req(prompt=60))
    assert "min_p" in ours.queue[0].aborted and ours.queue[1].aborted is None  # queued either way, as SGLang does
    assert (
        ours.queue[1].sampling_params.max_new_tokens == 64 - 17 - 10 + 2
        and "SGLANG_DFLASH_DRAFT_MAX_LEN" in ours.queue[2].aborted
    )
    assert [r.aborted for r in other.queue] == [None] * 3 and other.queue[1].sampling_params.max_new_tokens == 100


@pytest.mark.parametrize("N", [2, 9, 16])
def test_workers_draft_the_chain_or_the_tree_of_the_drafter_logits(N):
    """TP=1: DFLASH_CHAIN drafts the chain of the argmax over the first N - 1 depths, DDTREE the best N - 1 prefixes
    of all block_size - 1 depths (what the standalone engine verifies for the same logits)."""
    from sglang_dflash.dflash import chain_tree

    gen = torch.Generator().manual_seed(N)
    roots, logits = torch.tensor([5, 9, 2]), torch.randn(3, 15, 40, generator=gen)
    trees = {}
    for name in ("DFLASH_CHAIN", "DDTREE"):
        worker = DDTreeWorkerBase.__new__(DDTreeWorkerBase)  # only what drafting reads
        worker.name, worker.num_nodes, worker.tp_size, worker.heads = name, N, 1, False
        worker.drafter = SimpleNamespace(config=SimpleNamespace(format="dflash", markov_head_type=None))
        worker.profile = StepProfile(None, torch.device("cpu"))
        worker._run_drafter = lambda roots, slots, seq_lens: (None, logits)
        trees[name] = worker._build_tree(roots, *worker._run_drafter(roots, None, None))
    chain, tree = trees["DFLASH_CHAIN"], trees["DDTREE"]
    assert torch.equal(chain.token_ids, chain_tree(logits[:, : N - 1].argmax(-1), roots).token_ids)
    expected = build_ddtree(logits, roots, N - 1)
    for field in ("token_ids", "parents", "depths", "next_token", "next_sibling"):
        assert torch.equal(getattr(tree, field), getattr(expected, field)), field
    assert tree.num_nodes == chain.num_nodes == N


@pytest.fixture(scope="module")
def tiny_target_dir(tmp_path_factory):
    from model_helpers import save_tiny_target, tiny_target_config

    root = tmp_path_factory.mktemp("target")
    save_tiny_target(root, tiny_target_config(layer_types=("linear_attention", "full_attention")), seed=3)
    return root


@pytest.mark.parametrize("fmt, heads", [("dflash2", dict(selector_rank=4, selector_top_k=3)),
                                        ("dspark", dict(markov_rank=4, markov_head_type="vanilla"))])  # fmt: skip
@pytest.mark.parametrize("name, N", [("DFLASH_CHAIN", 4), ("DDTREE", 7)])
def test_workers_draft_with_a_conditional_head(tiny_target_dir, tmp_path, fmt, heads, name, N):
    """TP=1, a DFlash2 / DSpark drafter: the worker's pass hands the drafter's hidden rows to the draft, which is the
    standalone engine's for the same pass (`proposal`: its heads have their own hand-worked tests), a chain cut to
    N - 1 tokens (a chain drafts depth by depth, so its first N - 1 tokens). The head changes the draft here: the
    marginals' chain and tree differ."""
    from sglang_dflash.init_draft import init_draft
    from sglang_dflash.models.dflash_draft import DFlashDrafter
    from sglang_dflash.proposal import markov_chain, markov_heads, selector_chain, selector_heads

    init_draft(tiny_target_dir, tmp_path, num_layers=1, block_size=6, taps=2, seed=5, format=fmt, heads=heads)
    drafter = DFlashDrafter.from_pretrained(tmp_path)
    c, R = drafter.config, 3
    worker = DDTreeWorkerBase.__new__(DDTreeWorkerBase)  # only what drafting reads
    worker.name, worker.num_nodes, worker.tp_size, worker.drafter = name, N, 1, drafter
    worker.heads = worker._choose_heads(c)
    worker.draft_graphs, worker.cache = None, drafter.new_cache(R, 32)
    gen = torch.Generator().manual_seed(0)
    worker.embed = nn.Embedding(c.vocab_size, c.hidden_size)
    worker.lm_head_weight, worker.vocab_local = torch.randn(c.vocab_size, c.hidden_size, generator=gen), c.vocab_size
    roots, slots, lens = torch.tensor([5, 9, 2]), torch.arange(R), torch.tensor([0, 3, 7])

    hidden, logits = worker._run_drafter(roots, slots, lens)
    assert worker.heads and hidden.shape == (R, c.num_depths, c.hidden_size) and logits.shape[:2] == (R, c.num_depths)
    tree = worker._build_tree(roots, hidden, logits)
    assert tree.num_nodes == N
    if name == "DFLASH_CHAIN":
        full = (selector_chain if fmt == "dflash2" else markov_chain)(drafter, hidden, logits, roots)
        assert torch.equal(tree.token_ids, chain_tree(full[:, : N - 1], roots).token_ids)
        assert not torch.equal(full, logits.argmax(-1))
        return
    cand, first, step = (selector_heads if fmt == "dflash2" else markov_heads)(drafter, hidden, logits, roots, N - 1)
    from sglang_dflash.conditional_tree import build_conditional_tree

    expected = build_conditional_tree(cand, first, step, roots, N - 1)
    for field in ("token_ids", "parents", "depths"):
        assert torch.equal(getattr(tree, field), getattr(expected, field)), field
    assert not torch.equal(tree.token_ids, build_ddtree(logits, roots, N - 1).token_ids)


def test_conditional_heads_at_tp1_only_and_a_budget_the_selector_can_fill(caplog):
    """Which drafters draft through their head: DFlash2 and DSpark at TP = 1 (DSpark's rnn head: chains only), none
    at TP = 2 (a warning says so); a DDTREE budget over what a DFlash2 selector offers (K + K^2 + .. + K^D prefixes)
    is refused at start, naming the flag."""

    def config(fmt, **kw):  # what the choice reads of a DraftConfig; 2 draft depths
        return SimpleNamespace(**{**dict(format=fmt, markov_head_type=None, selector_top_k=0, num_depths=2), **kw})

    def heads(c, name="DDTREE", N=5, tp=1):
        worker = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
        worker.name, worker.num_nodes, worker.tp_size = name, N, tp
        return worker._choose_heads(c)

    dflash2, rnn = config("dflash2", selector_top_k=2), config("dspark", markov_head_type="rnn")
    assert not heads(config("dflash")) and heads(dflash2) and heads(config("dspark", markov_head_type="vanilla"))
    assert heads(rnn, "DFLASH_CHAIN") and not heads(rnn)
    assert not heads(dflash2, tp=2) and "TP = 1 only" in caplog.text
    assert heads(dflash2, N=7) and heads(dflash2, "DFLASH_CHAIN", N=3)  # 2 + 4 prefixes over 2 depths
    with pytest.raises(ValueError, match="--speculative-num-draft-tokens 8 asks a budget of 7 nodes.*offers 6"):
        heads(dflash2, N=8)


@pytest.mark.parametrize("interval", [1, 4, 16, 256])
def test_track_cuts_find_the_node_that_ends_on_a_tracking_point(interval):
    """Brute force: the accepted node (index t of keep) after which the sequence holds a multiple of `interval`
    tokens; keep <= interval (SGLang asserts mamba_track_interval >= the verify's nodes), so at most one."""
    gen = torch.Generator().manual_seed(interval)
    seq = torch.randint(1, 600, (64,), generator=gen).tolist()
    keep = [int(torch.randint(1, min(interval, 17) + 1, (1,), generator=gen)) for _ in seq]
    seq[:3], keep[:3] = [interval - 1, interval, 2 * interval - 1], [1, min(interval, 3), 1]  # edges
    expected = []
    for s, k in zip(seq, keep):
        hits = [t for t in range(k) if (s + t + 1) % interval == 0]
        assert len(hits) <= 1
        expected.append(hits[0] if hits else -1)
    assert track_cuts(torch.tensor(seq), torch.tensor(keep), interval).tolist() == expected
    assert expected[0] == 0 and (interval == 1 or expected[1] == -1)
    # the host's candidates before the device's acceptance: every request that can cut with up to max_keep nodes
    max_keep = min(interval, 17)
    candidates = set(track_candidates(seq, max_keep, interval))
    can_cut = {r for r, s in enumerate(seq) if any((s + t + 1) % interval == 0 for t in range(max_keep))}
    assert candidates == can_cut and {r for r, c in enumerate(expected) if c >= 0} <= candidates


def random_drafter(hidden: int, heads: int, kv_heads: int, head_dim: int, vocab: int, block: int, std: float, device="cpu"):
    """A random 2-layer DFlash drafter tapping 2 target layers (mask token 3), its weights drawn from N(0, std)."""
    from sglang_dflash.models.config import DraftConfig
    from sglang_dflash.models.dflash_draft import DFlashDrafter

    c = DraftConfig.from_dict(
        dict(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2, num_attention_heads=heads,
             num_key_value_heads=kv_heads, head_dim=head_dim, vocab_size=vocab, block_size=block, rms_norm_eps=1e-6,
             rope_theta=10000.0, max_position_embeddings=256, dflash_config=dict(target_layer_ids=[0, 1], mask_token_id=3))
    )  # fmt: skip
    drafter = DFlashDrafter(c).to(device).eval()
    for p in drafter.parameters():
        torch.nn.init.normal_(p, std=std)
    return drafter


def test_static_block_embedding_gives_the_drafters_logits():
    """The graphed pass's block embedding (roots loaded before the replay, the mask row once) gives the drafter the
    logits of the plain embedding lookup; rows past R and earlier loads do not leak in."""
    torch.manual_seed(0)
    drafter = random_drafter(hidden=32, heads=4, kv_heads=2, head_dim=8, vocab=50, block=5, std=0.2)
    c = drafter.config
    embed, head = torch.nn.Embedding(50, 32), torch.nn.Linear(32, 50, bias=False)
    cache = drafter.new_cache(num_slots=4, max_len=16)
    slots, lens = torch.tensor([2, 0, 3]), torch.tensor([5, 3, 7])
    for s, n in zip(slots.tolist(), lens.tolist()):
        taps = torch.randn(1, n, 2 * 32)
        drafter.append_context(cache, taps, torch.tensor([s]), torch.tensor([0]), torch.arange(n)[None])
    static = StaticBlockEmbedding(embed, c.mask_token_id, max_rows=6, device=torch.device("cpu"))
    static.load(torch.tensor([9, 9, 9, 9, 9, 9]))  # an earlier, larger batch
    roots = torch.tensor([7, 11, 42])
    static.load(roots)
    block = torch.full((3, c.block_size), c.mask_token_id)
    block[:, 0] = roots
    with torch.no_grad():
        assert torch.equal(static(block), embed(block))
        expected = drafter(cache, roots, slots, lens, embed, head)
        torch.testing.assert_close(drafter(cache, roots, slots, lens, static, head), expected, rtol=0, atol=0)


def test_draft_graphs_on_by_default_on_cuda(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.delenv("SGLANG_DFLASH_DRAFT_GRAPHS", raising=False)
    assert draft_graphs_enabled(cuda) and not draft_graphs_enabled(cpu)
    monkeypatch.setenv("SGLANG_DFLASH_DRAFT_GRAPHS", "0")
    assert not draft_graphs_enabled(cuda)


class Replayed:
    """CapturedStep's stand-in on CPU: runs fn on clones of the examples at "capture" (recorded in `captured`, when a
    test sets it) and on its static inputs, refreshed from the step's, at each "replay"."""

    captured: list | None = None

    def __init__(self, fn, examples, context=None, pool=None):
        self.pool = pool
        if self.captured is not None:
            self.captured.append([e.clone() for e in examples])
        self.fn, self.inputs = fn, [e.clone() for e in examples]
        self.out = fn(*self.inputs)

    @classmethod
    def for_requests(cls, fn, R, device, context=None, pool=None):
        zeros = torch.zeros(R, dtype=torch.long, device=device)
        return cls(fn, (zeros, torch.full_like(zeros, -1), zeros), context, pool)

    def __call__(self, *inputs):
        for s, x in zip(self.inputs, inputs, strict=True):
            s.copy_(x)
        return self.fn(*self.inputs)


def test_verified_context_append_through_a_captured_step(monkeypatch):
    """The graphed context append: captured once per batch size on examples that write only scratch (slots and
    nodes -1), replayed on copies of the step's inputs, reading the taps from the capture buffer; it leaves the
    cache as the eager append does (the graph stood in for by `Replayed`)."""
    from sglang_dflash.sglang import worker_common

    captured = []
    monkeypatch.setattr(worker_common, "CapturedStep", Replayed)
    monkeypatch.setattr(Replayed, "captured", captured)
    torch.manual_seed(1)
    drafter = random_drafter(hidden=16, heads=2, kv_heads=1, head_dim=8, vocab=30, block=4, std=0.3)
    R, N = 2, 4
    capture = SimpleNamespace(capacity=3 * N, buffer=torch.randn(3 * N, 2 * 16))
    capture.taps = lambda n: capture.buffer[:n]
    slots, start = torch.tensor([1, 0]), torch.tensor([3, 5])
    nodes = torch.tensor([[0, 2, -1], [0, -1, -1]])
    caches = []
    for graphs in (None, {}):
        worker = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
        worker.drafter, worker.cache, worker.capture = drafter, drafter.new_cache(3, 16), capture
        worker.num_nodes, worker.draft_graphs, worker.context_graphs = N, graphs, {}
        worker.block_embed, worker.graph_pools = SimpleNamespace(roots=torch.zeros(3, 16)), ("drafter pool", "context pool")
        worker._graph_batch_size = lambda bs: next((s for s in (1, 3) if s >= bs), None)  # the target pads 2 to 3
        worker._append_verified(R, slots, start, nodes, N)
        worker._append_verified(R, slots, start + 2, nodes, N)  # a second step replays the same capture
        caches.append(worker.cache)
    assert len(captured) == 1 and list(worker.context_graphs) == [(3, N)]
    assert worker.context_graphs[3, N].pool == "context pool"
    assert (captured[0][0] == -1).all() and (captured[0][2] == -1).all() and captured[0][0].shape == (3,)
    eager, graphed = caches
    live = slice(0, -1)  # the pad row wrote the scratch entry, the pool's last
    assert torch.equal(eager.k[:, live], graphed.k[:, live]) and torch.equal(eager.v[:, live], graphed.v[:, live])
    assert eager.k[:, eager.table[1, 3]].abs().sum() > 0  # it wrote


def test_the_drafter_pass_pads_to_the_targets_graph_size(monkeypatch):
    """With graphs on, a pass of R requests replays the graph of the batch size the target's verify of R pads to
    (captured once, on the scratch slot), its pad rows on the scratch slot, and returns the eager pass's R rows; past
    the target's largest graph it runs eagerly. The graphs are stood in for by `Replayed`."""
    from sglang_dflash.sglang import worker_common

    captured = []
    monkeypatch.setattr(worker_common, "CapturedStep", Replayed)
    monkeypatch.setattr(Replayed, "captured", captured)
    torch.manual_seed(4)
    drafter = random_drafter(hidden=16, heads=2, kv_heads=1, head_dim=8, vocab=30, block=4, std=0.3)
    w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
    w.drafter, w.cache, w.heads, w.graph_context, w.device = drafter, drafter.new_cache(6, 16), False, None, torch.device("cpu")
    w.embed, w.lm_head_weight, w.vocab_local = torch.nn.Embedding(30, 16), torch.randn(30, 16), 30
    w.block_embed = StaticBlockEmbedding(w.embed, drafter.config.mask_token_id, 6, w.device)
    w.graph_pools = ("drafter pool", "context pool")
    w._graph_batch_size = lambda bs: next((s for s in (1, 4) if s >= bs), None)
    for s, n in ((0, 5), (2, 3), (4, 7)):
        drafter.append_context(w.cache, torch.randn(1, n, 32), torch.tensor([s]), torch.tensor([0]), torch.arange(n)[None])
    roots, slots, lens = torch.tensor([3, 9, 11]), torch.tensor([0, 2, 4]), torch.tensor([5, 3, 7])
    with torch.no_grad():
        w.draft_graphs = None
        _, eager = w._run_drafter(roots, slots, lens)
        w.draft_graphs = {}
        _, graphed = w._run_drafter(roots, slots, lens)
        _, again = w._run_drafter(roots.flip(0), slots.flip(0), lens.flip(0))
        assert set(w.draft_graphs) == {4} and len(captured) == 1 and captured[0][1].tolist() == [-1] * 4
        assert w.draft_graphs[4].pool == "drafter pool"
        torch.testing.assert_close(graphed, eager)
        torch.testing.assert_close(again, eager.flip(0))
        w._graph_batch_size = lambda bs: None  # past the largest graph: eager, nothing captured
        torch.testing.assert_close(w._run_drafter(roots, slots, lens)[1], eager)
    assert len(captured) == 1


def test_warm_up_sizes_are_every_size_a_batch_pads_to():
    w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
    w.block_embed = SimpleNamespace(roots=torch.zeros(64, 4))
    w._graph_batch_size = lambda bs: next((s for s in (1, 4, 8, 16) if s >= bs), None)
    w.server_args, w.draft_graphs = SimpleNamespace(max_running_requests=12), {}
    assert w._warm_up_sizes() == [1, 2, 4, 8, 16]  # 9 .. 12 pad to 16
    w.server_args.max_running_requests = 40  # 17 .. 40 run eagerly
    assert w._warm_up_sizes() == [1, 2, 4, 8, 16]
    w.server_args.max_running_requests = 1
    assert w._warm_up_sizes() == [1]
    w.server_args.max_running_requests, w.draft_graphs = 40, None  # graphs off
    assert w._warm_up_sizes() == [1, 2]


def warm_up_worker(algorithm: str, graphs: bool, tiers: bool) -> tuple[DDTreeWorkerBase, int]:
    """A CPU worker with what `_warm_up` touches: a random drafter and its cache of 3 slots x 16 positions, a capture
    buffer, graphs on or off (stood in for by `Replayed`, monkeypatched by the caller), width tiers 2 and N or none.
    Returns it and N."""
    drafter = random_drafter(hidden=16, heads=2, kv_heads=1, head_dim=8, vocab=30, block=5, std=0.3)
    N = 4 if algorithm == "DFLASH_CHAIN" else 7
    w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
    w.name, w.heads = algorithm, False
    w.drafter, w.cache, w.num_nodes, w.device, w.tp_size, w.graph_context = (
        drafter,
        drafter.new_cache(3, 16),
        N,
        torch.device("cpu"),
        1,
        None,
    )
    w.capture = SimpleNamespace(capacity=3 * N, buffer=torch.randn(3 * N, 2 * 16))
    w.capture.taps = lambda n: w.capture.buffer[:n]
    w.embed, w.lm_head_weight, w.vocab_local = torch.nn.Embedding(30, 16), torch.randn(30, 16), 30
    w.draft_graphs, w.context_graphs, w.graph_pools = ({} if graphs else None), {}, (None, None)
    w.tiers = {2: None, N: None} if tiers else {}
    w.block_embed = StaticBlockEmbedding(w.embed, drafter.config.mask_token_id, 3, w.device)
    w._graph_batch_size, w.width = (lambda bs: bs if bs <= 2 else None), None
    table = torch.randint(0, 100, (3, 16)) if algorithm == "DDTREE" else torch.randint(0, 100, (3, 16), dtype=torch.int32)
    w.model_runner = SimpleNamespace(req_to_token_pool=SimpleNamespace(req_to_token=table),
                                     model_config=SimpleNamespace(vocab_size=30))  # fmt: skip
    return w, N


@pytest.mark.parametrize("algorithm", ["DFLASH_CHAIN", "DDTREE"])
@pytest.mark.parametrize("graphs", [False, True])
@pytest.mark.parametrize("tiers", [False, True])
def test_warm_up_touches_only_scratch(monkeypatch, algorithm, graphs, tiers):
    """The start-up warm-up runs a drafter step for batches of 1 and 2 on the scratch slot: every live pool entry of
    the drafter's context is as before; with graphs on, the drafter and context-append graphs of both sizes exist (the
    latter for each verify width: with the width controller's tiers, 2 and N), the context append's as wide as the
    step's accepted paths (DFLASH: N nodes; DDTREE: the drafter's block). The graphs are stood in for by `Replayed`."""
    from sglang_dflash.sglang import worker_common

    monkeypatch.setattr(worker_common, "CapturedStep", Replayed)
    torch.manual_seed(3)
    w, N = warm_up_worker(algorithm, graphs, tiers)
    drafter = w.drafter
    live = torch.randn_like(w.cache.k[:, :-1]), torch.randn_like(w.cache.v[:, :-1])
    w.cache.k[:, :-1], w.cache.v[:, :-1] = live
    w._warm_up([1, 2])
    assert torch.equal(w.cache.k[:, :-1], live[0]) and torch.equal(w.cache.v[:, :-1], live[1])
    if graphs:
        widths = {2, N} if tiers else {N}
        assert set(w.draft_graphs) == {1, 2} and set(w.context_graphs) == {(R, n) for R in (1, 2) for n in widths}
        width = N if algorithm == "DFLASH_CHAIN" else drafter.config.block_size
        assert w.context_graphs[2, N].inputs[2].shape == (2, width)
    else:
        assert w.context_graphs == {}


@pytest.mark.parametrize("algorithm", ["DFLASH_CHAIN", "DDTREE"])
def test_warm_up_runs_each_widths_step_kernels_both_ways(monkeypatch, algorithm):
    """The step's kernels outside the graphs are compiled per verify width: the warm-up runs, at every width (tiers 2
    and N), the greedy acceptance with as few rows as take each of its two ways (rows below PATH_WALK_ROWS, set to 6
    here: at width 2 a batch of 1 and one of 3 requests; at N = 4 (DFLASH_CHAIN) of 1 and of 2; at N = 7 (DDTREE) of 1
    alone, already past it), the verify input and the KV commit; req_to_token is left as it was."""
    from sglang_dflash import ddtree
    from sglang_dflash.sglang import worker_common

    accepts, commits, inputs = [], [], []
    monkeypatch.setattr(worker_common, "CapturedStep", Replayed)
    monkeypatch.setattr(worker_common, "PATH_WALK_ROWS", 6)

    def accept(tree, logits):
        accepts.append(tuple(logits.shape[:2]))
        return ddtree.accept_greedy(tree, logits)

    real = worker_common.commit_accepted

    def commit(*args):
        commits.append(tuple(args[3].shape))  # token_ids [R, N']
        return real(*args)

    monkeypatch.setattr(worker_common, "accept_greedy", accept)
    monkeypatch.setattr(worker_common, "commit_accepted", commit)
    monkeypatch.setattr(worker_common, "eagle_verify_fields", lambda t, *a: inputs.append(t.num_nodes))
    torch.manual_seed(3)
    w, N = warm_up_worker(algorithm, graphs=False, tiers=True)
    table = w.model_runner.req_to_token_pool.req_to_token.clone()
    w._warm_up([1, 2])
    expected = [(1, 2), (3, 2), (1, 4), (2, 4)] if algorithm == "DFLASH_CHAIN" else [(1, 2), (3, 2), (1, 7)]
    assert sorted(accepts) == sorted(commits) == sorted(expected)
    assert sorted(inputs) == sorted(n for _, n in expected)
    assert torch.equal(w.model_runner.req_to_token_pool.req_to_token, table)


def test_warm_up_leaves_no_compile_for_an_extend(monkeypatch):
    """After the warm-up, the drafter's context appends of extends (1 to 4 requests, 1 to 7 tokens: one token is a
    prefix-cache hit's extend) compile nothing new: torch.compile specialises sizes of 1, so a first one-token extend
    stalled a server for seconds. The glue's compiled variants (`layers.gpu_compiled`) are torch.compile with a
    backend that counts its compiles, on CPU."""
    import torch._dynamo

    from sglang_dflash.models import layers
    from sglang_dflash.sglang import worker_common

    compiles = []
    monkeypatch.setattr(worker_common, "CapturedStep", Replayed)
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 64)  # past the limit dynamo runs eagerly, uncounted
    torch._dynamo.reset()
    for fn in (layers.rms_norm, layers.gated_rms_norm, layers.rope, layers.silu_mul):
        counted = torch.compile(fn.__wrapped__, backend=lambda gm, inputs: compiles.append(gm) or gm.forward, dynamic=True)
        monkeypatch.setattr(fn, "compiled", counted)
    torch.manual_seed(3)
    w, _ = warm_up_worker("DDTREE", graphs=True, tiers=False)
    w._warm_up([1, 2])
    assert compiles  # the glue ran compiled
    warm = len(compiles)
    for R, P in ((1, 1), (3, 1), (1, 5), (4, 7), (2, 1)):
        starts = torch.zeros(R, dtype=torch.long)
        nodes = torch.arange(P).expand(R, P)
        w.drafter.append_context(w.cache, torch.randn(R, P, 2 * 16), torch.full((R,), -1), starts, nodes)
    torch._dynamo.reset()
    assert len(compiles) == warm, f"{len(compiles) - warm} compiles after the warm-up"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: captures CUDA graphs")
def test_padded_drafter_graphs_sharing_one_pool_equal_eager_in_any_order():
    """On a GPU: the drafter's graphs at the target's sizes 1, 2 and 4 (captured largest first into one memory pool,
    as the warm-up does), replayed in any order for batches of 1 to 3 requests (3 padded to 4), each give the eager
    pass's logits."""
    dev = torch.device("cuda")
    torch.manual_seed(5)
    drafter = random_drafter(hidden=64, heads=4, kv_heads=2, head_dim=16, vocab=100, block=8, std=0.1, device=dev)
    w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
    w.drafter, w.cache, w.heads, w.graph_context, w.device = drafter, drafter.new_cache(5, 64), False, None, dev
    w.embed, w.lm_head_weight, w.vocab_local = torch.nn.Embedding(100, 64).to(dev), torch.randn(100, 64, device=dev) * 0.1, 100
    w.block_embed = StaticBlockEmbedding(w.embed, drafter.config.mask_token_id, 5, dev)
    w._graph_batch_size = lambda bs: next((s for s in (1, 2, 4) if s >= bs), None)
    w.draft_graphs, w.graph_pools = {}, (torch.cuda.graph_pool_handle(), torch.cuda.graph_pool_handle())
    for s, n in ((0, 6), (1, 3), (2, 9), (3, 4)):
        drafter.append_context(w.cache, torch.randn(1, n, 128, device=dev), torch.tensor([s], device=dev),
                               torch.tensor([0], device=dev), torch.arange(n, device=dev)[None])  # fmt: skip
    lens = torch.tensor([6, 3, 9, 4], device=dev)
    with torch.no_grad():
        for R in (4, 2, 1):
            z = torch.zeros(R, dtype=torch.long, device=dev)
            w._run_drafter(z, torch.full_like(z, -1), z)
        for R in (3, 1, 2, 3, 1):
            roots, slots = torch.randint(0, 100, (R,), device=dev), torch.randperm(4, device=dev)[:R]
            _, logits = w._run_drafter(roots, slots, lens[slots])
            expected = drafter(w.cache, roots, slots, lens[slots], w.embed, w._lm_head)
            torch.testing.assert_close(logits.clone(), expected, rtol=1e-5, atol=1e-5)
    assert sorted(w.draft_graphs) == [1, 2, 4]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: captures CUDA graphs")
def test_cuda_graphed_drafter_and_context_append_equal_eager():
    """On a GPU: the drafter pass captured with StaticBlockEmbedding (roots loaded before each replay) gives the eager
    pass's logits for two different batches of roots, and the graphed context append leaves the eager append's cache."""
    from sglang_dflash.cuda_graph import CapturedStep

    dev = torch.device("cuda")
    torch.manual_seed(2)
    drafter = random_drafter(hidden=64, heads=4, kv_heads=2, head_dim=16, vocab=100, block=8, std=0.1, device=dev)
    c = drafter.config
    embed = torch.nn.Embedding(100, 64).to(dev)
    R, N, S = 3, 8, 4
    slots, lens = torch.tensor([2, 0, 3], device=dev), torch.tensor([9, 4, 13], device=dev)
    capture = SimpleNamespace(capacity=S * N, buffer=torch.randn(S * N, 2 * 64, device=dev))
    capture.taps = lambda n: capture.buffer[:n]
    base = drafter.new_cache(S, 64)
    for s, n in zip(slots.tolist(), lens.tolist()):
        drafter.append_context(base, torch.randn(1, n, 128, device=dev), torch.tensor([s], device=dev),
                               torch.tensor([0], device=dev), torch.arange(n, device=dev)[None])  # fmt: skip
    head = torch.randn(100, 64, device=dev) * 0.1  # one LM head for both workers
    workers = []
    for graphs in (None, {}):
        w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
        w.drafter, w.capture, w.num_nodes, w.draft_graphs, w.context_graphs = drafter, capture, N, graphs, {}
        w.graph_context, w.heads = None, False
        w.cache = type(base)(base.k.clone(), base.v.clone(), base.table)
        w.lm_head_weight, w.vocab_local = head, 100
        w.block_embed = StaticBlockEmbedding(embed, c.mask_token_id, S, dev)
        w._graph_batch_size = lambda bs: bs  # the target's graphs: every size
        w.graph_pools = (torch.cuda.graph_pool_handle(), torch.cuda.graph_pool_handle())
        workers.append(w)
    eager, graphed = workers
    step = None
    with torch.no_grad():
        for roots in (torch.tensor([5, 17, 99], device=dev), torch.tensor([1, 2, 3], device=dev)):
            expected = drafter(eager.cache, roots, slots, lens, embed, eager._lm_head)
            graphed.block_embed.load(roots)
            step = step or CapturedStep.for_requests(graphed._graphed_drafter, R, dev)
            hidden, logits = step(roots, slots, lens)
            assert hidden is None
            torch.testing.assert_close(logits.clone(), expected, rtol=1e-5, atol=1e-5)
        nodes = torch.tensor([[0, 1, 4, -1], [0, -1, -1, -1], [0, 2, -1, -1]], device=dev)
        for w in workers:
            w._append_verified(R, slots, lens, nodes, N)
            w._append_verified(R, slots, lens + 3, nodes, N)
    assert list(graphed.context_graphs) == [(R, N)]
    live = slice(0, S * 64)  # the last pool entry is scratch: capture and rejected nodes write it
    torch.testing.assert_close(graphed.cache.k[:, live], eager.cache.k[:, live], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(graphed.cache.v[:, live], eager.cache.v[:, live], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("max_len, N", [(64, 17), (100, 2), (33, 16)])
@pytest.mark.parametrize("overlap", [False, True])
def test_fit_to_drafter_keeps_every_verify_inside_the_page_table(max_len, N, overlap):
    """Brute force over prompts, requested lengths and (under the overlap scheduler) how far the last verify went:
    after fit_to_drafter, every verify's cached tokens + N stay within max_len: each verify while the request runs
    (at most one token each: the latest starts), and under overlap one more after its last, from up to N tokens
    further; one more allowed token would break that. A prompt with no room is refused by name."""
    for prompt in range(1, max_len + 2):
        for asked in (None, 1, 5, 50, 10**6):
            req = SimpleNamespace(origin_input_ids=[0] * prompt, sampling_params=SimpleNamespace(max_new_tokens=asked))
            message = fit_to_drafter(req, max_len, 2 * N if overlap else N)
            if prompt + (2 * N if overlap else N) - 2 >= max_len:  # not even the first verify (and its next) fits
                assert message and f"{prompt} tokens" in message and "SGLANG_DFLASH_DRAFT_MAX_LEN" in message
                continue
            M = req.sampling_params.max_new_tokens
            assert message is None and 1 <= M <= (asked or M)
            starts = [prompt + emitted - 1 for emitted in range(1, M)]  # cached tokens before each verify
            if overlap:  # the step after the last verify: that one accepted up to N tokens
                starts += [s + accepted for s in starts[-1:] for accepted in range(1, N + 1)]
            assert all(s + N <= max_len for s in starts)
            if asked is None or asked > M:  # capped: as large as fits
                last = prompt + M - 1  # the next verify's start had one more token been allowed
                assert last + N + (N if overlap else 0) > max_len


def test_nan_detection_as_sglangs_sampler(monkeypatch, caplog):
    """--enable-nan-detection (0.5.11): NaN verify logits become -1e5 as SGLang's sampler makes them, with its warning;
    its error under crash_on_warnings (SGLANG_IS_IN_CI); off, or without NaN, the logits are returned untouched. The
    0.5.11 worker accepts from the screened logits."""
    from sglang_dflash.sglang.ddtree_worker_v2_0511 import DDTreeWorkerV2For0511, screen_nan

    nan = float("nan")
    logits = torch.tensor([[[nan, 1.0, 2.0], [0.5, nan, nan]], [[3.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    assert screen_nan(logits, False) is logits
    clean = logits.nan_to_num(0.0)
    assert screen_nan(clean, True) is clean
    try:
        from sglang.srt.utils import crash_on_warnings  # noqa: F401
    except ImportError:
        pytest.skip("this release has no --enable-nan-detection (0.5.23): only the off path applies")
    monkeypatch.delenv("SGLANG_IS_IN_CI", raising=False)
    with caplog.at_level("WARNING"):
        out = screen_nan(logits, True)
    assert "NaN in the logits" in caplog.text
    assert out.tolist() == [[[-1e5, 1.0, 2.0], [0.5, -1e5, -1e5]], [[3.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]
    assert out.argmax(-1).tolist() == [[2, 0], [0, 2]]  # what the chain verify then accepts from
    w = object.__new__(DDTreeWorkerV2For0511)
    w.nan_detection, w.tp_size = True, 1
    tree = chain_tree(torch.tensor([[1], [2]]), torch.tensor([5, 6]))
    with caplog.at_level("WARNING"):
        acc = w._accept(SimpleNamespace(sampling_info=SimpleNamespace(is_all_greedy=True)), tree, logits)
    assert acc.bonus_tokens.tolist() == accept_greedy(tree, out).bonus_tokens.tolist() == [2, 0]
    assert accept_greedy(tree, logits).bonus_tokens.tolist() != [2, 0]  # NaN unscreened: another token
    monkeypatch.setenv("SGLANG_IS_IN_CI", "true")
    with pytest.raises(ValueError, match="NaN in the logits"):
        screen_nan(logits, True)


# Every API parameter of SGLang's SamplingParams, classified: the workers honour it (as stock's verify does, or it
# never reaches the verify), or admission refuses it (the value here makes it active). A release that adds one fails
# the test below until it is classified.
# custom_params is read only by custom logit processors, which are refused.
HONOURED = {"max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "ignore_eos",
            "n", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "stream_interval",
            "custom_params"}  # fmt: skip
REFUSED = dict(min_p=0.05, frequency_penalty=0.5, presence_penalty=0.5, repetition_penalty=1.1, min_new_tokens=4,
               json_schema="{}", regex="a", ebnf="root ::= 'a'", structural_tag="{}", logit_bias={"7": 1.0},
               sampling_seed=7, beam_width=4, watermark=object())  # fmt: skip
INTERNAL = {"stop_strs", "stop_regex_strs", "stop_str_max_len", "stop_regex_max_len", "is_normalized", "ebnf_full_assistant"}


def test_every_sampling_parameter_is_honoured_or_refused():
    import inspect

    from sglang.srt.sampling.sampling_params import SamplingParams

    fields = getattr(SamplingParams, "__struct_fields__", None)  # 0.5.23: a msgspec Struct
    if fields is None:
        fields = [p for p in inspect.signature(SamplingParams.__init__).parameters if p != "self"]
    api = set(fields) - INTERNAL
    assert not api - HONOURED - set(REFUSED), f"classify these SamplingParams fields: {sorted(api - HONOURED - set(REFUSED))}"
    for name in api & set(REFUSED):
        assert request_unsupported(request(**{name: REFUSED[name]})) is not None, name
    for name in api & HONOURED:
        assert request_unsupported(request(**{name: 5})) is None, name


AGREEMENT = """
import sys, time
import torch.distributed as dist
from sglang_dflash.sglang.worker_common import FailureAgreement
rank, store, failed = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
agreement = FailureAgreement([0, 1], timeout_s=3)
if failed:
    t0 = time.time()
    print("ALL_FAILED", agreement.all_failed(), round(time.time() - t0, 1))
else:
    time.sleep(5)  # busy elsewhere (in a real server: waiting in a GPU collective for the failed rank)
    print("DID_NOT_FAIL")
"""


@pytest.mark.parametrize("second_failed", [True, False], ids=["both-failed", "one-failed"])
def test_failure_agreement_over_gloo(tmp_path, second_failed):
    """Two processes of a gloo world: where both failed the step, both learn that every rank failed (and abort the
    batch alike); where only rank 0 failed, its wait ends after its timeout with False (the server then ends)."""
    import subprocess
    import sys

    store = tmp_path / "store"
    failed = ["1", "1" if second_failed else "0"]
    procs = [subprocess.Popen([sys.executable, "-c", AGREEMENT, str(rank), str(store), failed[rank]],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]  # fmt: skip
    outs = [p.communicate(timeout=120)[0] for p in procs]
    lines = [next(line for line in out.splitlines() if line.startswith(("ALL_FAILED", "DID_NOT_FAIL"))) for out in outs]
    if second_failed:
        assert [line.split()[:2] for line in lines] == [["ALL_FAILED", "True"]] * 2
    else:
        answer, waited = lines[0].split()[1:]
        assert answer == "False" and float(waited) >= 2.5 and lines[1] == "DID_NOT_FAIL"


@pytest.mark.parametrize("widths, heads, built", [("off", False, []), ("auto", False, [1, 2, 4, 8]), ("4", False, [4]),
                                                  ("auto", True, [])])  # fmt: skip
def test_width_control_builds_the_narrower_tiers_and_leaves_the_widest_active(monkeypatch, caplog, widths, heads, built):
    """SGLANG_DFLASH_WIDTHS: off, none; auto with --speculative-num-draft-tokens 16: tiers 1, 2, 4, 8 built beside SGLang's
    own (16), in that order; then the widest is the target's again (its backend, graphs and workspace) and the controller
    offers every tier. A drafter whose head drafts (heads) keeps its own trees: off, with a warning."""
    from sglang_dflash.sglang import worker_common

    activated = []
    monkeypatch.setattr(worker_common, "activate_tree_gdn", activated.append)
    monkeypatch.setattr(worker_common, "tree_gdn_workspace", lambda: "ws16")
    monkeypatch.setenv("SGLANG_DFLASH_WIDTHS", widths)
    w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
    w.name, w.num_nodes, w.heads, w.device, w.tp_size = "DDTREE", 16, heads, torch.device("cpu"), 1
    w.graph_runner_attr, w.draft_config = "graph_runner", SimpleNamespace(num_depths=15)
    w.server_args = SimpleNamespace(max_running_requests=4)
    w.model_runner = SimpleNamespace(attn_backend="backend16", graph_runner=SimpleNamespace(capture_bs=[1, 2, 8]))
    order = []
    w._build_tier = lambda n: order.append(n) or (f"backend{n}", f"graphs{n}", f"ws{n}")
    w._init_width_control()
    assert order == built
    if not built:
        assert w.width is None and w.tiers == {} and ("drafts its own" in caplog.text) == heads
        return
    assert sorted(w.tiers) == [*built, 16] and w.tiers[16][0] == "backend16" and w.tiers[16][2] == "ws16"
    assert w.model_runner.attn_backend == "backend16" and w.model_runner.graph_runner.capture_bs == [1, 2, 8]
    assert activated == [16] and w.width.tiers == (*built, 16) and w.width.observations.probs.shape[1:] == (8, 15)


def test_free_gib_reads_after_the_allocator_hands_back_its_cache(monkeypatch):
    """Cached blocks that a capture releases between two readings are not memory the tiers gave back: each reading
    empties torch's cache first (here the fake device's free memory rises from 10 to 12 GiB when it is emptied)."""
    from sglang_dflash.sglang import worker_common

    free = [10 << 30]
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: free.__setitem__(0, 12 << 30))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free[0], 80 << 30))
    assert worker_common.free_gib(SimpleNamespace(type="cuda")) == 12.0
    assert worker_common.free_gib(torch.device("cpu")) == 0.0


@pytest.mark.parametrize("left_gib, warned", [(0.5, True), (3.0, False)])
def test_width_tiers_warn_when_little_gpu_memory_is_left(monkeypatch, caplog, left_gib, warned):
    """Where the tiers leave less than TIERS_HEADROOM_GIB free, the server says so, with the fraction of the GPU they
    took (here 2 GiB of 80: 0.025) to give back through --mem-fraction-static."""
    import logging

    from sglang_dflash.sglang import worker_common

    free = iter([left_gib + 2.0, left_gib])  # before and after the tiers
    monkeypatch.setattr(worker_common, "free_gib", lambda device: next(free))
    monkeypatch.setattr(worker_common, "activate_tree_gdn", lambda n: None)
    monkeypatch.setattr(worker_common, "tree_gdn_workspace", lambda: "ws16")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (0, 80 << 30))
    monkeypatch.setenv("SGLANG_DFLASH_WIDTHS", "auto")
    w = DDTreeWorkerBase.__new__(DDTreeWorkerBase)
    w.name, w.num_nodes, w.heads, w.device, w.tp_size = "DDTREE", 16, False, SimpleNamespace(type="cuda"), 1
    w.graph_runner_attr, w.draft_config = "graph_runner", SimpleNamespace(num_depths=15)
    w.server_args = SimpleNamespace(max_running_requests=4)
    w.model_runner = SimpleNamespace(attn_backend="backend16", graph_runner=SimpleNamespace(capture_bs=[1, 2]))
    w._build_tier = lambda n: (f"backend{n}", f"graphs{n}", f"ws{n}")
    monkeypatch.setattr(worker_common, "StepWidth", lambda *a, **k: "controller")
    with caplog.at_level(logging.INFO):
        w._init_width_control()
    assert "took 2.00 GiB" in caplog.text
    assert ("lower --mem-fraction-static by about 0.03" in caplog.text) == warned, caplog.text
