"""Session 31, call 5: what other attention kernels take at the tree attention's shape WITHOUT the tree mask (so at
most as fast as they could go with it): 12 / 2 heads, head dim 256, bf16, R x 64 queries a request over 4096 + 64 keys.
Beside the package's kernel (with its mask) and FlashInfer's fa2 prefill with the custom mask (the issue's peer):
FlashInfer's ragged prefill unmasked with backend fa2 and fa3 (JIT-built with the machine's nvcc), and torch SDPA
unmasked by backend (cuDNN, flash, memory-efficient). Graph-timed medians (eager where a graph cannot be captured),
us; each row printed as it is done. Needs flashinfer and apache-tvm-ffi from .whl/gpu in /tmp/site.
    PYTHONPATH=$PWD:/tmp/site python3 benchmarks/results/2026-12-04_s31_scripts/attention_bound_probe.py"""

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.kernels.sglang_peers import flashinfer_verify_attention
from benchmarks.timing import failure, graph_us
from sglang_dflash.kernels.tree_attention import sglang_custom_mask, tree_attention


def timed(fn) -> str:
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        return failure(e, 160)
    try:
        return f"{graph_us(fn, reps=10):.1f}"
    except Exception:  # noqa: BLE001
        torch.cuda.synchronize()
        return f"{triton.testing.do_bench(fn, warmup=50, rep=300, return_mode='median') * 1e3:.1f} (eager)"


def ragged(backend, q, k, v):
    """FlashInfer's batch ragged prefill, no mask: q [R * N, HQ, D], k / v [R * L, HKV, D]."""
    import flashinfer

    R = q.shape[0] // 64
    L = k.shape[0] // R
    i32 = dict(device=q.device, dtype=torch.int32)
    w = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(128 * 2**20, dtype=torch.uint8, device=q.device),
                                                        "NHD", backend=backend)  # fmt: skip
    w.plan(torch.arange(0, (R + 1) * 64, 64, **i32), torch.arange(0, (R + 1) * L, L, **i32), q.shape[1], k.shape[1],
           q.shape[2], causal=False, q_data_type=q.dtype, kv_data_type=k.dtype)  # fmt: skip
    return lambda: w.run(q, k, v)


for R in (1, 8):
    args, mask = bta.attention_inputs(R, 64, torch.Generator(device="cuda").manual_seed(R))
    q, kc, vc, _, kt, vt, _ = args
    k_all, v_all = torch.cat([kc, kt], 1), torch.cat([vc, vt], 1)  # [R, L, HKV, D]
    L = k_all.shape[1]
    fi = {}
    try:
        # (call 5 passed the tree's [R, N, N] mask here, and this row failed; fixed after, not run since)
        custom_mask, _ = sglang_custom_mask(mask, args[3], R * bta.PREFIX)
        fi["fa2m"] = flashinfer_verify_attention(q, kc, vc, kt, vt, custom_mask)
    except Exception as e:  # noqa: BLE001
        print(f"R={R} FlashInfer fa2 custom mask: {failure(e, 160)}", flush=True)
    for b in ("fa2", "fa3"):
        try:
            fi[b] = ragged(b, q.reshape(R * 64, bta.HQ, bta.DH), k_all.reshape(R * L, bta.HKV, bta.DH),
                           v_all.reshape(R * L, bta.HKV, bta.DH))  # fmt: skip
        except Exception as e:  # noqa: BLE001
            print(f"R={R} FlashInfer ragged {b}: {failure(e, 160)}", flush=True)
    G = bta.HQ // bta.HKV
    qs = q.transpose(1, 2).contiguous()  # [R, HQ, N, D]
    ks = k_all.repeat_interleave(G, dim=2).transpose(1, 2).contiguous()
    vs = v_all.repeat_interleave(G, dim=2).transpose(1, 2).contiguous()

    def by(backend):
        def fn():
            with sdpa_kernel(backend):
                return sdpa(qs, ks, vs)

        return fn

    cases = [("package, masked", lambda: tree_attention(*args))]
    cases += [(f"FlashInfer {n}", fi[k]) for k, n in (("fa2m", "fa2, custom mask"), ("fa2", "fa2 ragged, no mask"),
                                                      ("fa3", "fa3 ragged, no mask")) if k in fi]  # fmt: skip
    cases += [(f"SDPA {n}, no mask", by(b)) for n, b in (("cuDNN", SDPBackend.CUDNN_ATTENTION),
                                                          ("flash", SDPBackend.FLASH_ATTENTION),
                                                          ("mem-efficient", SDPBackend.EFFICIENT_ATTENTION))]  # fmt: skip
    try:  # the unmasked kernels compute the same thing: a check that each ran
        ref = by(SDPBackend.FLASH_ATTENTION)().transpose(1, 2).reshape(R * 64, bta.HQ, bta.DH).float()
        for k in ("fa2", "fa3"):
            if k in fi:
                print(f"R={R} FlashInfer {k} ragged - SDPA flash: max |diff| {(fi[k]().float() - ref).abs().max():.2e}")
    except Exception as e:  # noqa: BLE001
        print(f"R={R} check: {failure(e, 160)}", flush=True)
    for name, fn in cases:
        print(f"| R={R} x 64 over 4096 | {name} | {timed(fn)} |", flush=True)
