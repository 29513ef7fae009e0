"""The full-attention layers' tree verify inside SGLang's hybrid backend (the plugin's `hybrid_forward_extend` hook;
on where measured faster, SGLANG_DFLASH_TREE_ATTENTION=1 / 0 forces it), on CPU.

Through SGLang's own dispatch (`HybridLinearAttnBackend.forward` -> `forward_extend`) with its own RadixAttention
layers and MHATokenToKVPool: the verify's output must be what SGLang's triton backend computes in target-verify mode
(`extend_attention_fwd`, the prefix read from the pool through kv_indices, the tree through our `custom_mask`), run
under the Triton interpreter; the nodes' K/V must be saved at out_cache_loc; graph padding rows must not disturb the
real ones; the mask the forward's first GDN layer made is reused only where that layer came first; every other call
(other modes, GDN layers, layers the kernel does not serve, the switch off) must reach SGLang's own backend.

SGLang's kernel modules import `sgl_kernel`, whose compiled build cannot load without a GPU driver; the test-only
stand-in tests/sgl_kernel_stub goes first on sys.path when the real one is missing. Nothing tested here calls into
it (the oracle is a Triton kernel).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from paths import use_sgl_kernel_stand_in
from tree_helpers import DEVICE, hybrid_backend, random_parents, sglang_triton_verify

from sglang_dflash.kernels.tree_build import ancestors

pytestmark = pytest.mark.sglang  # also run against the second supported SGLang release (.ci/run)

pytest.importorskip("sglang", reason="SGLang is installed by tests/setup_env.sh")

HQ, HKV, DH, POOL, CONTEXT = 4, 2, 16, 96, 40
FULL_LAYERS = (3, 7)  # full-attention layers among GDN ones, as in Qwen3.5/3.6


@pytest.fixture(scope="module")
def sgl():
    use_sgl_kernel_stand_in()
    from sglang.srt.layers.attention import hybrid_linear_attn_backend

    try:  # SGLang 0.5.23 moved its kernels under sglang.kernels.ops
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
    except ImportError:
        from sglang.srt.layers.attention.triton_ops.extend_attention import extend_attention_fwd
    from sglang.srt.layers.radix_attention import RadixAttention
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

    from sglang_dflash.sglang.plugin.activate import activate_runtime

    activate_runtime(SimpleNamespace(speculative_algorithm="DDTREE"))  # what a scheduler serving ours does
    return SimpleNamespace(
        hybrid=hybrid_linear_attn_backend.HybridLinearAttnBackend,
        extend=extend_attention_fwd,
        RadixAttention=RadixAttention,
        pool=MHATokenToKVPool,
        mode=ForwardMode,
        pools_on_batch="token_to_kv_pool" in ForwardBatch.__dataclass_fields__,  # 0.5.23: on the attention backend
    )


class OwnBackend:
    """SGLang's full-attention backend as the hybrid one calls it: records that it was reached."""

    def __init__(self):
        self.calls = []

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True, **kwargs):
        self.calls.append(layer.layer_id)
        return torch.zeros(q.shape[0], HQ * DH, device=q.device)


def hybrid(sgl, full, linear):
    return hybrid_backend(sgl.hybrid, full, linear, FULL_LAYERS)


def as_forwarded(sgl, backend, batch, **changes):
    """`batch` (with `changes`) as this release's forward hands it to `backend`: the pools on the batch up to 0.5.11,
    on the full-attention backend from 0.5.23."""
    fields = {**vars(batch), **changes}
    if not sgl.pools_on_batch:
        for name in ("token_to_kv_pool", "req_to_token_pool"):
            setattr(backend.full_attn_backend, name, fields.pop(name))
    return SimpleNamespace(**fields)


