"""Tree attention: the working tree's kernel (mask packed once) against 0f7fa73's (abtmp/old, bool mask), per-kernel times."""
import importlib, os, sys
import torch
sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us, print_kernel_times
from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_attention import ancestor_bits, tree_attention as new_attn

HQ, HKV, DH, PREFIX = 12, 2, 256, 4096


def load_old():
    for m in [m for m in sys.modules if m.startswith("sglang_dflash")]:
        del sys.modules[m]
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "old"))
    from sglang_dflash.kernels.tree_attention import tree_attention
    return tree_attention


def main():
    dev = "cuda"
    old_attn = load_old()
    for R, N in [(1, 16), (1, 64), (8, 64)]:
        gen = torch.Generator(device=dev).manual_seed(0)
        rnd = lambda *s: torch.randn(*s, generator=gen, device=dev).bfloat16()
        q, k_tree, v_tree = rnd(R, N, HQ, DH), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH)
        k_cache, v_cache = rnd(R, PREFIX, HKV, DH), rnd(R, PREFIX, HKV, DH)
        lens = torch.full((R,), PREFIX, device=dev)
        anc = build_ddtree(torch.randn(R, 15, 64, generator=gen, device=dev) * 2.5, torch.zeros(R, dtype=torch.long, device=dev), N - 1).ancestor_mask
        words = ancestor_bits(anc)
        base = (q, k_cache, v_cache, lens, k_tree, v_tree)
        a = new_attn(*base, words); b = old_attn(*base, anc)
        diff = float((a.float() - b.float()).abs().max())
        t_new = graph_us(lambda: new_attn(*base, words), reps=10)
        t_new_bool = graph_us(lambda: new_attn(*base, anc), reps=10)
        t_old = graph_us(lambda: old_attn(*base, anc), reps=10)
        print(f"R={R} N={N}: new (words) {t_new:.1f} us, new (bool mask, packed inside) {t_new_bool:.1f}, old {t_old:.1f}; max diff {diff:.1e}", flush=True)
        if R == 1 and N == 64:
            print_kernel_times(lambda: new_attn(*base, words), reps=20, top=4, title="new, per kernel (us):")
            print_kernel_times(lambda: old_attn(*base, anc), reps=20, top=4, title="old, per kernel (us):")
            for splits in (12, 16, 24, 32):
                for BM, BN, w, st in ((128, 64, 8, 2), (64, 64, 4, 2)):
                    cfg = dict(splits=splits, BM=BM, BN=BN, num_warps=w, num_stages=st)
                    try:
                        t = f"{graph_us(lambda: new_attn(*base, words, **cfg), reps=10):.1f}"
                    except Exception as e:
                        t = f"failed {type(e).__name__}"
                    print(f"  new {cfg}: {t}", flush=True)


if __name__ == "__main__":
    main()
