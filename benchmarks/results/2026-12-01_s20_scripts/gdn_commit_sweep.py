"""Session 20: the batched GDN commit (all 48 layers of a step in one launch, as the engine) by V tile and warps.

Qwen3.6-27B TP=2 shapes (HV 24, K = V = 128), a DDTree of 64 nodes per request, paths of 1 and 16 nodes; us per
layer (CUDA graphs of 2 launches). The package's default is BV 32, 4 warps. Each variant's pool must equal the
default's after one commit from the same pool.
"""

import torch

from benchmarks.kernels.bench_tree_gdn import LAYERS, verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import stack_contexts
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_commit_triton, tree_gdn_verify_triton


def main() -> None:
    print(torch.cuda.get_device_name())
    for R in (1, 8):
        inputs, anc, _ = verify_inputs(R, 64, "ddtree")
        pool, slots = inputs[7], inputs[8]
        _, ctx = tree_gdn_verify_triton(*inputs, ancestor_mask=anc)
        ctxs = stack_contexts([ctx] * LAYERS)
        pools = pool[None].repeat(LAYERS, 1, 1, 1, 1)
        for path in (1, 16):
            accepted = torch.full((R, 16), -1, device="cuda", dtype=torch.long)
            accepted[:, :path] = torch.arange(path, device="cuda")  # node ids along some root path: a chain prefix
            if path > 1:  # a real root path: the deepest node's ancestors
                deepest = anc[0].sum(1).argmax()
                nodes = anc[0, deepest].nonzero().flatten()[:16]
                accepted[:] = -1
                accepted[:, : nodes.numel()] = nodes
            ref = pools.clone()
            tree_gdn_commit_triton(ref, slots, ctxs, accepted)
            row = []
            for BV, warps in [(32, 4), (16, 4), (16, 2), (32, 2), (32, 8), (64, 4), (64, 8), (128, 4), (128, 8)]:
                once = pools.clone()
                tree_gdn_commit_triton(once, slots, ctxs, accepted, BV=BV, num_warps=warps)  # (num_warps: a parameter added for this sweep only)
                same = torch.equal(once, ref)
                work = pools.clone()
                us = graph_us(lambda: tree_gdn_commit_triton(work, slots, ctxs, accepted, BV=BV, num_warps=warps), reps=2)
                row.append(f"BV{BV}/w{warps} {us / LAYERS:5.2f}{'' if same else ' DIFF'}")
            print(f"R={R} path {int((accepted[0] >= 0).sum())}: " + "  ".join(row), flush=True)


if __name__ == "__main__":
    main()
