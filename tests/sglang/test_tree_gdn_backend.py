"""The tree-GDN verify path inside SGLang's GDN backend (`sglang_dflash.sglang.tree_gdn_backend`), on CPU.

Oracle: the installed SGLang's own TARGET_VERIFY kernels (`causal_conv1d_update` with its intermediate conv
windows, `fused_sigmoid_gating_delta_rule_update` with its per-node states), run under the Triton
interpreter on the same pools, for chains (SGLang's topk = 1 path) and trees (its topk > 1 path: the tree as
retrieve_next_token / retrieve_next_sibling, which `verify_io` hands SGLang). Our verify must give SGLang's outputs,
leave the pools untouched, and our commit must leave in each slot the state SGLang keeps for the accepted
step (what `update_mamba_state_after_mtp_verify` copies back). Graph padding rows (slot -1) stay untouched.

SGLang's kernel modules import `sgl_kernel`, whose compiled build cannot load without a GPU driver; the
test-only stand-in tests/sgl_kernel_stub goes first on sys.path when the real one is missing. Nothing
tested here calls into it (both oracles are Triton kernels).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from paths import use_sgl_kernel_stand_in

from sglang_dflash.kernels.tree_build import ancestors

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)

pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")

H, HV, K, V, W = 2, 4, 16, 16, 4
D = 2 * H * K + HV * V
LAYER_IDS = (0, 2)  # two GDN layers, not numbered 0..n-1


@pytest.fixture(scope="module")
def sgl():
    use_sgl_kernel_stand_in()
    try:  # SGLang 0.5.23 moved its kernels under sglang.kernels.ops
        from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
            fused_sigmoid_gating_delta_rule_update,
        )
        from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update
    except ImportError:
        from sglang.srt.layers.attention.fla.fused_sigmoid_gating_recurrent import fused_sigmoid_gating_delta_rule_update
        from sglang.srt.layers.attention.mamba.causal_conv1d_triton import causal_conv1d_update

    return SimpleNamespace(conv=causal_conv1d_update, gdn=fused_sigmoid_gating_delta_rule_update)


class Pool:
    """SGLang's HybridReqToTokenPool as the backend sees it: per-layer caches and the stacked pools."""

    def __init__(self, slots: int, gen: torch.Generator):
        n = len(LAYER_IDS)
        self.mamba_map = {layer_id: i for i, layer_id in enumerate(LAYER_IDS)}
        self.conv = torch.randn(n, slots, D, W - 1, generator=gen)
        self.ssm = torch.randn(n, slots, HV, V, K, generator=gen) * 0.3

    def mamba2_layer_cache(self, layer_id: int):
        i = self.mamba_map[layer_id]
        return SimpleNamespace(conv=[self.conv[i]], temporal=self.ssm[i])

    def get_speculative_mamba2_params_all_layers(self):
        return SimpleNamespace(conv=[self.conv], temporal=self.ssm)


def make_layer(layer_id: int, gen: torch.Generator, bias: bool):
    return SimpleNamespace(
        layer_id=layer_id,
        num_q_heads=H,
        num_k_heads=H,
        num_v_heads=HV,
        head_q_dim=K,
        head_k_dim=K,
        head_v_dim=V,
        q_dim=H * K,
        k_dim=H * K,
        v_dim=HV * V,
        conv_weights=torch.randn(D, W, generator=gen) * 0.5,
        bias=torch.randn(D, generator=gen) * 0.1 if bias else None,
        A_log=torch.rand(HV, generator=gen) * 2,
        dt_bias=torch.randn(HV, generator=gen) * 0.5,
    )


