"""For a GPU session (written in session 15, not run): the package's tree attention against the TMA prototype
(`tree_attention_tma.py`) in several configurations, over a 4096-token contiguous cache at Qwen3.6-27B TP=2 shapes
(12 / 2 heads, head dim 256, bf16). Graph-timed, us per call; d: relative difference to the package's output.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s15_ab_scripts/attention_tma_ab.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tree_attention_tma import tree_attention_tma  # noqa: E402

from benchmarks.kernels.bench_tree_attention import attention_inputs  # noqa: E402
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.kernels.tree_attention import tree_attention  # noqa: E402

CONFIGS = {  # name: tree_attention_tma keyword arguments; the warp-specialised ones last (see below)
    "pointers 128x64 w8 s2 (3 launches)": dict(BM=128, BN=64, num_warps=8, num_stages=2, tma=False),
    "tma 128x64 w8 s2": dict(BM=128, BN=64, num_warps=8, num_stages=2),
    "tma 64x64 w4 s2": dict(BM=64, BN=64, num_warps=4, num_stages=2),
    "tma 64x64 w4 s3": dict(BM=64, BN=64, num_warps=4, num_stages=3),
    "tma 128x64 w8 s2, tree 64 w4": dict(BM=128, BN=64, num_warps=8, num_stages=2, tree_BM=64, tree_warps=4),
    "tma 64x64 w4 s2 ws": dict(BM=64, BN=64, num_warps=4, num_stages=2, ws=True),
    "tma 64x32 w4 s2 ws": dict(BM=64, BN=32, num_warps=4, num_stages=2, ws=True),
    "tma 64x32 w4 s3 ws": dict(BM=64, BN=32, num_warps=4, num_stages=3, ws=True),
}
CASES = [(1, 16), (1, 64), (1, 65), (8, 64)]


# Two passes: a warp-specialised build that Triton cannot lower may abort the process (an LLVM error, reported
# elsewhere as uncatchable), so every other configuration is timed first.
for ws in (False, True):
    for R, N in CASES:
        args, _ = attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))
        ref = tree_attention(*args).float()
        line = [] if ws else [f"package {graph_us(lambda: tree_attention(*args), reps=10):.1f}"]
        for name, kw in CONFIGS.items():
            if kw.get("ws", False) != ws:
                continue
            try:
                out = tree_attention_tma(*args, **kw).float()
                d = ((out - ref).norm() / ref.norm()).item()
                line.append(f"{name} {graph_us(lambda: tree_attention_tma(*args, **kw), reps=10):.1f} (d {d:.0e})")
            except Exception as e:  # noqa: BLE001 - a configuration that does not build or fit is a result too
                line.append(f"{name} fail: {type(e).__name__}: {str(e).splitlines()[-1][:100] if str(e) else ''}")
        print(f"R={R} N={N}: " + " | ".join(line), flush=True)
