"""The spec-v2 worker's decode step (`DDTreeWorkerV2._forward_decode`) on CPU, with the target's verify forward and
the drafter pass stood in for: a hand-worked step of two requests (tokens, lengths, KV window, GDN commit, extra_buffer
tracking, drafter context, when the new lengths are published), and the same step on the `meta` device, where any
read of a device tensor's values (`.tolist()`, `.item()`, `bool()`, masked indexing) raises: under SGLang's overlap
scheduler the host prepares the next batch while the step runs, so the step must read nothing back. On 0.5.23's
schema, and on 0.5.11's (its batch a ModelWorkerBatch, EAGLE's draft input and verify preparation, the lengths
published by recording the draft input's verify_done event).

SGLang's runtime modules import `sgl_kernel`; the import-only stand-in goes first on sys.path where the real one is
missing. Nothing here calls into it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from paths import use_sgl_kernel_stand_in

from sglang_dflash.sglang.plugin.activate import installed_version
from sglang_dflash.sglang.plugin.versions import release

pytestmark = pytest.mark.sglang  # also run against the other supported SGLang releases (.ci/run)

pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")
RELEASE = release(installed_version() or "")
if RELEASE is None or not (RELEASE.registry or RELEASE.overlap_spec_v2):
    pytest.skip(f"no spec-v2 worker on SGLang {installed_version()}", allow_module_level=True)
OLD_SCHEMA = not RELEASE.registry  # 0.5.11's spec-v2 schema

# One tree for both requests: node 1 (token 11) and node 2 (token 12) under the root, node 3 (token 13) under node 1.
PARENTS = [-1, 0, 0, 1]
N, VOCAB, INTERVAL = 4, 64, 8
SLOTS, SEQ_LENS = [3, 1], [6, 9]  # request slots; committed lengths before the step
# the target's argmax at each node: request 0 takes node 2 (12), then its bonus is 50; request 1 takes node 1 (11),
# node 3 (13), then its bonus is 60
ARGMAX = [[12, 0, 50, 0], [11, 13, 0, 60]]


class Recorder:
    """The tree-verify workspace, the drafter's context append and `on_publish`, each call recorded in order."""

    def __init__(self):
        self.calls = []

    def set_parents(self, parents, graph_bs):
        self.calls.append(("set_parents", graph_bs))

    def track(self, pool, slots, track_slots, accepted_nodes, cut, graph_bs, rows):
        self.track_slots = track_slots
        self.calls.append(("track", cut, rows))

    def commit(self, pool, slots, accepted_nodes, graph_bs):
        self.calls.append(("commit", slots, accepted_nodes, graph_bs))

    def append(self, R, slots, start, nodes, N):
        self.calls.append(("context", slots, start, nodes))

    def publish(self, new_seq_lens):
        self.calls.append(("publish", new_seq_lens))


class Event:
    """0.5.11's verify_done: recording it is the publish (the lengths ride in the draft input)."""

    def __init__(self, rec: Recorder):
        self.rec = rec

    def record(self):
        self.rec.calls.append(("publish", self))


def worker_class():
    if OLD_SCHEMA:
        from sglang_dflash.sglang.ddtree_worker_v2_0511 import DDTreeWorkerV2For0511

        return DDTreeWorkerV2For0511
    from sglang_dflash.sglang.ddtree_worker_v2 import DDTreeWorkerV2

    return DDTreeWorkerV2


def new_lengths(result):
    """The step's new lengths and bonus tokens [bs], as the scheduler reads them."""
    draft = result.next_draft_input
    if OLD_SCHEMA:
        return draft.new_seq_lens, draft.verified_id
    return result.new_seq_lens, draft.bonus_tokens