def verify_batch(sgl, R: int, rows: int, N: int, gen: torch.Generator, dtype=torch.float32, gdn_layers=None):
    """A TARGET_VERIFY forward batch of R requests padded to `rows` graph rows (padding: req_to_token row 0, length 1,
    SGLang's fill value), its pool (random K/V everywhere), and q [rows * N, HQ * DH] and k, v [rows * N, HKV, DH] of
    the nodes. gdn_layers: the GDN layer ids of its req_to_token pool (`mamba_map`); None: a pool without them."""
    pool = sgl.pool(POOL, 1, dtype, HKV, DH, max(FULL_LAYERS) + 1, DEVICE, False, enable_alt_stream=False)
    for layer in FULL_LAYERS:
        pool.get_key_buffer(layer).copy_(torch.randn(POOL + 1, HKV, DH, generator=gen))
        pool.get_value_buffer(layer).copy_(torch.randn(POOL + 1, HKV, DH, generator=gen))
    seq_lens = torch.tensor([11, 5, 8, 13][:R] + [1] * (rows - R))
    req_pool_indices = torch.tensor([4, 1, 3, 5][:R] + [0] * (rows - R))
    req_to_token = torch.zeros(6, CONTEXT, dtype=torch.int32)
    free = torch.randperm(POOL, generator=gen) + 1  # slot 0 is SGLang's padding slot
    out_cache_loc = []
    for r in range(rows):
        s, row = int(seq_lens[r]), int(req_pool_indices[r])
        slots, free = free[: s + N], free[s + N :]
        if r < R:
            req_to_token[row, : s + N] = slots.to(torch.int32)  # prefix, then the nodes' KV slots
        out_cache_loc.append(slots[s:] if r < R else torch.zeros(N, dtype=torch.long))
    q = torch.randn(rows * N, 2 * HQ * DH, generator=gen).to(dtype)[:, : HQ * DH]  # strided: a gated q projection's half
    k, v = (torch.randn(rows * N, HKV, DH, generator=gen).to(dtype) for _ in range(2))  # as RadixAttention hands them
    batch = SimpleNamespace(
        forward_mode=sgl.mode.TARGET_VERIFY,
        logical_forward_mode=sgl.mode.TARGET_VERIFY,  # 0.5.23's linear layers dispatch on it
        spec_info=SimpleNamespace(draft_token_num=N),
        token_to_kv_pool=pool,
        out_cache_loc=torch.cat(out_cache_loc).to(DEVICE),
        seq_lens=seq_lens.to(DEVICE),
        req_pool_indices=req_pool_indices.to(DEVICE),
        req_to_token_pool=SimpleNamespace(req_to_token=req_to_token.to(DEVICE)),
    )
    if gdn_layers is not None:
        batch.req_to_token_pool.mamba_map = {layer: i for i, layer in enumerate(gdn_layers)}
    return batch, q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)


def sglang_verify(sgl, layer, batch, q, k, v, anc, R: int):
    """o [R * N, HQ * DH]: SGLang's triton backend's target-verify attention (`tree_helpers.sglang_triton_verify`) for
    the first R requests of `batch`, their prefix read from its pool through req_to_token."""
    seq_lens, N = batch.seq_lens[:R].cpu(), anc.shape[1]
    table, rows = batch.req_to_token_pool.req_to_token, batch.req_pool_indices[:R]
    kv_indices = torch.cat([table[int(i), : int(s)] for i, s in zip(rows, seq_lens)])
    pool = batch.token_to_kv_pool
    o = sglang_triton_verify(sgl.extend, q[: R * N].view(-1, HQ, DH), k[: R * N], v[: R * N],
                             pool.get_key_buffer(layer.layer_id), pool.get_value_buffer(layer.layer_id), kv_indices,
                             seq_lens, anc, layer.scaling)  # fmt: skip
    return o.view(R * N, HQ * DH)