def sglang_verify(sgl, layer, pool: Pool, slots: torch.Tensor, x: torch.Tensor, a, b, tree=None):
    """SGLang's TARGET_VERIFY of one layer (gdn_backend.forward_extend): for chains (topk = 1), or for `tree` (a
    DraftTree: its next_token / next_sibling as SGLang's retrieve_next_token / _sibling; the conv kernel derives
    retrieve_parent_token from them, which the GDN kernel then reads): outputs [R, N, HV, V], and the per-node conv
    windows [R, N, D, W - 1] and states [R, N, HV, V, K]."""
    R, N, _ = x.shape
    cache = pool.mamba2_layer_cache(layer.layer_id)
    conv_window = torch.zeros(R, N, D, W - 1)
    states = torch.zeros(R, N, HV, V, K)
    index = torch.arange(R, dtype=torch.int32)
    retrieve = {}
    if tree is not None:
        i32 = torch.int32
        retrieve = dict(retrieve_next_token=tree.next_token.to(i32), retrieve_next_sibling=tree.next_sibling.to(i32),
                        retrieve_parent_token=torch.full((R, N), -7, dtype=i32))  # fmt: skip
    # as gdn_backend passes them: the packed rows viewed [R, D, N] (transposed, not copied), and back
    y = sgl.conv(x.transpose(1, 2), cache.conv[0].clone(), layer.conv_weights, layer.bias, "silu",
                 conv_state_indices=slots, intermediate_conv_window=conv_window, intermediate_state_indices=index,
                 **retrieve)  # fmt: skip
    q, k, v = y.transpose(1, 2).view(R * N, D).split([layer.q_dim, layer.k_dim, layer.v_dim], dim=-1)
    o = sgl.gdn(A_log=layer.A_log, dt_bias=layer.dt_bias, q=q.reshape(1, R * N, H, K), k=k.reshape(1, R * N, H, K),
                v=v.reshape(1, R * N, HV, V), a=a, b=b, initial_state_source=cache.temporal,
                initial_state_indices=slots, cu_seqlens=torch.arange(0, R * N + 1, N, dtype=torch.int32),
                use_qk_l2norm_in_kernel=True, softplus_beta=1.0, softplus_threshold=20.0, is_kda=False,
                disable_state_update=True, intermediate_states_buffer=states, intermediate_state_indices=index,
                cache_steps=N, retrieve_parent_token=retrieve.get("retrieve_parent_token"))  # fmt: skip
    if tree is not None:  # what the conv derived from SGLang's tree layout is the tree's own parents
        assert torch.equal(retrieve["retrieve_parent_token"][:, 1:].long(), tree.parents[:, 1:])
    return o.view(R, N, HV, V), conv_window, states