def published(rec: Recorder, result):
    """The lengths the publish gave the scheduler: 0.5.23's on_publish argument; on 0.5.11 the draft input's, whose
    verify_done event the publish recorded."""
    call = next(c for c in rec.calls if c[0] == "publish")
    if OLD_SCHEMA:
        assert call[1] is result.next_draft_input.verify_done  # the event this step recorded
        return result.next_draft_input.new_seq_lens
    return call[1]


def decode_step(monkeypatch, device: str, extra_buffer: bool, drafter_lengths=SEQ_LENS, fail: str | None = None, tp_size=1,
                width: int | None = None, profile=None):  # fmt: skip
    """A DDTreeWorkerV2 step over the two requests on `device`, the drafter's context lengths per request as given;
    fail "verify" / "context": the target's verify forward / the drafter's context append raises RuntimeError; width:
    the width controller (stood in for) has the step verify the tree's first `width` nodes; profile: the step profile
    (default: one that is off).
    Returns (result, recorder, worker, req_to_token); the recorder holds the batch and the drafter pass's rows."""
    use_sgl_kernel_stand_in()
    from sglang_dflash.ddtree import tree_from_parents
    from sglang_dflash.sglang import worker_common
    from sglang_dflash.sglang.step_profile import StepProfile
    from sglang_dflash.sglang.worker_common import ContextLengths

    dev = torch.device(device)
    rec = Recorder()
    tokens = torch.tensor([[7, 11, 12, 13], [8, 11, 12, 13]])
    tree = tree_from_parents(tokens, torch.tensor([PARENTS, PARENTS]), max_depth=2)
    tree = type(tree)(**{k: v.to(dev) if torch.is_tensor(v) else v for k, v in vars(tree).items()})
    logits = torch.full((2, N, VOCAB), -1.0)
    for r, row in enumerate(ARGMAX):
        for i, t in enumerate(row):
            logits[r, i, t] = 1.0
    req_to_token = torch.arange(4 * 32).view(4, 32) + 1000  # KV slot of (request slot, position)

    def verify(batch, forward_batch, is_verify, **planned):
        assert planned == ({"skip_attn_backend_init": True} if OLD_SCHEMA else {})
        if fail == "verify":
            raise RuntimeError("verify broke")
        n = width or N
        return SimpleNamespace(
            logits_output=SimpleNamespace(next_token_logits=logits[:, :n].reshape(2 * n, VOCAB).to(dev), hidden_states="taps"),
            can_run_cuda_graph=False,
        )

    def context(*args):
        if fail == "context":
            raise RuntimeError("context broke")
        rec.append(*args)

    target = SimpleNamespace(forward_batch_generation=verify)
    mamba = torch.tensor([5, 2], device=dev)
    runner = SimpleNamespace(
        model_config=SimpleNamespace(dtype=torch.bfloat16),
        req_to_token_pool=SimpleNamespace(req_to_token=req_to_token.to(dev)),
        attn_backend=SimpleNamespace(linear_attn_backend=SimpleNamespace(forward_metadata=SimpleNamespace(mamba_cache_indices=mamba))),
    )  # fmt: skip

    w = object.__new__(worker_class())
    w.name, w.num_nodes, w.tp_size, w.max_len, w.device = "DDTREE", N, tp_size, 1000, dev
    w.width = None  # every step verifies N nodes
    if width is not None:
        probs = torch.rand(2, N - 1, device=dev)
        w.width = SimpleNamespace(nodes=lambda keys, bs: rec.calls.append(("width", keys, bs)) or width, start=lambda: None,
                                  record=lambda *a: rec.calls.append(("record", *a)))  # fmt: skip
        w._marginal_tree = lambda roots, local: (tree, probs)
        w._activate_tier = lambda n: rec.calls.append(("activate", n))
        w._graph_batch_size = lambda bs: 2
    w.nan_detection = False  # 0.5.23 has no --enable-nan-detection
    w.server_args = SimpleNamespace(speculative_num_steps=2, speculative_eagle_topk=2)
    w.model_runner, w._target_worker = runner, target
    w.profile = profile or StepProfile(None, torch.device("cpu"))
    w.ctx_lens = ContextLengths(4)
    for slot, s in zip(SLOTS, drafter_lengths):
        w.ctx_lens.set(slot, s)

    def drafter(roots, slots, seq_lens):
        rec.drafter_rows = (slots, seq_lens)
        return None, torch.zeros(2, 2, VOCAB, device=dev)

    w._run_drafter = drafter
    w._build_tree = lambda roots, hidden, local: tree
    w._append_verified = context
    monkeypatch.setattr(worker_common, "tree_gdn_workspace", lambda: rec)
    monkeypatch.setattr(worker_class(), "_track_interval", lambda self, batch: INTERVAL)
    if OLD_SCHEMA:
        from sglang.srt.speculative.eagle_info import EagleVerifyInput

        def prepare(self, pool, batch, worker):  # 0.5.11's sets the tracking slots under extra_buffer
            batch.mamba_track_indices = torch.tensor([6, 7], device=dev) if extra_buffer else None
            return "fb", False

        monkeypatch.setattr(EagleVerifyInput, "prepare_for_v2_verify", prepare)
        monkeypatch.setattr(torch, "get_device_module", lambda device: SimpleNamespace(Event=lambda: Event(rec)))
    else:
        from sglang.srt.speculative import eagle_utils

        monkeypatch.setattr(eagle_utils, "eagle_prepare_for_verify", lambda spec_info, pool, batch, worker: ("fb", False))

    batch = SimpleNamespace(
        forward_mode=SimpleNamespace(is_idle=lambda: False, is_extend=lambda: False),
        is_extend_in_batch=False,
        reqs=[SimpleNamespace(req_pool_idx=s, sampling_params=SimpleNamespace(), rid=str(s)) for s in SLOTS],
        req_pool_indices=torch.tensor(SLOTS, device=dev),
        seq_lens=torch.tensor(SEQ_LENS, device=dev),
        seq_lens_cpu=torch.tensor(SEQ_LENS),
        spec_info=SimpleNamespace(**{"verified_id" if OLD_SCHEMA else "bonus_tokens": tokens[:, 0].to(dev)}),
        sampling_info=SimpleNamespace(is_all_greedy=True),
        mamba_track_indices=torch.tensor([6, 7], device=dev) if extra_buffer and not OLD_SCHEMA else None,
    )  # (no batch_size(): 0.5.11's ModelWorkerBatch has none)
    rec.batch = batch
    result = w.forward_batch_generation(batch, **({} if OLD_SCHEMA else dict(on_publish=rec.publish)))
    return result, rec, w, runner.req_to_token_pool.req_to_token


