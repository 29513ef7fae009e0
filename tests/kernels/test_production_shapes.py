"""Every Triton kernel of the package against its reference beside it in `sglang_dflash/kernels/` (float64
recurrences and attention, torch's sorts and argmax; outputs poisoned first) at Qwen3.6-27B's shapes per GPU at TP=2,
as test_sm86_compile.py has them: GDN with 8 QK / 24 V heads of 128 and its conv over 5,120 channels (48 layers
committed in one launch), attention with 12 / 2 heads of 256 over 4,096 cached tokens and the drafter's block of 16, a
vocabulary of 248,320; DFLASH's 16-node chain and DDTree budgets 16, 31 and 64 over 15 draft depths, for 1 and 8
requests; the tree GDN verify and attention also as planned for the production GPU, an A6000. GPU only (far too slow
under Triton's interpreter; the tests beside this one run the same kernels small on CPU); at most about 4.5 GiB of GPU
memory (estimated: the GDN commit at R = 8 x 65). On the device: `python3 -m pytest -q tests/kernels/test_production_shapes.py`.
"""

import zlib

import pytest
import torch
from tree_helpers import DEVICE, accepted_paths, poisoned_outputs, root_path

from sglang_dflash.ddtree import tree_from_parents
from sglang_dflash.dflash import chain_tree
from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.accept_commit import commit_accepted_kernel, commit_accepted_ref
from sglang_dflash.kernels.layer_table import LayerTable
from sglang_dflash.kernels.tree_attention import (
    ancestor_bits,
    sglang_custom_mask_kernel,
    sglang_custom_mask_ref,
    tree_attention,
    tree_attention_ref,
)
from sglang_dflash.kernels.tree_build import (
    conditional_tree_build,
    select_conditional_prefixes_ref,
    select_prefixes_ref,
    tree_build,
)
from sglang_dflash.kernels.tree_conv import tree_causal_conv1d_ref, tree_conv_commit_ref
from sglang_dflash.kernels.tree_conv.tree_conv import conv_windows, tree_causal_conv1d_triton, tree_conv_commit_triton
from sglang_dflash.kernels.tree_gdn import solve_step_nodes, tree_gdn_commit_ref, tree_gdn_verify_ref
from sglang_dflash.kernels.tree_gdn.naive import ancestor_table_ref
from sglang_dflash.kernels.tree_gdn.tree_gdn import (
    aligned_ancestor_mask,
    context_tables,
    tree_gdn_commit_triton,
    tree_gdn_verify_triton,
)
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather
from sglang_dflash.kernels.tree_walk import greedy_walk, tree_walk, walk_tree_ref
from sglang_dflash.kernels.vocab import argmax, argmax_ref, draft_log_probs, draft_log_probs_ref

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="production shapes: GPU only (too slow interpreted)")

# Qwen3.6-27B per GPU at TP=2, as tests/kernels/test_sm86_compile.py (and its config: 24 / 4 attention heads of
# 256, 16 / 48 GDN heads of 128, conv width 4, vocabulary 248,320, 64 layers = 16 x [3 GDN + 1 attention])
VOCAB, DEPTHS = 248320, 15
HV, H, K = 24, 8, 128  # GDN: V heads, QK heads, head dim (= V head dim)
HQ, HKV, DH, PREFIX = 12, 2, 256, 4096  # full attention: query heads, KV heads, head dim, cached tokens
CONV_D, CONV_W = 10240 // 2, 4  # the conv's channels: q, k and v of the mixed projection (2 H K + HV K)
DRAFT_HQ, DRAFT_HKV, DRAFT_DH, DRAFT_WINDOW = 16, 4, 128, 2048  # Qwen3.6-27B-DFlash per GPU at TP=2, block 16
GDN_LAYERS = 48
SM86_SHARED_BYTES, SM86_SMS = 101376, 84  # RTX A6000: opt-in shared memory a block, SMs

BATCHES, BUDGETS = (1, 8), (15, 16, 31, 64)  # DDTree budgets: 15 is the A6000 preset's (launch.py), 16 verify tokens


def shape_id(R, N):
    return f"R{R}-chain{N}" if N == DEPTHS + 1 else f"R{R}-N{N}"


