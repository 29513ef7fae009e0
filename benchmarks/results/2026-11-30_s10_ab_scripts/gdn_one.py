"""One tree-GDN verify at R=1, N=64 (DDTree-shaped), run a few times: for ncu."""
import os, sys, torch
sys.path.insert(0, os.path.dirname(__file__))
from gdn_ablate import inputs, base
R, N, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
args, kw, depth = inputs(R, N, kind, "cuda")
for _ in range(3):
    base.tree_gdn_verify_triton(*args, **kw)
torch.cuda.synchronize()
print("depth", depth)