@pytest.mark.parametrize("extra_buffer", [False, True])
def test_decode_step_hand_worked(monkeypatch, extra_buffer):
    result, rec, w, req_to_token = decode_step(monkeypatch, "cpu", extra_buffer)
    # request 0: root -> node 2 (12), bonus 50; request 1: root -> node 1 (11) -> node 3 (13), bonus 60
    assert result.accept_lens.tolist() == [2, 3]
    assert result.next_token_ids.view(2, N)[0, :2].tolist() == [12, 50]
    assert result.next_token_ids.view(2, N)[1, :3].tolist() == [11, 13, 60]
    lengths, bonus = new_lengths(result)
    assert lengths.tolist() == [8, 12] and bonus.tolist() == [50, 60]
    # each window's accepted nodes' KV slots first, in path order; the window keeps its own slots
    for slot, s, path in ((3, 6, [0, 2]), (1, 9, [0, 1, 3])):
        window = (1000 + slot * 32 + s + torch.arange(N)).tolist()
        row = req_to_token[slot, s : s + N].tolist()
        assert row[: len(path)] == [window[i] for i in path] and sorted(row) == window
    assert req_to_token[0].tolist() == (1000 + torch.arange(32)).tolist()  # untouched

    names = [c[0] for c in rec.calls]
    expected = ["set_parents"] + (["track"] if extra_buffer else []) + ["commit", "publish", "context"]
    assert names == expected, names  # published after the target's commits, before the drafter's context
    commit = rec.calls[names.index("commit")]
    assert commit[1].tolist() == [5, 2] and commit[2].tolist() == [[0, 2, -1], [0, 1, 3]] and commit[3] is None
    assert published(rec, result).tolist() == [8, 12]
    context = rec.calls[names.index("context")]
    assert context[1].tolist() == SLOTS and context[2].tolist() == SEQ_LENS
    assert context[3].tolist() == [[0, 2, -1], [0, 1, 3]]
    if extra_buffer:
        # tracking point 8: request 0 (6 -> 8) ends on it after its second accepted node (cut 1); request 1 (9 -> 12)
        # cannot reach 16 with at most 3 nodes, so only request 0 is a candidate
        _, cut, rows = rec.calls[names.index("track")]
        assert cut.tolist() == [1, -1] and rows == [0] and rec.track_slots.tolist() == [6, 7]

    # the host knows each context length as a range until the scheduler's next lengths pin it
    assert (w.ctx_lens.low[3], w.ctx_lens.high[3], w.ctx_lens.low[1], w.ctx_lens.high[1]) == (7, 9, 10, 12)
    assert w.ctx_lens.check(3, 8) is None and (w.ctx_lens.low[3], w.ctx_lens.high[3]) == (8, 8)
    assert w.ctx_lens.check(1, 13) == "slot 1 has 13 tokens in the KV cache, the drafter 10..12"