SHAPES = [pytest.param(R, N, id=shape_id(R, N)) for R in BATCHES for N in sorted({DEPTHS + 1, *(b + 1 for b in BUDGETS)})]
BUILDS = [pytest.param(R, B, id=f"R{R}-B{B}") for R in BATCHES for B in BUDGETS]
GDN_VERIFY = [
    pytest.param(kernel, *p.values, id=f"{kernel}-{p.id}") for kernel in ("blocked", "blocked-a6000", "gather") for p in SHAPES
] + [pytest.param("gather", R, N, id=f"gather-{shape_id(R, N)}") for R, N in ((8, 129), (1, 257))]  # where it is chosen
DRAFT_BLOCKS = [pytest.param(R, 16, id=f"R{R}-block16") for R in BATCHES]  # the drafter's block of 16 tokens
ATTENTION = [
    pytest.param(model, plan, *p.values, id=f"{model}-{plan}-{p.id}")
    for model, shapes in (("target", SHAPES), ("drafter-window", DRAFT_BLOCKS), ("drafter-full", DRAFT_BLOCKS))
    for plan in ("device", "a6000")
    for p in shapes
]


def generators(*key):
    """(CPU, DEVICE) generators seeded by a test's parameters."""
    seed = zlib.crc32(repr(key).encode())
    return torch.Generator().manual_seed(seed), torch.Generator(DEVICE).manual_seed(seed)


def randn(gen, *shape, scale=1.0, dtype=torch.bfloat16):
    return (torch.randn(*shape, generator=gen, device=DEVICE) * scale).to(dtype)


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def as_on_a6000(monkeypatch):
    """The wrappers plan their launches as on the production GPU (SM86's shared memory, 84 SMs): tree GDN in 16-node
    blocks, tree attention in 32 x 32 tiles without pipelining."""
    monkeypatch.setattr(gpu, "shared_memory_per_block", lambda device: SM86_SHARED_BYTES)
    monkeypatch.setattr(gpu, "multiprocessor_count", lambda device: SM86_SMS)


def draft_logits(R, gen):
    """The drafter's logits float32 [R, L, VOCAB]; even requests' have one token per depth far ahead (their DDTree
    trees hold a path L deep)."""
    logits = randn(gen, R, DEPTHS, VOCAB, scale=3.0, dtype=torch.float32)
    boost = torch.full((R, DEPTHS, 1), 20.0, device=DEVICE) * (torch.arange(R, device=DEVICE) % 2 == 0)[:, None, None]
    return logits.scatter_add_(2, torch.randint(VOCAB, (R, DEPTHS, 1), generator=gen, device=DEVICE), boost)


def draft_trees(R, N, gen):
    """R trees of N nodes on DEVICE, made by the references: DFLASH's chain (N = L + 1), else DDTree's best N - 1
    prefixes of `draft_logits`."""
    roots = torch.randint(VOCAB, (R,), generator=gen, device=DEVICE)
    if N == DEPTHS + 1:
        return chain_tree(torch.randint(VOCAB, (R, DEPTHS), generator=gen, device=DEVICE), roots)
    logp, ids = draft_log_probs_ref(draft_logits(R, gen), N - 1)
    return tree_from_parents(*select_prefixes_ref(logp, ids, roots, N - 1), max_depth=DEPTHS)


def padded_slots(R, cpu, pool_size):
    """Long [R] on DEVICE: distinct pool slots, the last of R > 1 a CUDA graph's padding request (-1)."""
    slots = torch.randperm(pool_size, generator=cpu)[:R]
    if R > 1:
        slots[-1] = -1
    return slots.to(DEVICE)


def gdn_layer(R, N, gen):
    """One GDN layer's verify inputs: q, k, v bf16 views into the conv's output [R, N, CONV_D] (read in place, as the
    server passes them), the gates' a, b bf16, A_log and dt_bias fp32."""
    q, k, v = randn(gen, R, N, CONV_D).split([H * K, H * K, HV * K], dim=-1)
    return dict(q=q.unflatten(-1, (H, K)), k=k.unflatten(-1, (H, K)), v=v.unflatten(-1, (HV, K)), a=randn(gen, R, N, HV),
                b=randn(gen, R, N, HV), A_log=randn(gen, HV, scale=0.5, dtype=torch.float32),
                dt_bias=randn(gen, HV, scale=0.5, dtype=torch.float32))  # fmt: skip


def gdn_step_inputs(kernel, tree):
    """A step's verify arguments, made once for every layer (as `verify_step_inputs`, for the kernel named)."""
    R, N = tree.parents.shape
    if kernel == "gather":
        return {"tables": ancestor_table(tree.ancestor_mask, DEPTHS, solve_step_nodes(R, N))}
    return {"parents": tree.parents, "ancestor_mask": aligned_ancestor_mask(tree.ancestor_mask), "max_depth": DEPTHS}