@pytest.mark.parametrize(
    "R, graph_rows, N, bias, tree",
    [(2, None, 5, True, False), (3, 4, 6, False, False), (1, 1, 16, True, False), (2, None, 9, True, True),
     (3, 4, 7, False, True)],
)  # fmt: skip
def test_tree_verify_and_commit_equal_sglangs_own_path(sgl, monkeypatch, R, graph_rows, N, bias, tree):
    """Through SGLang's own dispatch (HybridLinearAttnBackend.forward -> GDNAttnBackend.forward_extend, as the
    plugin's hook patches it), for chains or random trees. graph_rows: the verify ran as a CUDA-graph batch
    of that many rows (padding rows with GDN slot -1); the forward is then recorded as a capture's (as during
    SGLang's graph capture), and the commit reads that. Before the commit, `track` (extra_buffer's prefix-cache
    tracking) writes the state after a prefix of the accepted path into a free slot."""
    from sglang.srt.layers.attention import hybrid_linear_attn_backend
    from sglang.srt.layers.attention.linear import gdn_backend
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from tree_helpers import accepted_paths, hybrid_backend, random_parents

    from sglang_dflash.ddtree import tree_from_parents
    from sglang_dflash.sglang import tree_gdn_backend
    from sglang_dflash.sglang.plugin.activate import activate_runtime
    from sglang_dflash.sglang.tree_gdn_backend import TreeVerifyWorkspace

    activate_runtime(SimpleNamespace(speculative_algorithm="DDTREE"))  # what a scheduler serving ours does
    monkeypatch.setattr(tree_gdn_backend, "_capturing", lambda: graph_rows is not None)

    gen = torch.Generator().manual_seed(R * 100 + N)
    S = 6
    pool = Pool(S, gen)
    before = (pool.conv.clone(), pool.ssm.clone())
    layers = [make_layer(i, gen, bias) for i in LAYER_IDS]
    rows = graph_rows or R
    slots = torch.randperm(S, generator=gen)[:R].to(torch.int32)
    padded = torch.cat([slots, torch.full((rows - R,), -1, dtype=torch.int32)])
    ws = TreeVerifyWorkspace(N, range(1, 5), "cpu")
    parents = random_parents(R, N, gen) if tree else torch.arange(-1, N - 1).expand(R, N)
    draft = tree_from_parents(torch.zeros(R, N, dtype=torch.long), parents, N - 1) if tree else None
    ws.set_parents(parents, graph_rows)
    monkeypatch.setattr(tree_gdn_backend, "_workspace", ws)
    gdn = object.__new__(gdn_backend.GDNAttnBackend)  # only what the verify reads
    gdn.forward_metadata, gdn.req_to_token_pool = SimpleNamespace(mamba_cache_indices=padded), pool
    backend = hybrid_backend(hybrid_linear_attn_backend.HybridLinearAttnBackend, None, gdn, [1])  # SGLang's dispatch
    mode = ForwardMode.TARGET_VERIFY  # 0.5.23's linear layers dispatch on the logical mode
    batch = SimpleNamespace(spec_info=SimpleNamespace(draft_token_num=N), forward_mode=mode, logical_forward_mode=mode)

    expected = []
    for layer in layers:
        x = torch.randn(rows, N, D, generator=gen)
        a, b = torch.randn(rows * N, HV, generator=gen), torch.randn(rows * N, HV, generator=gen)
        o = backend.forward(layer=layer, forward_batch=batch, mixed_qkv=x.reshape(rows * N, D), a=a, b=b)
        assert o.shape == (1, rows * N, HV, V)
        ref = sglang_verify(sgl, layer, pool, slots, x[:R], a[: R * N], b[: R * N], draft)
        torch.testing.assert_close(o.view(rows, N, HV, V)[:R], ref[0], rtol=1e-5, atol=1e-5)
        expected.append(ref)
    assert torch.equal(pool.conv, before[0]) and torch.equal(pool.ssm, before[1]), "verify modified the pools"
    # the step's ancestor mask, left for the full-attention layers of the same forward
    assert torch.equal(ws.masks[rows], ancestors(ws.parents[rows], ws.max_depth))

    accepted_nodes = accepted_paths(parents, N, gen)  # a root path to a random node; its last is the kept step
    accept = (accepted_nodes >= 0).sum(1) - 1  # accepted draft nodes
    # extra_buffer's tracking first: every request has a free track slot; the even ones cross a tracking point (their
    # slot gets the state after `cut` accepted nodes), the odd ones do not (cut -1), yet are among the rows passed
    free = [i for i in range(S) if i not in slots.tolist()]
    track = torch.tensor(free[:R])
    cut = torch.where(torch.arange(R) % 2 == 0, (torch.rand(R, generator=gen) * (accept + 1)).long(), -1)
    ws.track(pool, slots, track, accepted_nodes, cut, graph_rows, rows=list(range(R)))
    ws.commit(pool, slots, accepted_nodes, graph_rows)
    untouched = torch.ones(S, dtype=torch.bool)
    untouched[slots.long()] = False
    untouched[track[cut >= 0]] = False
    for i, (_, conv_window, states) in enumerate(expected):
        for r in range(R):
            s, step = int(slots[r]), int(accepted_nodes[r, accept[r]])
            torch.testing.assert_close(pool.conv[i, s], conv_window[r, step], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(pool.ssm[i, s], states[r, step], rtol=1e-5, atol=1e-5)
            if cut[r] >= 0:
                t, c = int(track[r]), int(accepted_nodes[r, cut[r]])
                torch.testing.assert_close(pool.conv[i, t], conv_window[r, c], rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(pool.ssm[i, t], states[r, c], rtol=1e-5, atol=1e-5)
        assert torch.equal(pool.conv[i, untouched], before[0][i, untouched])
        assert torch.equal(pool.ssm[i, untouched], before[1][i, untouched])


def test_set_parents_keeps_padding_rows_within_the_depth_bound_and_rejects_unknown_sizes():
    """Padding rows: a chain (DFLASH: max_depth = N - 1), or a chain to the depth bound and then children of the root
    (DDTREE: the drafter's block size - 1), so that tables sized by the bound hold them."""
    from sglang_dflash.kernels.tree_build import ancestors
    from sglang_dflash.sglang.tree_gdn_backend import TreeVerifyWorkspace

    ws = TreeVerifyWorkspace(4, [1, 4], "cpu")
    tree = torch.tensor([[-1, 0, 0, 1], [-1, 0, 1, 1]])
    ws.set_parents(tree, 4)
    assert torch.equal(ws.parents[2], tree)  # eager buffer made for 2 rows
    assert torch.equal(ws.parents[4][:2], tree)
    assert torch.equal(ws.parents[4][2:], torch.tensor([[-1, 0, 1, 2]] * 2))
    shallow = TreeVerifyWorkspace(7, [3], "cpu", max_depth=2)
    assert shallow.max_depth == 2 and torch.equal(shallow.parents[3], torch.tensor([[-1, 0, 1, 0, 0, 0, 0]] * 3))
    assert ancestors(shallow.parents[3], 2).sum(-1).max() == 3  # depth 2: root, child, grandchild
    assert TreeVerifyWorkspace(3, [1], "cpu", max_depth=15).max_depth == 2
    backend = SimpleNamespace(forward_metadata=None, req_to_token_pool=None)
    with pytest.raises(RuntimeError, match="3 trees of 4 nodes"):
        ws.verify(backend, None, SimpleNamespace(spec_info=SimpleNamespace(draft_token_num=4)), torch.zeros(12, D), None, None)


@pytest.mark.parametrize(
    "algorithm, nodes, steps, depth",
    # v1 (steps: the drafter's 15 depths, a chain's nodes - 1); spec v2 (steps nodes // 2, for its KV reservation only)
    [("DDTREE", 33, 15, 15), ("DFLASH_CHAIN", 16, 15, 15), ("DDTREE", 8, 15, 7), ("DDTREE", 12, 6, 11), ("DDTREE", 65, 32, 15)],
)
def test_install_bounds_the_depth_by_the_drafter_and_the_nodes(monkeypatch, algorithm, nodes, steps, depth):
    """The workspace's depth bound is min(N - 1, the drafter's depths) (the shipped drafter: block 16, 15 depths),
    whatever speculative_num_steps says (spec v2 makes it nodes // 2: a depth bound from it lost ancestors of deeper
    nodes), and every captured batch size's padding rows hold a tree within it."""
    from sglang_dflash.engine.load import tiny_pair
    from sglang_dflash.kernels.tree_build import ancestors
    from sglang_dflash.sglang import tree_gdn_backend

    monkeypatch.setattr(tree_gdn_backend, "_workspace", None)
    args = SimpleNamespace(speculative_algorithm=algorithm, speculative_num_draft_tokens=nodes,
                           speculative_num_steps=steps, speculative_draft_model_path=str(tiny_pair()[1]),
                           speculative_draft_model_revision=None, cuda_graph_bs=[1, 2], max_running_requests=3)  # fmt: skip
    runner = SimpleNamespace(server_args=args, model=torch.nn.Linear(2, 2))
    ws = tree_gdn_backend.install(runner)
    assert ws is tree_gdn_backend.workspace() and ws.max_depth == depth
    assert sorted(ws.parents) == [1, 2, 3]
    assert all(int(ancestors(p, nodes - 1).sum(-1).max()) - 1 == depth for p in ws.parents.values())


def test_memory_pool_drops_the_per_node_states():
    """SGLang's HybridReqToTokenPool gets mamba_spec_state_size 0 (its per-node verify states for one slot): our tree
    verify never reads them; a pool built without the keyword is left alone. (The hook exists only in a scheduler
    serving ours: `test_sglang_plugin`.)"""
    from hooks import around

    from sglang_dflash.sglang.plugin.patches import req_to_token_pool_init

    class HybridReqToTokenPool:  # the constructor's keyword interface, as model_runner_kv_cache_mixin calls it
        def __init__(self, *, size, mamba_spec_state_size, speculative_num_draft_tokens):
            self.spec = mamba_spec_state_size

    class ReqToTokenPool:  # no GDN states
        def __init__(self, *, size, **kwargs):
            self.kwargs = kwargs

    around(HybridReqToTokenPool, "__init__", req_to_token_pool_init)
    around(ReqToTokenPool, "__init__", req_to_token_pool_init)
    pool = HybridReqToTokenPool(size=48, mamba_spec_state_size=48, speculative_num_draft_tokens=33)
    assert pool.spec == 0 and ReqToTokenPool(size=48, device="cpu").kwargs == {"device": "cpu"}


def test_fused_nodes_per_gpu(monkeypatch):
    """Trees up to 64 nodes verify in one fused launch with Hopper's shared memory, up to 16 on SM86 (the A6000);
    tree_gdn_verify's block follows it."""
    from sglang_dflash.kernels import device as gpu
    from sglang_dflash.kernels.tree_gdn import fused_nodes

    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(gpu, "_cuda_shared_memory", lambda index: gpu.HOPPER_SHARED)
    assert fused_nodes(cuda) == 64 and fused_nodes(torch.device("cpu")) == 64
    monkeypatch.setattr(gpu, "_cuda_shared_memory", lambda index: 101_376)
    assert fused_nodes(cuda) == 16


@pytest.mark.parametrize(
    "shared,nodes,expected",
    [  # (root, nodes per block, blocks)
        (232_448, 64, (0, 64, 1)),
        (232_448, 65, (1, 64, 1)),  # DDTREE 64 on an H200: the root, then one block
        (232_448, 33, (1, 32, 1)),
        (232_448, 17, (1, 16, 1)),
        (232_448, 16, (0, 16, 1)),
        (232_448, 40, (0, 64, 1)),
        (232_448, 129, (1, 64, 2)),
        (232_448, 130, (0, 64, 3)),
        (232_448, 1, (1, 16, 0)),  # the root alone
        (101_376, 17, (1, 16, 1)),  # DDTREE 16 on SM86
        (101_376, 32, (0, 16, 2)),
        (101_376, 33, (1, 16, 2)),
    ],
)
def test_verify_blocks(monkeypatch, shared, nodes, expected):
    """The verify peels the root off when that leaves fewer padded rows, then takes blocks of the fewest nodes that
    hold the rest in as few blocks, up to what the GPU's shared memory allows."""
    from sglang_dflash.kernels import device as gpu
    from sglang_dflash.kernels.tree_gdn import verify_blocks

    monkeypatch.setattr(gpu, "_cuda_shared_memory", lambda index: shared)
    assert verify_blocks(nodes, torch.device("cuda", 0)) == expected
    assert verify_blocks(nodes, torch.device("cuda", 0), block_nodes=16, peel_root=False) == (0, 16, -(-nodes // 16))


def test_commit_inputs_by_address_are_made_once_per_captured_record():
    """On the GPU the commit reads every layer's tensors by address (`LayerTable`): a captured graph's record is
    static, so its tables are made once and kept until a new capture replaces the record; eager records get fresh
    tables every step. (The tables' commits equal stacked ones: tests/kernels/, test_tree_gdn_kernel.py and
    test_tree_conv_kernel.py.)"""
    from sglang_dflash.kernels.layer_table import LayerTable
    from sglang_dflash.kernels.tree_gdn import TreeGDNTritonContext
    from sglang_dflash.sglang.tree_gdn_backend import TreeVerifyWorkspace

    ws = TreeVerifyWorkspace(5, [1, 2], "cpu")

    def record(R):
        ctx = lambda: TreeGDNTritonContext(torch.randn(R, 5, 2, 4), torch.randn(R, 5, 2), torch.randn(R, 5, 1, 4))  # noqa: E731
        return {layer: (torch.randn(R, 5, 8), ctx()) for layer in (0, 1, 2)}

    captured = record(2)
    x, ctx = ws._commit_inputs(captured, [0, 1, 2], graph_rows=2, by_address=True)
    assert isinstance(x, LayerTable) and isinstance(ctx.u, LayerTable) and len(x) == 3
    assert x.ptrs.tolist() == [captured[layer][0].data_ptr() for layer in (0, 1, 2)]
    assert ctx.k.ptrs.tolist() == [captured[layer][1].k.data_ptr() for layer in (0, 1, 2)]
    assert ws._commit_inputs(captured, [0, 1, 2], graph_rows=2, by_address=True)[0] is x  # made once
    recaptured = record(2)
    assert ws._commit_inputs(recaptured, [0, 1, 2], graph_rows=2, by_address=True)[0].ptrs.tolist() == [
        recaptured[layer][0].data_ptr() for layer in (0, 1, 2)
    ]
    eager = record(1)
    first = ws._commit_inputs(eager, [0, 1, 2], graph_rows=None, by_address=True)[0]
    assert ws._commit_inputs(eager, [0, 1, 2], graph_rows=None, by_address=True)[0] is not first
    stacked, stacked_ctx = ws._commit_inputs(eager, [0, 1, 2], graph_rows=None, by_address=False)
    assert stacked.shape == (3, 1, 5, 8) and stacked_ctx.u.shape == (3, 1, 5, 2, 4)