@pytest.mark.parametrize("R, rows, N, chain", [(1, 1, 9, False), (2, 2, 16, True), (3, 4, 7, False)])
def test_tree_attention_verify_equals_sglangs_triton_verify(sgl, monkeypatch, R, rows, N, chain):
    from sglang_dflash.sglang import tree_gdn_backend

    gen = torch.Generator().manual_seed(R * 10 + N)
    ws = tree_gdn_backend.TreeVerifyWorkspace(N, [rows], DEVICE, max_depth=N - 1, attention=True)
    monkeypatch.setattr(tree_gdn_backend, "_workspace", ws)
    own = OwnBackend()
    backend = hybrid(sgl, own, None)
    for step in range(2):  # two verify steps of other trees through one workspace: each step's own mask
        parents = random_parents(R, N, gen, chain=chain)
        ws.set_parents(parents.to(DEVICE), rows if rows > R else None)
        batch, q, k, v = verify_batch(sgl, R, rows, N, gen)
        anc = ancestors(parents, N - 1)
        for layer_id in FULL_LAYERS:  # the first makes the step's mask, the second reuses it
            layer = sgl.RadixAttention(HQ, DH, 0.3, HKV, layer_id=layer_id)  # not the default 1 / sqrt(DH)
            expected = sglang_verify(sgl, layer, batch, q, k, v, anc, R)
            o = backend.forward(q=q, k=k, v=v, layer=layer, forward_batch=as_forwarded(sgl, backend, batch))
            assert o.shape == (rows * N, HQ * DH) and not own.calls
            torch.testing.assert_close(o[: R * N].cpu(), expected.cpu(), rtol=1e-5, atol=1e-5)
            assert o.isfinite().all()  # padding rows too
            saved = batch.token_to_kv_pool.get_key_buffer(layer_id)[batch.out_cache_loc[: R * N]]
            assert torch.equal(saved.cpu(), k[: R * N].cpu())
    assert sorted(ws.attention_words) == [rows]


@pytest.mark.parametrize("gdn_layers, reused", [((0, 1, 2, 4), True), ((4, 5), False), ((), False)])
def test_the_gdn_layers_mask_is_reused_only_where_they_came_first(sgl, monkeypatch, gdn_layers, reused):
    """The first full-attention layer (3) takes the mask the forward's first GDN layer left in `masks` where that layer
    came before it, else makes it from the parents. A mask of other trees stands in for the GDN layer's, so the output
    tells which one was used."""
    from sglang_dflash.sglang import tree_gdn_backend

    R, N = 2, 9
    gen = torch.Generator().manual_seed(len(gdn_layers))
    ws = tree_gdn_backend.TreeVerifyWorkspace(N, [R], DEVICE, max_depth=N - 1, attention=True)
    monkeypatch.setattr(tree_gdn_backend, "_workspace", ws)
    backend = hybrid(sgl, OwnBackend(), None)
    parents, other = random_parents(R, N, gen), random_parents(R, N, gen, chain=True)
    ws.set_parents(parents.to(DEVICE), None)
    ws.masks[R] = ancestors(other, N - 1).to(DEVICE)
    batch, q, k, v = verify_batch(sgl, R, R, N, gen, gdn_layers=gdn_layers or None)
    layer = sgl.RadixAttention(HQ, DH, 0.3, HKV, layer_id=FULL_LAYERS[0])
    o = backend.forward(q=q, k=k, v=v, layer=layer, forward_batch=as_forwarded(sgl, backend, batch))
    expected = sglang_verify(sgl, layer, batch, q, k, v, ancestors(other if reused else parents, N - 1), R)
    torch.testing.assert_close(o.cpu(), expected.cpu(), rtol=1e-5, atol=1e-5)


