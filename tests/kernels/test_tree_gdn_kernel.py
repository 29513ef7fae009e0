"""The Triton tree-GDN verify/commit against the float64 reference (on CPU through TRITON_INTERPRET=1,
see conftest.py): random trees, chains, one node, H != HV, R > 1, non-power-of-two N, bf16
inputs; outputs poisoned first; the pool untouched by verify; commit equal to the reference."""

from unittest import mock

import pytest
import torch
from tree_helpers import DEVICE, accepted_paths, gdn_inputs, poisoned_outputs, random_parents
from triton.runtime.jit import KernelInterface

from sglang_dflash.kernels.tree_build import ancestors
from sglang_dflash.kernels.tree_gdn import (
    gather_tables,
    stack_contexts,
    tree_gdn_commit,
    tree_gdn_commit_ref,
    tree_gdn_verify,
    tree_gdn_verify_ref,
    uses_gather,
    verify_step_inputs,
)
from sglang_dflash.kernels.tree_gdn.naive import ancestor_table_ref
from sglang_dflash.kernels.tree_gdn.tree_gdn import (
    aligned_ancestor_mask,
    context_tables,
    key_loop,
    register_cap,
    tree_gdn_commit_triton,
    tree_gdn_verify_triton,
)
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref).norm() / ref.norm()).item()


CASES = [  # R, N, H, HV, K, V, chain, dtype, aligned, nodes per block (None: the default)
    (1, 1, 1, 1, 16, 16, False, torch.float32, False, None),
    (3, 7, 2, 6, 16, 32, False, torch.float32, False, None),
    (2, 17, 1, 3, 32, 32, True, torch.float32, False, None),
    (2, 23, 2, 4, 16, 16, False, torch.bfloat16, False, None),
    (1, 64, 1, 2, 16, 16, False, torch.float32, True, None),
    (1, 40, 1, 1, 16, 16, True, torch.float32, True, None),
    (2, 37, 1, 2, 16, 16, False, torch.float32, False, 16),  # three blocks, the last partial
    (1, 40, 1, 1, 16, 16, True, torch.float32, True, 16),  # a chain across blocks, aligned keys
    (1, 70, 1, 1, 16, 16, False, torch.float32, True, None),  # two blocks of 64
    (2, 23, 2, 4, 16, 16, False, torch.bfloat16, False, 32),  # one block of 32
    (1, 40, 1, 1, 16, 16, True, torch.float32, True, 64),
    (3, 33, 2, 4, 16, 32, False, torch.bfloat16, False, 16),  # DDTREE 32 on SM86: three blocks, bf16 raw dots
    (2, 17, 1, 2, 16, 16, False, torch.float32, False, 16),  # one node past the block: the root, then one block
    (2, 33, 1, 2, 16, 16, True, torch.float32, True, 16),  # the root, then two blocks, a chain of aligned keys
    (3, 65, 2, 4, 16, 16, False, torch.bfloat16, False, None),  # DDTREE 64 on Hopper: the root and one block of 64
]


