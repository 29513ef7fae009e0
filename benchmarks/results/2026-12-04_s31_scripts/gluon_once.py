"""Session 31: a few eager calls of the package's tree attention or one Gluon build at R = 1 x 64 over 4096 tokens, for
Nsight Compute (`gluon_call.sh`).
    python3 gluon_once.py package | BN DEFER Q_ASYNC   # e.g. 32 1 0"""

import sys

import torch
from gluon_attention import gluon_tree_attention

from benchmarks.kernels.bench_tree_attention import attention_inputs
from sglang_dflash.kernels.tree_attention import tree_attention

args, _ = attention_inputs(1, 64, torch.Generator(device="cuda").manual_seed(64))
for _ in range(4):
    if sys.argv[1] == "package":
        tree_attention(*args, splits=22)
    else:
        BN, defer, qa = (int(x) for x in sys.argv[1:4])
        gluon_tree_attention(*args, splits=22, BN=BN, defer_pv=bool(defer), q_async=bool(qa))
torch.cuda.synchronize()
print("done", sys.argv[1:])