def gdn_verify(x, pool, slots, step):
    verify = tree_gdn_verify_gather if "tables" in step else tree_gdn_verify_triton
    return verify(**x, state_pool=pool, slots=slots, **step)


@pytest.mark.parametrize("kernel,R,N", GDN_VERIFY)
def test_tree_gdn_verify(kernel, R, N, monkeypatch):
    """One GDN layer's verify (the blocked kernel as planned on this GPU and on an A6000, the ancestor-gather kernel
    with its tables, which the server picks from 66 nodes) against the float64 recurrence along each node's root path;
    the fp32 state pool untouched."""
    cpu, gen = generators("gdn", kernel, R, N)
    if kernel.endswith("a6000"):
        as_on_a6000(monkeypatch)
    tree, x, slots = draft_trees(R, N, gen), gdn_layer(R, N, gen), padded_slots(R, cpu, R + 2)
    pool = randn(gen, R + 2, HV, K, K, scale=0.3, dtype=torch.float32)
    ref, _ = tree_gdn_verify_ref(**x, state_pool=pool, slots=slots, parents=tree.parents, dtype=torch.float64)
    before = pool.clone()
    with poisoned_outputs():
        step = gdn_step_inputs(kernel.removesuffix("-a6000"), tree)
        o, _ = gdn_verify(x, pool, slots, step)
    if kernel == "gather":  # its tables (two launches of their own) as the reference's
        expected = ancestor_table_ref(tree.ancestor_mask, DEPTHS, step["tables"].step_nodes)
        for name, got, want in zip(("table", "order", "items"), step["tables"], expected):
            assert torch.equal(got, want), name
    assert torch.equal(pool, before), "verify modified the pool"
    assert o.dtype == torch.bfloat16 and rel_err(o, ref) <= 1e-2


@pytest.mark.parametrize("R,N", SHAPES)
def test_tree_gdn_commit(R, N):
    """Every GDN layer's commit in one launch, as the server's (pool [48, S, HV, V, K] fp32, the layers' contexts by
    address; their verifies by the blocked and the gather kernel in turn), against the float64 reference's commit of
    each layer; the other slots, the padding request's among them, untouched."""
    cpu, gen = generators("gdn-commit", R, N)
    tree, slots = draft_trees(R, N, gen), padded_slots(R, cpu, R + 2)
    accepted = accepted_paths(tree.parents.cpu(), DEPTHS + 1, cpu).to(DEVICE)
    pool = randn(gen, GDN_LAYERS, R + 2, HV, K, K, scale=0.3, dtype=torch.float32)
    expected, ctxs, steps = pool.double(), [], [gdn_step_inputs(kernel, tree) for kernel in ("blocked", "gather")]
    for layer in range(GDN_LAYERS):
        x = gdn_layer(R, N, gen)
        ctxs.append(gdn_verify(x, pool[layer], slots, steps[layer % 2])[1])
        _, ctx = tree_gdn_verify_ref(**x, state_pool=pool[layer], slots=slots, parents=tree.parents, dtype=torch.float64)
        tree_gdn_commit_ref(expected[layer], slots, ctx, accepted)
    before = pool.clone()
    tree_gdn_commit_triton(pool, slots, context_tables(ctxs), accepted)
    live = slots[slots >= 0]
    assert rel_err(pool[:, live], expected[:, live]) <= 1e-5
    others = [s for s in range(R + 2) if s not in live.tolist()]
    assert torch.equal(pool[:, others], before[:, others])


