"""SGLang 0.5.10.post1's own tree-verify kernels, run from its wheel as same-run peers of ours (issue 3).

The kernels' source files run as they ship. The packages above them are empty stand-ins (SGLang's package
`__init__` files import its runtime, which needs the compiled `sgl_kernel`), and so is `sglang.srt.utils`, which the
attention kernels import for two predicates (is_cuda, is_hip). No kernel code is replaced.

FlashInfer (the attention backend SGLang picks by default on CUDA) is the other attention peer: its wheel (carried
with the GPU wheels, `benchmarks/gpu/wheels.txt`) JIT-builds its kernels with the machine's nvcc on first use.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import types
import zipfile

import torch


def sglang_module(whl: str, name: str):
    """Module `name` (dotted, e.g. sglang.srt.layers.attention.triton_ops.extend_attention) from SGLang's wheel,
    extracted once into the temp dir; its parent packages and sglang.srt.utils as stand-ins (module docstring)."""
    root = os.path.join(tempfile.gettempdir(), "sglsrc")
    if not os.path.isdir(os.path.join(root, "sglang")):
        zipfile.ZipFile(whl).extractall(root)
    parts = name.split(".")
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg not in sys.modules:
            stand_in = types.ModuleType(pkg)
            stand_in.__path__ = [os.path.join(root, *parts[:i])]
            sys.modules[pkg] = stand_in
    if "sglang.srt.utils" not in sys.modules:
        utils = types.ModuleType("sglang.srt.utils")
        utils.is_cuda = lambda: torch.version.cuda is not None
        utils.is_hip = lambda: torch.version.hip is not None
        sys.modules["sglang.srt.utils"] = utils
    return importlib.import_module(name)


def gdn_tree_verify(whl: str):
    """SGLang's GDN verify: `fused_sigmoid_gating_delta_rule_update` (tree mode: retrieve_parent_token, a state per
    draft token in intermediate_states_buffer)."""
    return sglang_module(
        whl, "sglang.srt.layers.attention.fla.fused_sigmoid_gating_recurrent"
    ).fused_sigmoid_gating_delta_rule_update


def conv_tree_update(whl: str):
    """SGLang's tree conv: `causal_conv1d_update` (tree mode: retrieve_next_token / _sibling / _parent_token, a conv
    window per draft token in intermediate_conv_window), as its GDN backend calls it in target verify."""
    return sglang_module(whl, "sglang.srt.layers.attention.mamba.causal_conv1d_triton").causal_conv1d_update


def triton_verify_attention(whl: str, q, k_cache, v_cache, k_tree, v_tree, custom_mask, mask_indptr):
    """A call of SGLang's triton backend in target-verify mode (`extend_attention_fwd`): q [R, N, HQ, D]; the pool
    holds each request's prefix (k_cache, v_cache [R, T, HKV, D], all T tokens valid), the tree's K/V come in as the
    extend part, the ancestor mask as SGLang's custom_mask / mask_indptr (`sglang_custom_mask`). Returns fn() ->
    o [R, N, HQ, D]; the pool and index tensors are made once, outside the timed call."""
    fwd = sglang_module(whl, "sglang.srt.layers.attention.triton_ops.extend_attention").extend_attention_fwd
    R, N, HQ, D = q.shape
    T, HKV = k_cache.shape[1], k_cache.shape[2]
    dev = q.device
    k_buf, v_buf = k_cache.reshape(R * T, HKV, D), v_cache.reshape(R * T, HKV, D)
    qo_indptr = torch.arange(0, (R + 1) * N, N, device=dev, dtype=torch.int32)
    kv_indptr = torch.arange(0, (R + 1) * T, T, device=dev, dtype=torch.int32)
    kv_indices = torch.arange(R * T, device=dev, dtype=torch.int64)
    q2, k2, v2 = q.reshape(R * N, HQ, D), k_tree.reshape(R * N, HKV, D), v_tree.reshape(R * N, HKV, D)
    o = torch.empty_like(q2)

    def run():
        fwd(q2, k2, v2, o, k_buf, v_buf, qo_indptr, kv_indptr, kv_indices, custom_mask, True, mask_indptr, N, 1.0,
            1.0, D**-0.5)  # fmt: skip
        return o.view(R, N, HQ, D)

    return run


def flashinfer_verify_attention(q, k_cache, v_cache, k_tree, v_tree, custom_mask):
    """A call of SGLang's flashinfer backend in target-verify mode: FlashInfer's paged prefill (backend "fa2", as
    SGLang 0.5.10 sets it; page size 1, CUDA-graph mode with fixed buffers) over prefix + tree with the whole
    custom mask. The pool holds each request's T prefix tokens and then its N tree tokens (SGLang writes the tree's
    K/V into the pool before the attention; that copy is not timed). Returns fn() -> o [R, N, HQ, D]."""
    import flashinfer

    R, N, HQ, D = q.shape
    T, HKV = k_cache.shape[1], k_cache.shape[2]
    dev = q.device
    L = T + N
    k_pool = torch.cat([k_cache, k_tree], 1).reshape(R * L, 1, HKV, D)
    v_pool = torch.cat([v_cache, v_tree], 1).reshape(R * L, 1, HKV, D)
    i32 = dict(device=dev, dtype=torch.int32)
    qo_indptr, kv_indptr = torch.arange(0, (R + 1) * N, N, **i32), torch.arange(0, (R + 1) * L, L, **i32)
    kv_indices, last_page = torch.arange(R * L, **i32), torch.ones(R, **i32)
    workspace = torch.empty(128 * 2**20, dtype=torch.uint8, device=dev)
    wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(
        workspace, "NHD", use_cuda_graph=True, qo_indptr_buf=qo_indptr.clone(), paged_kv_indptr_buf=kv_indptr.clone(),
        paged_kv_indices_buf=kv_indices.clone(), paged_kv_last_page_len_buf=last_page.clone(),
        custom_mask_buf=torch.empty(custom_mask.numel() // 8 + R + 1, dtype=torch.uint8, device=dev),  # packed per request
        mask_indptr_buf=torch.empty(R + 1, **i32), backend="fa2",
    )  # fmt: skip
    wrapper.plan(qo_indptr, kv_indptr, kv_indices, last_page, HQ, HKV, D, 1, custom_mask=custom_mask,
                 q_data_type=q.dtype, kv_data_type=k_cache.dtype)  # fmt: skip
    q2 = q.reshape(R * N, HQ, D)
    return lambda: wrapper.run(q2, (k_pool, v_pool)).view(R, N, HQ, D)