@pytest.mark.parametrize("extra_buffer", [False, True])
def test_decode_step_reads_nothing_back_from_the_device(monkeypatch, extra_buffer):
    """On `meta` tensors every value read raises; the step runs through and publishes lengths still on the device."""
    with pytest.raises(Exception):  # the detector itself: a meta tensor's values cannot be read
        torch.zeros(2, device="meta").tolist()
    result, rec, _, _ = decode_step(monkeypatch, "meta", extra_buffer)
    assert result.accept_lens.is_meta and new_lengths(result)[0].is_meta
    assert [c[0] for c in rec.calls][-2:] == ["publish", "context"]


def test_a_request_with_a_fault_is_aborted_and_the_batch_goes_on(monkeypatch):
    """Request 1's drafter context is 2 tokens short of its KV cache (a bug): it rides the step on the scratch slot
    (-1, length 0) for the drafter and its context append, ends aborted with the fault as its message, and its context
    length stays unknown; request 0's step is the hand-worked one."""
    from sglang.srt.managers.schedule_batch import FINISH_ABORT

    result, rec, w, _ = decode_step(monkeypatch, "cpu", False, drafter_lengths=[SEQ_LENS[0], SEQ_LENS[1] - 2])
    slots, lens = rec.drafter_rows
    assert slots.tolist() == [SLOTS[0], -1] and lens.tolist() == [SEQ_LENS[0], 0]
    context = [c for c in rec.calls if c[0] == "context"][0]
    assert context[1].tolist() == [SLOTS[0], -1] and context[2].tolist() == [SEQ_LENS[0], 0]
    req0, req1 = rec.batch.reqs
    assert getattr(req0, "to_finish", None) is None
    assert (
        isinstance(req1.to_finish, FINISH_ABORT)
        and "slot 1 has 9 tokens in the KV cache, the drafter 7" in req1.to_finish.message
    )
    assert result.accept_lens.tolist() == [2, 3] and result.next_token_ids.view(2, N)[0, :2].tolist() == [12, 50]
    assert (w.ctx_lens.low[3], w.ctx_lens.high[3]) == (7, 9) and (w.ctx_lens.low[1], w.ctx_lens.high[1]) == (7, 7)