@pytest.mark.parametrize("R,N", SHAPES)
def test_tree_conv(R, N):
    """One GDN layer's conv verify (x [R, N, 5120] bf16, state [S, 5120, 3] bf16, weight [5120, 4], no bias; the
    windows made once per step) against the float64 reference, the state untouched; then every GDN layer's conv commit
    in one launch (the layers' x by address) equal to the reference's commit of each layer."""
    cpu, gen = generators("conv", R, N)
    tree, slots = draft_trees(R, N, gen), padded_slots(R, cpu, R + 2)
    accepted = accepted_paths(tree.parents.cpu(), DEPTHS + 1, cpu).to(DEVICE)
    xs = [randn(gen, R, N, CONV_D) for _ in range(GDN_LAYERS)]
    state, weight = randn(gen, GDN_LAYERS, R + 2, CONV_D, CONV_W - 1), randn(gen, CONV_D, CONV_W, scale=0.5)
    ref = tree_causal_conv1d_ref(xs[0].double(), state[0].double(), weight.double(), None, slots, tree.parents)
    windows, expected = conv_windows(tree.parents, CONV_W), state.clone()
    with poisoned_outputs():
        y = tree_causal_conv1d_triton(xs[0], state[0], weight, None, slots, tree.parents, windows=windows)
    assert torch.equal(state, expected), "verify modified conv_state"
    torch.testing.assert_close(y.double(), ref, rtol=2e-2, atol=2e-2)
    for layer in range(GDN_LAYERS):
        tree_conv_commit_ref(expected[layer], slots, xs[layer], accepted)
    tree_conv_commit_triton(state, slots, LayerTable.of(xs), accepted)
    assert torch.equal(state, expected)


def paged_kv(R, heads, dh, cpu, gen):
    """SGLang's token pools k, v [P, heads, dh] bf16 and page table (req_to_token, page size 1) int32 [R + 1, PREFIX]
    of distinct pool indices, with slots long [R] (req_pool_indices) its rows; pool entries no row names are NaN."""
    table = torch.randperm((R + 1) * PREFIX + 64, generator=cpu)[: (R + 1) * PREFIX].view(R + 1, PREFIX)
    unused = torch.ones((R + 1) * PREFIX + 64, dtype=torch.bool)
    unused[table.flatten()] = False
    nan_rows = unused.nonzero()[:, 0].to(DEVICE)
    k, v = (randn(gen, len(unused), heads, dh).index_fill_(0, nan_rows, torch.nan) for _ in range(2))
    slots = torch.randperm(R + 1, generator=cpu)[:R]
    return k, v, table.to(DEVICE, torch.int32), slots.to(DEVICE)


@pytest.mark.parametrize("model,plan,R,N", ATTENTION)
def test_tree_attention(model, plan, R, N, monkeypatch):
    """The target's full-attention verify (12 query / 2 KV heads of 256; each request's 4,096 cached tokens read from
    SGLang's pool through its page table, then its tree, the mask as bit words) and the drafter's block of 16 (16 / 4
    heads of 128 over its context: sliding layers causal in the block, with their window; the full layer not), as
    planned on this GPU and on an A6000, against the float64 reference."""
    cpu, gen = generators("attention", model, plan, R, N)
    if plan == "a6000":
        as_on_a6000(monkeypatch)
    drafter = model.startswith("drafter")
    hq, hkv, dh = (DRAFT_HQ, DRAFT_HKV, DRAFT_DH) if drafter else (HQ, HKV, DH)
    lens = torch.full((R,), PREFIX, device=DEVICE)
    if drafter:
        window = DRAFT_WINDOW if model == "drafter-window" else None
        mask = torch.ones(R, N, N, dtype=torch.bool, device=DEVICE)
        mask = mask.tril() if window else mask
        extra = dict(window=window, positions=lens[:, None] + torch.arange(N, device=DEVICE))
    else:
        mask, extra = draft_trees(R, N, gen).ancestor_mask, {}
    # queries scaled up: scores of standard deviation 2 weight some 75 of the 4,096 keys, not nearly all of them
    q, k_tree, v_tree = randn(gen, R, N, hq, dh, scale=2.0), randn(gen, R, N, hkv, dh), randn(gen, R, N, hkv, dh)
    k_pool, v_pool, table, slots = paged_kv(R, hkv, dh, cpu, gen)
    ref = tree_attention_ref(q.double(), k_pool.double(), v_pool.double(), lens, k_tree.double(), v_tree.double(), mask,
                             slots=slots, table=table, **extra)  # fmt: skip
    with poisoned_outputs():
        out = tree_attention(q, k_pool, v_pool, lens, k_tree, v_tree, ancestor_bits(mask), slots=slots, table=table, **extra)
    assert rel_err(out, ref) <= 1e-2  # bf16 partials and output: two bf16 roundings (averaged outputs are small: no atol)


@pytest.mark.parametrize("R,B", BUILDS)
def test_tree_build(R, B):
    """DDTree's build from the drafter's top-B log-probabilities at each of its 15 depths: every DraftTree field equal
    to the reference's (`select_prefixes_ref`, then `tree_from_parents`)."""
    _, gen = generators("build", R, B)
    logp, ids = draft_log_probs_ref(draft_logits(R, gen), B)
    roots = torch.randint(VOCAB, (R,), generator=gen, device=DEVICE)
    ref = tree_from_parents(*select_prefixes_ref(logp, ids, roots, B), max_depth=DEPTHS)
    with poisoned_outputs():
        got = tree_build(logp, ids, roots, B)
    for name, value in got.items():
        assert torch.equal(value, getattr(ref, name)), name