def test_other_calls_reach_sglangs_own_backend(sgl, monkeypatch):
    """Decode-like modes, a GDN layer, a layer with a logit cap or a sliding window, a KV pool of another dtype than
    q's, and the switch off all go to SGLang's own full-attention backend."""
    from sglang_dflash.sglang import tree_gdn_backend

    gen = torch.Generator().manual_seed(0)
    N = 5
    ws = tree_gdn_backend.TreeVerifyWorkspace(N, [1], DEVICE, attention=True)
    monkeypatch.setattr(tree_gdn_backend, "_workspace", ws)
    own = OwnBackend()
    linear = SimpleNamespace(forward_extend=lambda **kw: "gdn")
    backend = hybrid(sgl, own, linear)
    batch, q, k, v = verify_batch(sgl, 1, 1, N, gen)
    plain = sgl.RadixAttention(HQ, DH, DH**-0.5, HKV, layer_id=3)
    capped = sgl.RadixAttention(HQ, DH, DH**-0.5, HKV, layer_id=3, logit_cap=30.0)
    windowed = sgl.RadixAttention(HQ, DH, DH**-0.5, HKV, layer_id=3, sliding_window_size=8)
    gdn = SimpleNamespace(layer_id=0)

    def call(layer, **batch_changes):
        batch_changes.setdefault("logical_forward_mode", batch_changes.get("forward_mode", batch.forward_mode))
        return backend.forward(q=q, k=k, v=v, layer=layer, forward_batch=as_forwarded(sgl, backend, batch, **batch_changes))

    call(plain, forward_mode=sgl.mode.EXTEND)
    call(plain, forward_mode=getattr(sgl.mode, "DRAFT_EXTEND", None) or sgl.mode.DRAFT_EXTEND_V2)  # 0.5.23: v2 only
    call(capped)
    call(windowed)
    call(plain, token_to_kv_pool=SimpleNamespace(dtype=torch.bfloat16))
    assert call(gdn) == "gdn"
    ws.attention_on = False
    call(plain)
    assert own.calls == [3] * 6
    ws.attention_on = None  # auto: SGLang's own backend here, as on a GPU it was not measured against
    call(plain)
    assert own.calls == [3] * 7 and ws.attention_on is False
    ws.attention_on = True
    call(plain)  # the one call served by the tree attention
    assert own.calls == [3] * 7


def test_attention_default_is_on_only_where_measured(monkeypatch):
    """Auto: on for compute capability 9.x with SGLang's flashinfer or triton backend; off for others (fa3, an
    A6000's 8.6, a Blackwell, the CPU)."""
    from sglang_dflash.kernels import device as gpu
    from sglang_dflash.sglang.tree_gdn_backend import attention_default

    backends = {name: type(name, (), {})() for name in ("FlashInferAttnBackend", "TritonAttnBackend", "FlashAttentionBackend")}
    for cap, on in (((9, 0), {"FlashInferAttnBackend", "TritonAttnBackend"}), ((8, 6), set()), ((10, 0), set())):
        monkeypatch.setattr(gpu, "_cuda_capability", lambda index, cap=cap: cap)
        monkeypatch.setattr(gpu, "_index", lambda device: 0)
        assert {n for n, b in backends.items() if attention_default(b, "cuda:0")} == on, cap
    assert not attention_default(backends["TritonAttnBackend"], "cpu")


def test_install_takes_the_attention_switch(monkeypatch):
    from sglang_dflash.sglang import tree_gdn_backend

    args = SimpleNamespace(speculative_algorithm="DDTREE", speculative_num_draft_tokens=16, cuda_graph_bs=[1],
                           max_running_requests=1)  # fmt: skip
    runner = SimpleNamespace(server_args=args, model=torch.nn.Linear(2, 2))
    monkeypatch.setattr(tree_gdn_backend, "_workspace", None)
    for value, on in ((None, None), ("auto", None), ("0", False), ("1", True)):
        if value is None:
            monkeypatch.delenv("SGLANG_DFLASH_TREE_ATTENTION", raising=False)
        else:
            monkeypatch.setenv("SGLANG_DFLASH_TREE_ATTENTION", value)
        assert tree_gdn_backend.install(runner, max_depth=15).attention_on is on
    monkeypatch.setenv("SGLANG_DFLASH_TREE_ATTENTION", "yes")
    with pytest.raises(ValueError, match="expected one of 0, 1, auto"):
        tree_gdn_backend.install(runner, max_depth=15)
