"""Session 17: HEAD's tree attention at R = 1 x N nodes over 4096 tokens, a few eager calls, for Nsight Compute:

    ncu --set full -k regex:_tree_attention_kernel --launch-skip 2 -c 1 \
        env PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s17_scripts/attention_once.py 64
"""

import sys

import torch

from benchmarks.kernels.bench_tree_attention import attention_inputs
from sglang_dflash.kernels.tree_attention import tree_attention

N = int(sys.argv[1]) if len(sys.argv) > 1 else 64
args, _ = attention_inputs(1, N, torch.Generator(device="cuda").manual_seed(N))
for _ in range(4):
    tree_attention(*args)
torch.cuda.synchronize()
print("done", N)