@pytest.mark.parametrize("R,B,K", [pytest.param(R, B, K, id=f"R{R}-B{B}-K{K}") for R in BATCHES for B in BUDGETS
                                     for K in sorted({16, B})])  # fmt: skip
def test_conditional_tree_build(R, B, K):
    """The conditional build over 15 depths of K candidates (DFlash2's released selector: 16; DSpark's Markov head:
    the budget), scores multiples of 2^-4 (sums exact in float32 and float64, ties and signed zeros included): every
    DraftTree field and the chosen scores equal to the reference's (`select_conditional_prefixes_ref`, then
    `tree_from_parents`)."""
    cpu, _ = generators("conditional", R, B, K)
    first = -torch.randint(0, 128, (R, K), generator=cpu).float() / 16
    step = -torch.randint(0, 128, (R, DEPTHS - 1, K, K), generator=cpu).float() / 16
    for x in (first, step):  # zeros of both signs (negation gave -0.0), equal as torch's sorts take them
        x[(x == 0) & (torch.rand(x.shape, generator=cpu) < 0.5)] = 0.0
    first, step = first.to(DEVICE), step.to(DEVICE)
    cand = torch.stack([torch.randperm(VOCAB, generator=cpu)[:K] for _ in range(R * DEPTHS)]).view(R, DEPTHS, K).to(DEVICE)
    roots = torch.randint(VOCAB, (R,), generator=cpu).to(DEVICE)
    token_ids, parents, best = select_conditional_prefixes_ref(cand, first, step, roots, B)
    ref = tree_from_parents(token_ids, parents, max_depth=DEPTHS)
    with poisoned_outputs():
        got, got_best = conditional_tree_build(first, step, cand, roots, B)
    for name, value in got.items():
        assert torch.equal(value, getattr(ref, name)), name
    assert torch.equal(got_best.double(), best)


def forced_targets(tree, cpu):
    """Target tokens long [R, N]: random, but along one root path per request (request 0's to its deepest node, the
    others' to a random node) each node's is its child's token, so that the walk accepts the path."""
    R, N = tree.parents.shape
    parents, tokens = tree.parents.cpu(), tree.token_ids.cpu()
    targets = torch.randint(VOCAB, (R, N), generator=cpu)
    for r in range(R):
        path = root_path(parents, r, tree.depths[r].argmax().item() if r == 0 else torch.randint(N, (1,), generator=cpu).item())
        targets[r, path[:-1]] = tokens[r, path[1:]]
    return targets.to(DEVICE)


@pytest.mark.parametrize("walk", ["tree_walk", "greedy_walk"])
@pytest.mark.parametrize("R,N", SHAPES)
def test_acceptance_walk(walk, R, N):
    """The walk of the target's tokens (tree_walk), or of the argmax of its bf16 logits over the whole vocabulary,
    reading only the accepted path's rows (greedy_walk), against the torch walk (of torch's argmax)."""
    cpu, gen = generators("walk", walk, R, N)
    tree = draft_trees(R, N, gen)
    targets = forced_targets(tree, cpu)
    if walk == "greedy_walk":  # the forced tokens as the logits' maxima
        logits = randn(gen, R, N, VOCAB).scatter_(2, targets[..., None], 30.0)
        targets = argmax_ref(logits)
    with poisoned_outputs():
        if walk == "greedy_walk":
            got = greedy_walk(tree.token_ids, tree.parents, logits, DEPTHS)
        else:
            got = tree_walk(tree.token_ids, tree.parents, tree.depths, targets, DEPTHS)
    ref = walk_tree_ref(tree.token_ids, tree.parents, tree.depths, tree.ancestor_mask, targets, DEPTHS)
    assert ref[0][0] == tree.depths[0].max()  # request 0 accepts its deepest path
    for name, a, b in zip(("accept_len", "accepted_nodes", "bonus_tokens"), got, ref):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("R,N", SHAPES)
