"""Session 26: the tree attention of each NAME=PATH tree (argv), at
R = 1, 2, 4, 8 x 64 nodes over 4096-token prefixes in caches of 1x and 8x the prefix (us per layer)."""
import importlib
import sys

import torch

from benchmarks.timing import graph_us, settle


def load(path):
    for m in [m for m in sys.modules if m.startswith("sglang_dflash")]:
        del sys.modules[m]
    sys.path.insert(0, path)
    mods = importlib.import_module("sglang_dflash.kernels.tree_attention"), importlib.import_module("sglang_dflash.ddtree")
    sys.path.remove(path)
    return mods


trees = {a.split("=")[0]: load(a.split("=")[1]) for a in sys.argv[1:]}
settle()
HQ, HKV, DH, P, N = 12, 2, 256, 4096, 64
for R in (1, 2, 4, 8):
    for cap in (1, 8):
        gen = torch.Generator(device="cuda").manual_seed(R)
        rnd = lambda *s: torch.randn(*s, generator=gen, device="cuda").bfloat16()  # noqa: E731
        base = (rnd(R, N, HQ, DH), rnd(R, cap * P, HKV, DH), rnd(R, cap * P, HKV, DH), torch.full((R,), P, device="cuda"),
                rnd(R, N, HKV, DH), rnd(R, N, HKV, DH))
        marg = torch.randn(R, 15, 64, generator=gen, device="cuda") * 2.5
        row = []
        for n, (att, dd) in trees.items():
            anc = dd.build_ddtree(marg, torch.zeros(R, dtype=torch.long, device="cuda"), N - 1).ancestor_mask
            words = att.ancestor_bits(anc)
            row.append(f"{n} {graph_us(lambda: att.tree_attention(*base, words), reps=10):6.1f}")
        print(f"R={R} cache {cap}x  " + "  ".join(row), flush=True)
