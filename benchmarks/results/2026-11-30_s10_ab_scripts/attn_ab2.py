"""Tree attention merge variants, same run: the working tree's (loop over splits, 64-column tiles), abtmp/ta_v3.py
(every split in one load, 64-column tiles), and 0f7fa73's kernel (abtmp/old)."""
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us, print_kernel_times  # noqa: E402
from sglang_dflash.ddtree import build_ddtree  # noqa: E402
from sglang_dflash.kernels.tree_attention import ancestor_bits  # noqa: E402
from sglang_dflash.kernels.tree_attention import tree_attention as loop_attn  # noqa: E402

spec = importlib.util.spec_from_file_location("sglang_dflash.kernels.tree_attention.v3", os.path.join(os.path.dirname(__file__), "ta_v3.py"))
v3 = importlib.util.module_from_spec(spec)
v3.__package__ = "sglang_dflash.kernels.tree_attention"
sys.modules[spec.name] = v3
spec.loader.exec_module(v3)
for m in [m for m in sys.modules if m.startswith("sglang_dflash")]:
    del sys.modules[m]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "old"))
from sglang_dflash.kernels.tree_attention import tree_attention as old_attn  # noqa: E402

HQ, HKV, DH, PREFIX = 12, 2, 256, 4096
dev = "cuda"
for R, N in [(1, 16), (1, 64), (8, 64)]:
    gen = torch.Generator(device=dev).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, generator=gen, device=dev).bfloat16()  # noqa: E731
    q, k_tree, v_tree = rnd(R, N, HQ, DH), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH)
    k_cache, v_cache = rnd(R, PREFIX, HKV, DH), rnd(R, PREFIX, HKV, DH)
    lens = torch.full((R,), PREFIX, device=dev)
    anc = build_ddtree(torch.randn(R, 15, 64, generator=gen, device=dev) * 2.5, torch.zeros(R, dtype=torch.long, device=dev), N - 1).ancestor_mask
    words = ancestor_bits(anc)
    base = (q, k_cache, v_cache, lens, k_tree, v_tree)
    ref = old_attn(*base, anc).float()
    line = f"R={R} N={N}:"
    for name, f in [("loop", lambda: loop_attn(*base, words)), ("oneload", lambda: v3.tree_attention(*base, words)),
                    ("old", lambda: old_attn(*base, anc))]:
        diff = float((f().float() - ref).abs().max())
        line += f" {name} {graph_us(f, reps=10):.1f} (diff {diff:.1e})"
    print(line, flush=True)
    if R == 1 and N == 64:
        print_kernel_times(lambda: loop_attn(*base, words), reps=20, top=2, title="loop, per kernel (us):")
        print_kernel_times(lambda: v3.tree_attention(*base, words), reps=20, top=2, title="oneload, per kernel (us):")