def test_a_step_that_raises_before_the_publish_ends_its_batch_not_the_server(monkeypatch):
    """The target's verify forward raises: every request ends aborted with the error, emits nothing (accept length
    0, no bonus counted), stays out of the radix cache, and the unchanged lengths are published for the scheduler."""
    from sglang.srt.managers.schedule_batch import FINISH_ABORT

    result, rec, w, _ = decode_step(monkeypatch, "cpu", False, fail="verify")
    assert result.accept_lens.tolist() == [0, 0] and result.next_token_ids.shape == (2 * N,)
    assert OLD_SCHEMA or result.num_non_draft_tokens_per_req == 0  # 0.5.11: length - 1 (the histogram patch)
    assert new_lengths(result)[0].tolist() == SEQ_LENS
    assert [c[0] for c in rec.calls] == ["set_parents", "publish"] and published(rec, result).tolist() == SEQ_LENS
    for req in rec.batch.reqs:
        assert isinstance(req.to_finish, FINISH_ABORT) and "RuntimeError: verify broke" in req.to_finish.message
        assert req.skip_radix_cache_insert is True
    # under the overlap scheduler they may ride one more step before SGLang finishes them: there they are faults
    # (the drafter's scratch slot), and their first message stays
    _, _, faults = w._check_step(rec.batch)
    assert sorted(faults) == [0, 1] and all("dropped with a failed step" in m for m in faults.values())
    w._drafter_rows(rec.batch, faults)
    assert all("RuntimeError: verify broke" in req.to_finish.message for req in rec.batch.reqs)


def test_a_step_that_raises_after_the_publish_keeps_its_tokens(monkeypatch):
    """The drafter's context append raises after the target's commits were published: the step's tokens are the
    hand-worked ones, the requests end aborted and stay out of the radix cache (their drafter context is not whole)."""
    result, rec, _, _ = decode_step(monkeypatch, "cpu", False, fail="context")
    assert result.accept_lens.tolist() == [2, 3] and new_lengths(result)[0].tolist() == [8, 12]
    assert [c[0] for c in rec.calls][-1] == "publish"
    for req in rec.batch.reqs:
        assert "RuntimeError: context broke" in req.to_finish.message and req.skip_radix_cache_insert is True


@pytest.mark.parametrize("why", ["device", "tp-alone", "tp-no-agreement"])
def test_a_step_that_breaks_the_device_or_fails_one_tp_rank_still_ends_the_server(monkeypatch, why):
    """Where the device is unusable after the exception (a sticky CUDA error), or at TP > 1 where not every rank
    failed the step (a rank that failed alone leaves the others in a collective) or the ranks have no way to agree,
    the exception goes on to the scheduler."""
    from types import SimpleNamespace

    from sglang_dflash.sglang import worker_common

    if why == "device":
        monkeypatch.setattr(worker_common, "device_usable", lambda device: False)
    if why == "tp-alone":
        agreement = SimpleNamespace(all_failed=lambda: False)
        monkeypatch.setattr(worker_common.DDTreeWorkerBase, "failure_agreement", agreement)
    with pytest.raises(RuntimeError, match="verify broke"):
        decode_step(monkeypatch, "cpu", False, fail="verify", tp_size=1 if why == "device" else 2)


def test_a_step_that_fails_on_every_tp_rank_ends_its_batch_not_the_server(monkeypatch):
    """At TP > 1, where every rank failed the same step (`FailureAgreement.all_failed`), each aborts the batch as at
    TP = 1 and the server goes on."""
    from types import SimpleNamespace

    from sglang_dflash.sglang import worker_common

    asked = []
    agreement = SimpleNamespace(all_failed=lambda: asked.append(1) or True)
    monkeypatch.setattr(worker_common.DDTreeWorkerBase, "failure_agreement", agreement)
    result, rec, _, _ = decode_step(monkeypatch, "cpu", False, fail="verify", tp_size=2)
    assert asked == [1] and result.accept_lens.tolist() == [0, 0]
    for req in rec.batch.reqs:
        assert "RuntimeError: verify broke" in req.to_finish.message and req.skip_radix_cache_insert is True