@pytest.mark.parametrize("paired,peel_root", [(True, None), (False, None), (True, True), (True, False)])
@pytest.mark.parametrize("R,N,H,HV,K,V,chain,dtype,aligned,block", CASES)
def test_tree_gdn_triton_matches_reference(R, N, H, HV, K, V, chain, dtype, aligned, block, paired, peel_root):
    """The kernel (one launch; trees larger than `block` nodes, default 64, block by block; levels of two depths or
    of one; the root alone first where `verify_blocks` chooses it, always, or never) against the float64 reference,
    with the ancestor mask's rows padded (`aligned_ancestor_mask`) or not."""
    gen = torch.Generator().manual_seed(N * 13 + HV)
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R + 2, gen=gen, dtype=torch.float32)
    if aligned:  # nearly equal keys, beta ~ 1, no decay: long ancestor chains all matter
        x["k"] = torch.randn(1, 1, H, K, generator=gen) + 0.05 * x["k"]
        x["b"], x["a"] = x["b"] + 6, x["a"] - 8
    for name in ("q", "k", "v", "a", "b"):
        x[name] = x[name].to(dtype)
    slots = torch.randperm(R + 2, generator=gen)[:R]
    parents = random_parents(R, N, gen, chain)
    ref_o, ref_ctx = tree_gdn_verify_ref(
        **{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents, dtype=torch.float64
    )

    dev = {name: t.to(DEVICE) for name, t in x.items()}
    mask = ancestors(parents.to(DEVICE), N - 1)
    if N % 2:  # odd N: rows padded to 16 bytes, as the callers pass it; even N: the plain [R, N, N] mask
        mask = aligned_ancestor_mask(mask)
        first = int(N in (1, 17, 33, 65))  # the first column the verify reads: 1 where it peels the root off
        assert mask.stride(1) % 16 == 0 and (mask.stride(1) > N) == (N % 16 != 0)
        assert (mask.data_ptr() + first) % 16 == 0
        # the padding past column N poisoned: it must not count
        width = mask.stride(1) - mask.storage_offset() % mask.stride(1)
        torch.as_strided(mask, (R, N, width), mask.stride(), mask.storage_offset())[..., N:] = True
    pool_before = dev["state_pool"].clone()
    with poisoned_outputs():
        o, ctx = tree_gdn_verify_triton(
            **dev,
            slots=slots.to(DEVICE),
            parents=parents.to(DEVICE),
            BV=16,
            block_nodes=block,
            ancestor_mask=mask,
            paired=paired,
            peel_root=peel_root,
        )
    assert torch.equal(dev["state_pool"], pool_before), "verify modified the pool"
    assert o.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2  # bf16 outputs round to 8 bits
    assert rel_err(o.cpu(), ref_o.double()) <= tol

    # Commit a random root path; the last request is padding (slot -1) when R > 1.
    accepted = accepted_paths(parents, 16, gen)
    live = slots.clone()
    if R > 1:
        live[-1] = -1
    expected = x["state_pool"].double().clone()
    tree_gdn_commit_ref(expected, live, ref_ctx, accepted)
    # V = 16: the wrapper's default tile (a V below its 32 columns once launched no program); else two tiles a V-head
    tree_gdn_commit_triton(dev["state_pool"], live.to(DEVICE), ctx, accepted.to(DEVICE), BV=16 if V > 16 else None)
    got = dev["state_pool"].cpu()
    if R > 1:
        assert torch.equal(got[slots[-1]], x["state_pool"][slots[-1]]), "a slot < 0 request was written"
    touched = live[live >= 0]
    assert rel_err(got[touched], expected[touched]) <= 1e-5
    untouched = [s for s in range(R + 2) if s not in touched.tolist()]
    assert torch.equal(got[untouched], x["state_pool"][untouched])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("N,gather", [(23, False), (65, False), (40, True)])
def test_tree_gdn_16bit_keys_keep_fp32_accuracy(N, gather, dtype):
    """16-bit q and k with fp32 v (fp32 outputs), blocked and gather kernels: q.k, k.k as 16-bit dots and the S0
    products as three bf16 dots (bf16) or two tf32 ones (fp16) keep fp32 accuracy, over three seeds (two bf16 parts
    reach 1.06e-5 on some of them, one part fails far more: benchmarks/RESULTS.md)."""
    for seed in range(3):
        gen = torch.Generator().manual_seed(N * 7 + seed)
        R, H, HV, K, V = 2, 1, 2, 32, 16
        x = gdn_inputs(R, N, H, HV, K, V, pool_size=R, gen=gen, dtype=torch.float32)
        x["state_pool"] = x["state_pool"] * 10  # the S0 terms dominate
        x["q"], x["k"] = x["q"].to(dtype), x["k"].to(dtype)
        slots, parents = torch.arange(R), random_parents(R, N, gen, False)
        ref_o, _ = tree_gdn_verify_ref(**{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents,
                                       dtype=torch.float64)  # fmt: skip
        dev = {name: t.to(DEVICE) for name, t in x.items()}
        with poisoned_outputs():
            if gather:
                mask = ancestors(parents, N - 1)
                tables = ancestor_table(mask.to(DEVICE), int(mask.sum(-1).max()) - 1, 16)
                o, _ = tree_gdn_verify_gather(**dev, slots=slots.to(DEVICE), tables=tables, NC=16)
            else:
                o, _ = tree_gdn_verify_triton(**dev, slots=slots.to(DEVICE), parents=parents.to(DEVICE), BV=16)
        assert o.dtype == torch.float32
        assert rel_err(o.cpu(), ref_o.double()) <= 1e-5, f"seed {seed}"


def test_tree_gdn_verify_wide_tiles():
    """64 V columns per program (the default on Hopper when the grid is large) against the float64 reference."""
    gen = torch.Generator().manual_seed(11)
    R, N, H, HV, K, V = 2, 9, 1, 2, 16, 128
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R, gen=gen, dtype=torch.float32)
    slots, parents = torch.arange(R), random_parents(R, N, gen, False)
    ref_o, _ = tree_gdn_verify_ref(**{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents,
                                   dtype=torch.float64)  # fmt: skip
    dev = {name: t.to(DEVICE) for name, t in x.items()}
    with poisoned_outputs():
        o, _ = tree_gdn_verify_triton(**dev, slots=slots.to(DEVICE), parents=parents.to(DEVICE), BV=64)
    assert rel_err(o.cpu(), ref_o.double()) <= 1e-5


@pytest.mark.parametrize(
    "N,BK,dtype", [(40, None, torch.float32), (70, None, torch.bfloat16), (23, 16, torch.float32), (40, 128, torch.bfloat16)]
)
def test_tree_gdn_verify_key_loop_steps(N, BK, dtype):
    """The key loops at K = 128 in steps of BK columns: by default (`key_loop`) two steps of 64 for a block of 64
    nodes (40 nodes) and for trees of several blocks (70 nodes), one of 128, eight of 16; against the float64
    reference."""
    gen = torch.Generator().manual_seed(N + (BK or 0))
    R, H, HV, K, V = 2, 1, 2, 128, 16
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R, gen=gen, dtype=torch.float32)
    for name in ("q", "k", "v", "a", "b"):
        x[name] = x[name].to(dtype)
    slots, parents = torch.arange(R), random_parents(R, N, gen, False)
    ref_o, _ = tree_gdn_verify_ref(**{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents,
                                   dtype=torch.float64)  # fmt: skip
    dev = {name: t.to(DEVICE) for name, t in x.items()}
    with poisoned_outputs():
        o, _ = tree_gdn_verify_triton(**dev, slots=slots.to(DEVICE), parents=parents.to(DEVICE), BV=16, BK=BK,
                                      block_nodes=64)  # fmt: skip
    assert rel_err(o.cpu(), ref_o.double()) <= (1e-5 if dtype == torch.float32 else 1e-2)


def test_key_loop_rule():
    """64 key columns unpipelined for 64-node blocks and trees of several blocks, Triton's default below."""
    assert key_loop(64, 1) == key_loop(16, 3) == (64, 1)
    assert key_loop(16, 1) == key_loop(32, 1) == (32, 3)


def test_register_cap_rule():
    """168 registers (three 4-warp programs an SM, not two; 128 at 8 warps) for one block of up to 32 nodes where that
    takes a wave of programs off, none otherwise. CPU tensors plan as on an H200 (132 SMs: 264 programs a wave at
    two an SM, 396 at three)."""
    cpu = torch.device("cpu")
    assert register_cap(16, 1, 4, 384, cpu) == register_cap(32, 1, 4, 768, cpu) == 168
    assert register_cap(16, 1, 8, 384, cpu) == 128
    assert register_cap(16, 1, 4, 264, cpu) is None  # one wave already
    assert register_cap(16, 1, 4, 500, cpu) is None  # two waves either way
    assert register_cap(64, 1, 4, 384, cpu) is None and register_cap(16, 2, 4, 384, cpu) is None  # they would spill


def test_verify_launches_with_the_register_cap():
    """The verify's launch carries `register_cap`'s choice (Triton's maxnreg) at Qwen3.6-27B's TP=2 shapes: none for
    one 16-node chain (96 programs), 168 for eight (384 programs of 64 V columns); an explicit cap wins, 0 is none."""
    e, bf16, HV, H, K, N = torch.empty, torch.bfloat16, 24, 8, 128, 16
    seen = []
    with mock.patch.object(KernelInterface, "__getitem__", lambda kernel, grid: lambda *a, **kw: seen.append(kw)):
        for R, cap in ((1, None), (8, None), (8, 200), (8, 0)):
            q, v, g = e(R, N, H, K, dtype=bf16), e(R, N, HV, K, dtype=bf16), e(R, N, HV, dtype=bf16)
            parents = (torch.arange(N) - 1).expand(R, N)
            tree_gdn_verify_triton(q, q, v, g, g, e(HV), e(HV), e(R, HV, K, K), torch.arange(R), parents,
                                   max_registers=cap)  # fmt: skip
    assert [kw["maxnreg"] for kw in seen] == [None, 168, 200, None]


def test_tree_gdn_commit_of_stacked_layers_equals_each_layer():
    """state_pool [layers, S, HV, V, K] and `stack_contexts` of the layers' verifies: one launch
    equals a commit per layer (and the reference's stacked path agrees); so does one launch over
    `context_tables` of them, whose keys are views into wider rows (read in place)."""
    gen = torch.Generator().manual_seed(11)
    layers, R, N, H, HV, K, V = 3, 2, 13, 1, 2, 16, 32
    xs = [gdn_inputs(R, N, H, HV, K, V, pool_size=R + 1, gen=gen, dtype=torch.float32) for _ in range(layers)]
    pool = torch.stack([x.pop("state_pool") for x in xs])
    slots = torch.tensor([1, -1])
    parents = random_parents(R, N, gen, False)
    accepted = accepted_paths(parents, 8)
    ref_ctxs, ctxs = [], []
    for layer, x in enumerate(xs):
        ref_ctxs.append(tree_gdn_verify_ref(**x, state_pool=pool[layer], slots=slots, parents=parents)[1])
        dev = {name: t.to(DEVICE) for name, t in x.items()}
        wide = torch.randn(R, N, 2 * H * K + 3, generator=gen).to(DEVICE)  # q, k as the model reads them: in wider rows
        wide[..., : 2 * H * K] = torch.cat([dev["q"].flatten(2), dev["k"].flatten(2)], -1)
        dev["q"], dev["k"] = (part.unflatten(-1, (H, K)) for part in wide[..., : 2 * H * K].split(H * K, -1))
        ctxs.append(
            tree_gdn_verify_triton(
                **dev, state_pool=pool[layer].to(DEVICE), slots=slots.to(DEVICE), parents=parents.to(DEVICE), BV=16
            )[1]
        )
    expected = pool.clone()
    tree_gdn_commit(expected, slots, stack_contexts(ref_ctxs), accepted)
    for layer in range(layers):
        one = pool[layer].clone()
        tree_gdn_commit_ref(one, slots, ref_ctxs[layer], accepted)
        assert torch.equal(one, expected[layer])
    got = pool.clone().to(DEVICE)
    tree_gdn_commit(got, slots.to(DEVICE), stack_contexts(ctxs), accepted.to(DEVICE))
    assert rel_err(got.cpu(), expected.double()) <= 1e-5
    assert torch.equal(got.cpu()[:, 0], pool[:, 0]) and not torch.equal(expected[:, 1], pool[:, 1])
    tables = context_tables(ctxs)
    assert tables.k.like.stride(1) == 2 * H * K + 3  # read in place
    by_address = pool.clone().to(DEVICE)
    tree_gdn_commit(by_address, slots.to(DEVICE), tables, accepted.to(DEVICE))
    # the same arithmetic from other loads (on an H200 the tf32x3 products then round differently, ~1e-7)
    assert rel_err(by_address.cpu(), got.cpu().double()) <= 1e-6 and rel_err(by_address.cpu(), expected.double()) <= 1e-5
    assert torch.equal(by_address.cpu()[:, 0], pool[:, 0])  # slot -1: untouched


def test_tree_gdn_verify_reads_split_projections_in_place():
    """q, k, v as views into one wider projection (how the model splits its conv output) give the
    outputs of contiguous copies."""
    gen = torch.Generator().manual_seed(2)
    R, N, H, HV, K, V = 2, 11, 2, 4, 16, 16
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R, gen=gen, dtype=torch.float32)
    mixed = torch.randn(R, N, 2 * H * K + HV * V + 5, generator=gen)  # padded: rows wider than q + k + v
    q, k, v = mixed[..., : 2 * H * K + HV * V].split([H * K, H * K, HV * V], dim=-1)
    x.update(q=q.reshape(R, N, H, K), k=k.reshape(R, N, H, K), v=v.reshape(R, N, HV, V))
    assert not x["q"].is_contiguous()
    slots, parents = torch.arange(R), random_parents(R, N, gen, False)
    dev = {name: t.to(DEVICE) for name, t in x.items()}
    split, _ = tree_gdn_verify_triton(**dev, slots=slots.to(DEVICE), parents=parents.to(DEVICE), BV=16)
    packed = {name: t.contiguous() for name, t in dev.items()}
    copied, _ = tree_gdn_verify_triton(**packed, slots=slots.to(DEVICE), parents=parents.to(DEVICE), BV=16)
    assert torch.equal(split, copied)


@pytest.mark.parametrize(
    "R,N,H,HV,K,V,chain,dtype,NC",
    [
        (1, 1, 1, 1, 16, 16, False, torch.float32, 16),  # one node
        (3, 7, 2, 6, 16, 32, False, torch.float32, 16),
        (2, 16, 1, 2, 16, 16, True, torch.float32, 16),  # a chain of 16: 15 levels of one node
        (2, 40, 1, 2, 32, 16, False, torch.bfloat16, 16),  # wide levels over several chunks, bf16 raw dots
        (1, 70, 2, 4, 16, 16, False, torch.float32, 32),
        (2, 45, 1, 2, 16, 16, "star", torch.float32, 16),  # 40 children of the root (3 steps), then grandchildren
    ],
)
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("step", [16, 32])
def test_tree_gdn_gather_matches_reference(R, N, H, HV, K, V, chain, dtype, NC, grouped, step):
    """The ancestor-gather verify against the float64 reference (outputs poisoned, the pool untouched), and the
    commit of its context equal to the reference's; its first launch per V-head, or per group of the V-heads of a
    QK head (grouped: the dots shared); tiles of NC nodes, solve steps of up to `step`."""
    gen = torch.Generator().manual_seed(N * 7 + HV)
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R + 2, gen=gen, dtype=torch.float32)
    for name in ("q", "k", "v", "a", "b"):
        x[name] = x[name].to(dtype)
    slots = torch.randperm(R + 2, generator=gen)[:R]
    if chain == "star":
        parents = torch.tensor([-1] + [0] * 40 + [1, 1, 7, 40]).expand(R, N)
    else:
        parents = random_parents(R, N, gen, chain)
    ref_o, ref_ctx = tree_gdn_verify_ref(
        **{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents, dtype=torch.float64
    )
    mask = ancestors(parents, N - 1)
    depth = int(mask.sum(-1).max()) - 1
    tables = ancestor_table(mask.to(DEVICE), depth, step)
    dev = {name: t.to(DEVICE) for name, t in x.items()}
    pool_before = dev["state_pool"].clone()
    with poisoned_outputs():
        o, ctx = tree_gdn_verify_gather(**dev, slots=slots.to(DEVICE), tables=tables, NC=NC,
                                        heads_per_program=HV // H if grouped else 1)  # fmt: skip
    assert torch.equal(dev["state_pool"], pool_before), "verify modified the pool"
    assert rel_err(o.cpu(), ref_o.double()) <= (1e-5 if dtype == torch.float32 else 1e-2)

    accepted = accepted_paths(parents, 16, gen)
    expected = x["state_pool"].double().clone()
    tree_gdn_commit_ref(expected, slots, ref_ctx, accepted)
    tree_gdn_commit_triton(dev["state_pool"], slots.to(DEVICE), ctx, accepted.to(DEVICE), BV=16)
    assert rel_err(dev["state_pool"].cpu()[slots], expected[slots]) <= 1e-5


@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA: tree_gdn_verify takes the references on CPU")
@pytest.mark.parametrize(
    "R,N,gather",
    [
        (1, 129, True),
        (1, 160, True),
        (2, 100, True),
        (2, 160, True),
        (1, 66, True),
        (4, 65, False),
        (1, 65, False),
        (4, 16, False),
    ],
)
def test_tree_gdn_verify_runs_the_kernel_gather_tables_chooses(R, N, gather):
    """DDTree-shaped trees (depth <= 15): gather_tables picks the ancestor-gather kernel from 66 nodes, the blocked
    one below, and one request's solve steps of 32 nodes from 160 (`solve_step_nodes`); tree_gdn_verify runs the
    chosen one, which matches the reference and commits."""
    gen = torch.Generator().manual_seed(N + R)
    x = gdn_inputs(R, N, 2, 4, 32, 32, pool_size=R + 1, gen=gen, dtype=torch.float32)
    parents = random_parents(R, N, gen, max_depth=15)
    slots = torch.randperm(R + 1, generator=gen)[:R]
    ref_o, ref_ctx = tree_gdn_verify_ref(**{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents,
                                         dtype=torch.float64)  # fmt: skip
    dev = {name: t.to(DEVICE) for name, t in x.items()}
    step = verify_step_inputs(ancestors(parents.to(DEVICE), 15), 15)  # as the engine and the server make it
    assert ("tables" in step) == gather
    if gather:
        assert step["tables"].step_nodes == (32 if R == 1 and N >= 160 else 16)
    o, ctx = tree_gdn_verify(**dev, slots=slots.to(DEVICE), parents=parents.to(DEVICE), **step)
    assert rel_err(o.cpu(), ref_o.double()) <= 1e-5
    accepted = accepted_paths(parents, 16, gen)
    expected = x["state_pool"].double().clone()
    tree_gdn_commit_ref(expected, slots, ref_ctx, accepted)
    tree_gdn_commit(dev["state_pool"], slots.to(DEVICE), ctx, accepted.to(DEVICE))
    assert rel_err(dev["state_pool"].cpu()[slots], expected[slots]) <= 1e-5


def test_uses_gather_from_the_second_block():
    """Trees, not chains, take the gather kernel from the first size whose blocked verify needs a second block after
    the root on Hopper (65 nodes: the root and one block of 64)."""
    assert not uses_gather(65, 15) and uses_gather(66, 15) and uses_gather(257, 15)
    assert not uses_gather(66, 65) and not uses_gather(16, 15)


def test_gather_tables_leave_cpu_trees_to_the_references():
    mask = ancestors(random_parents(4, 129, torch.Generator().manual_seed(0)), 128)
    assert gather_tables(mask, 15) is None


@pytest.mark.parametrize(
    "R,N,max_depth,NC,aligned",
    [(3, 129, 15, 16, True), (1, 1, None, 16, False), (2, 45, 3, 16, False), (1, 257, 15, 32, True), (2, 33, None, 16, True)],
)
def test_ancestor_table_matches_reference(R, N, max_depth, NC, aligned):
    """The one-launch tables equal the torch reference's (outputs poisoned first), for random trees (shallow, or of
    any depth), masks with padded rows or not, several NC."""
    parents = random_parents(R, N, torch.Generator().manual_seed(N), max_depth=max_depth)
    mask = ancestors(parents, N - 1)
    depth = int(mask.sum(-1).max()) - 1 if max_depth is None else max_depth
    expected = ancestor_table_ref(mask, depth, NC)
    mask = mask.to(DEVICE)
    with poisoned_outputs():
        got = ancestor_table(aligned_ancestor_mask(mask) if aligned else mask, depth, NC)
    assert got.step_nodes == NC
    for name, x, y in zip(("table", "order", "items"), got, expected):
        assert torch.equal(x.cpu(), y), name


def test_ancestor_table_of_small_trees():
    """Root paths root first, padded -1; nodes by depth; the solve's steps: ranges of `order` of up to NC nodes of one
    depth, depth 1 first, then empty ranges, and their count last."""
    parents = torch.tensor([[-1, 0, 0, 1, 3, 2], [-1, 0, 1, 2, 3, 4]])  # depths 0 1 1 2 3 2, and a chain
    table, order, items, step_nodes = ancestor_table(ancestors(parents, 5).to(DEVICE), 5, NC=2)
    table, order, items = table.cpu(), order.cpu(), items.cpu()
    assert step_nodes == 2
    assert table[0].tolist() == [[0, -1, -1, -1, -1, -1, -1, -1], [0, 1, -1, -1, -1, -1, -1, -1],
                                 [0, 2, -1, -1, -1, -1, -1, -1], [0, 1, 3, -1, -1, -1, -1, -1],
                                 [0, 1, 3, 4, -1, -1, -1, -1], [0, 2, 5, -1, -1, -1, -1, -1]]  # fmt: skip
    assert table[1, 5].tolist() == [0, 1, 2, 3, 4, 5, -1, -1]
    assert order.tolist() == [[0, 1, 2, 3, 5, 4], [0, 1, 2, 3, 4, 5]]
    assert items.shape == (2, 6 // 2 + 8 + 1, 2)
    assert items[0, :4].tolist() == [[1, 3], [3, 5], [5, 6], [6, 6]] and items[0, -1].tolist() == [3, 3]
    assert items[1, :6].tolist() == [[1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 6]] and items[1, -1].tolist() == [5, 5]