def test_accept_commit(R, N):
    """A spec-v2 step's commit: each request's verify window in an int32 req_to_token of PREFIX + 2 N columns
    reordered path first, its tokens, accept and new lengths, against the torch reference (on a copy of the table)."""
    cpu, gen = generators("commit", R, N)
    tree = draft_trees(R, N, gen)
    walk = walk_tree_ref(tree.token_ids, tree.parents, tree.depths, tree.ancestor_mask, forced_targets(tree, cpu), DEPTHS)
    table = torch.randperm(4 * R * (PREFIX + 2 * N), generator=cpu).view(4 * R, -1).to(torch.int32).to(DEVICE)
    slots = torch.randperm(4 * R, generator=cpu)[:R].to(DEVICE)
    seq_lens = torch.randint(PREFIX - 64, PREFIX, (R,), generator=cpu).to(DEVICE)
    ref_table = table.clone()
    ref = commit_accepted_ref(ref_table, slots, seq_lens, tree.token_ids, *walk[1::-1], walk[2])
    with poisoned_outputs():
        got = commit_accepted_kernel(table, slots, seq_lens, tree.token_ids, *walk[1::-1], walk[2])
    assert torch.equal(table, ref_table)
    for name, a, b in zip(("tokens", "accept_lens", "new_seq_lens"), got, ref):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("R,N", SHAPES)
def test_custom_mask(R, N):
    """SGLang's tree custom_mask over about PREFIX cached tokens per request (the flashinfer and triton backends' tree
    verify; ours where the tree attention is off, as on an A6000), against the torch reference."""
    cpu, gen = generators("mask", R, N)
    tree = draft_trees(R, N, gen)
    seq_lens = torch.randint(PREFIX - 64, PREFIX, (R,), generator=cpu).to(DEVICE)
    total = int(seq_lens.sum())
    with poisoned_outputs():
        got = sglang_custom_mask_kernel(tree.ancestor_mask, seq_lens, total)
    for name, a, b in zip(("custom_mask", "mask_indptr"), got, sglang_custom_mask_ref(tree.ancestor_mask, seq_lens, total)):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("R,N", SHAPES)
def test_argmax(R, N):
    """The argmax of every verify row of bf16 logits, as torch's: one row's maximum at its very end, one a tie across
    chunks (the first wins)."""
    _, gen = generators("argmax", R, N)
    logits = randn(gen, R, N, VOCAB)
    rows = logits.view(-1, VOCAB)
    rows[0, -1] = 100.0
    rows[-1, [VOCAB - 3, VOCAB // 2, 9]] = 60.0
    with poisoned_outputs():
        got = argmax(logits)
    assert torch.equal(got, argmax_ref(logits))


@pytest.mark.parametrize("R,B", BUILDS)
def test_draft_log_probs(R, B):
    """The drafter's top-B log-probabilities of its bf16 logits at each of its 15 depths, and the rows' logsumexp,
    against the reference; the ids those of torch's stable sort (ties, many in bf16, to the smaller id)."""
    _, gen = generators("topk", R, B)
    logits = draft_logits(R, gen).to(torch.bfloat16)
    ref_logp, _, ref_lse = draft_log_probs_ref(logits.float(), B, with_lse=True)
    ref_ids = torch.sort(logits.float(), dim=-1, descending=True, stable=True).indices[..., :B]
    with poisoned_outputs():
        logp, ids, lse = draft_log_probs(logits, B, with_lse=True)
    torch.testing.assert_close(logp, ref_logp, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-6, atol=1e-5)
    assert torch.equal(ids, ref_ids)


@pytest.mark.parametrize("peak", [20.0, 30.0, 60.0])
def test_draft_log_probs_of_a_sure_drafter_stay_at_or_below_zero(peak):
    """Rows whose argmax leads the rest by `peak` (a drafter all but certain: fp32's log-softmax of its top token is 0):
    no log-probability above 0 and no logsumexp below the row's maximum. The maximum's approximate exp2 after an FMA
    once fell just below 1 on a GPU, and a top token scored above 0 outranked its own parent in the DDTree build."""
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    logits = torch.randn(8, 15, VOCAB, device=DEVICE, generator=gen)
    logits.scatter_add_(-1, logits.argmax(-1, keepdim=True), torch.full_like(logits[..., :1], peak))
    for dtype in (torch.bfloat16, torch.float32):
        x = logits.to(dtype)
        logp, ids, lse = draft_log_probs(x, 32, with_lse=True)
        assert (logp <= 0).all() and (lse >= x.float().amax(-1)).all()
        assert torch.equal(ids[..., 0], x.float().argmax(-1))