@pytest.mark.skipif(not OLD_SCHEMA, reason="0.5.11's spec-v2 schema")
def test_draft_input_rides_0_5_11s_future_map(monkeypatch):
    """0.5.11's overlap scheduler stores each step's draft input in its FutureMap and resolves it into the next batch
    (EAGLE's fields: top-k, hidden rows, verified_id, new lengths): ours goes through SGLang's own map, prefill's
    (int64 tokens) first and a decode step's after, and comes back as the roots and lengths it went in as."""
    use_sgl_kernel_stand_in()
    from sglang.srt.managers import overlap_utils
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    monkeypatch.setattr(overlap_utils, "spec_need_hidden_states", lambda: True)  # EAGLE's default: hidden rows relayed
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda self, stream: None)  # a CUDA stream's; CPU tensors here
    w = object.__new__(worker_class())
    w.model_runner, w._verify_done = SimpleNamespace(model_config=SimpleNamespace(dtype=torch.bfloat16)), None
    fmap = overlap_utils.FutureMap(8, 128, 512, torch.device("cpu"), SpeculativeAlgorithm.EAGLE)
    steps = [(torch.tensor([5, 6]), torch.tensor([3, 4])), (torch.tensor([50, 60], dtype=torch.int32), torch.tensor([8, 12]))]
    for tokens, lengths in steps:
        indices = fmap.alloc_future_indices(2)
        fmap.store_to_map(indices, SimpleNamespace(next_draft_input=w._draft_input(tokens, lengths)))
        nxt = w._draft_input(torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long))
        nxt.future_indices = indices
        fmap.resolve_future(SimpleNamespace(spec_info=nxt))
        assert w._roots(nxt).tolist() == tokens.tolist() and nxt.new_seq_lens.tolist() == lengths.tolist()


@pytest.mark.skipif(not OLD_SCHEMA, reason="0.5.11's spec-v2 schema")
def test_an_aborted_step_is_not_an_acceptance_histogram_entry():
    """0.5.11 counts a spec-v2 step's accepted drafts as accept length - 1: our aborted step's -1 is left out (the
    plugin's hook on Req.update_spec_acceptance_histogram), others counted as SGLang counts them."""
    from sglang.srt.managers.schedule_batch import Req

    from sglang_dflash.sglang.plugin import patches

    req = SimpleNamespace(spec_acceptance_histogram=[])
    for n in (2, -1, 0, 2):
        patches.acceptance_histogram(Req.update_spec_acceptance_histogram, req, n)
    assert req.spec_acceptance_histogram == [1, 0, 2]


def test_decode_step_at_a_width_the_controller_chose(monkeypatch):
    """The width controller (stood in for) picks 2 of the 4 nodes: that tier is made the target's before the drafter
    runs, the verify takes the tree's first 2 nodes (the root and node 1, token 11), the rows handed to the scheduler
    stay 4 wide, the context append gets width 2, and the step's observation (request ids, width, the widest tree's
    depths, accept lengths, graph batch size) goes to the controller. By hand: request 0's root predicts 12, not 11:
    nothing accepted, bonus 12; request 1 accepts node 1 (11), bonus 13 (node 3 is not verified)."""
    result, rec, w, _ = decode_step(monkeypatch, "cpu", False, width=2)
    names = [c[0] for c in rec.calls]
    assert names[:2] == ["width", "activate"] and rec.calls[0][1:] == (["3", "1"], 2) and rec.calls[1][1] == 2
    assert result.accept_lens.tolist() == [1, 2] and result.next_token_ids.numel() == 2 * N
    rows = result.next_token_ids.view(2, N)
    assert rows[0, :1].tolist() == [12] and rows[1, :2].tolist() == [11, 13]
    assert new_lengths(result)[0].tolist() == [7, 11]
    record = rec.calls[names.index("record")]
    keys, nodes, probs, depths, accept_len, graph_bs, start = record[1:]
    assert keys == ["3", "1"] and nodes == 2 and depths.tolist() == [[1, 1, 2]] * 2 and accept_len.tolist() == [0, 1]
    assert graph_bs is None and start is None  # no captured graph ran (the stand-in verify says so)
    assert names.index("record") < names.index("publish") < names.index("context")


def test_a_width_tier_is_built_with_the_releases_speculative_fields_set_to_it(monkeypatch):
    """`_build_tier(8)` of a worker serving 32 nodes: the attention backend and the TARGET_VERIFY graph runner are made
    while the release's speculative fields say 8 nodes (0.5.23: its resolved fields, overridden; 0.5.11: its server
    arguments), the runner gets that backend and width, the tree-verify workspace is installed for 8 nodes, and
    afterwards the fields and the model runner's init_new_workspace are as before."""
    use_sgl_kernel_stand_in()
    from sglang_dflash.sglang import tree_gdn_backend

    seen = {}
    if OLD_SCHEMA:
        from sglang.srt.model_executor import cuda_graph_runner as graphs_module

        fields = SimpleNamespace(speculative_num_steps=16, speculative_num_draft_tokens=32)
        graph_class, graph_attr = "CudaGraphRunner", "graph_runner"
    else:
        import sglang.srt.runtime_context as runtime_context
        from sglang.srt.model_executor.runner import decode_cuda_graph_runner as graphs_module

        fields = SimpleNamespace(speculative_num_steps=16, speculative_num_draft_tokens=32)
        context = SimpleNamespace(override=lambda source, **kw: vars(fields).update(kw))
        monkeypatch.setattr(runtime_context, "get_spec", lambda: fields)
        monkeypatch.setattr(runtime_context, "get_context", lambda: context)
        graph_class, graph_attr = "DecodeCudaGraphRunner", "decode_cuda_graph_runner"

    def graphs(runner, attn_backend=None, **kw):
        seen["graphs"] = (attn_backend, kw, fields.speculative_num_draft_tokens)
        return "graphs"

    def backend(init_new_workspace=False):
        runner.init_new_workspace = True  # as SGLang's factory leaves it
        return ("backend", fields.speculative_num_draft_tokens, init_new_workspace)

    monkeypatch.setattr(graphs_module, graph_class, graphs)
    monkeypatch.setattr(tree_gdn_backend, "install", lambda runner, depth, num_nodes=None: ("workspace", num_nodes))
    runner = SimpleNamespace(init_new_workspace=False, _get_attention_backend=backend, **{graph_attr: "sglang's"})
    if OLD_SCHEMA:
        runner.server_args = fields
    w = object.__new__(worker_class())
    w.name, w.model_runner, w.draft_config = "DDTREE", runner, SimpleNamespace(num_depths=15)
    built = w._build_tier(8)
    assert built == (("backend", 8, True), "graphs", ("workspace", 8))
    assert seen["graphs"] == (("backend", 8, True), dict(speculative_num_steps=4, speculative_num_draft_tokens=8), 8)
    assert (fields.speculative_num_steps, fields.speculative_num_draft_tokens) == (16, 32) and not runner.init_new_workspace


def test_a_step_marks_every_phase_of_the_step_cost_table_in_order(monkeypatch):
    """The profile's marks are the phases that benchmarks/gpu/sglang_step_costs.py tabulates (its overhead is read
    only where the drafter pass has its own mark), in the order the step runs them."""
    import importlib.util

    from paths import ROOT

    spec = importlib.util.spec_from_file_location("step_costs_phases", ROOT / "benchmarks" / "gpu" / "sglang_step_costs.py")
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "gpu"))
    costs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(costs)
    marks = []
    profile = SimpleNamespace(start=lambda: marks.clear(), mark=marks.append,
                              end=lambda bs, width: marks.append(("end", bs, width)))  # fmt: skip
    decode_step(monkeypatch, "cpu", extra_buffer=False, profile=profile)
    assert marks == [*costs.PHASES, ("end", 2, None)]  # no width controller: no width


@pytest.mark.skipif(not OLD_SCHEMA, reason="0.5.11's schema: 0.5.23's cache-location kernel is not built per size")
def test_0511_warm_up_builds_the_cache_location_kernel_at_each_power_of_two(monkeypatch):
    """0.5.11's `prepare_for_v2_verify` builds its cache-location kernel per next power of two of the batch size: the
    warm-up calls it at 1, 2, 4, 8, 16 for --max-running-requests 13, reading row 0 of req_to_token."""
    use_sgl_kernel_stand_in()
    from sglang.srt.speculative import eagle_info_v2

    from sglang_dflash.sglang import worker_common
    from sglang_dflash.sglang.ddtree_worker_v2_0511 import DDTreeWorkerV2For0511

    calls = []
    monkeypatch.setattr(eagle_info_v2, "assign_extend_cache_locs_func", lambda *a: calls.append(a))
    monkeypatch.setattr(worker_common.DDTreeWorkerBase, "_warm_up", lambda self, sizes: None)
    w = DDTreeWorkerV2For0511.__new__(DDTreeWorkerV2For0511)
    w.server_args, w.num_nodes, w.device = SimpleNamespace(max_running_requests=13), 5, torch.device("cpu")
    table = torch.zeros(4, 64, dtype=torch.int32)
    w.model_runner = SimpleNamespace(req_to_token_pool=SimpleNamespace(req_to_token=table))
    w._warm_up([1, 2])
    assert [c[4] for c in calls] == [1, 2, 4, 8, 16]
    for indices, req_to_token, start, end, bs, n, _ in calls:
        assert req_to_token is table and n == 5 and indices.tolist() == start.tolist() == [0] * bs and end.tolist() == [5] * bs


@pytest.mark.skipif(OLD_SCHEMA, reason="0.5.23's lifecycle: 0.5.11 cuts its graph sizes at resolution")
def test_init_attention_backends_cuts_the_decode_graph_sizes_first(monkeypatch):
    """0.5.23's lifecycle: before the hidden capture and the tree-verify workspace go on the target (and before its
    graphs are captured), the decode graph sizes in SGLang's runtime config are cut to fit (`fit_decode_graphs`, here
    stood in for by a recorder: what it is given), as SGLang's own capture then reads them."""
    import sglang.srt.runtime_context as runtime_context

    from sglang_dflash.sglang import ddtree_worker_v2, hidden_capture, server_args, tree_gdn_backend

    decode, order = SimpleNamespace(bs=[1, 2, 4], max_bs=4), []
    monkeypatch.setattr(runtime_context, "get_exec", lambda: SimpleNamespace(graph=SimpleNamespace(
        cuda_graph_config=SimpleNamespace(decode=decode))))  # fmt: skip
    monkeypatch.setattr(server_args, "fit_decode_graphs", lambda *a: order.append(("fit", *a)))
    monkeypatch.setattr(hidden_capture, "install_before_graphs", lambda runner: order.append("capture"))
    monkeypatch.setattr(tree_gdn_backend, "install", lambda runner, depths: order.append("workspace"))
    w = ddtree_worker_v2.DDTreeWorkerV2.__new__(ddtree_worker_v2.DDTreeWorkerV2)
    w.name, w.model_runner, w.draft_config = "DDTREE", "runner", SimpleNamespace(num_depths=15)
    w.server_args = SimpleNamespace(_cuda_graph_config_locked={("decode", "max_bs")})
    w._install_capture = lambda: order.append("taps")
    w.init_attention_backends()
    assert order[0] == ("fit", w.server_args, decode, "DDTREE")
    assert order[1:] == ["capture", "workspace", "taps"]
