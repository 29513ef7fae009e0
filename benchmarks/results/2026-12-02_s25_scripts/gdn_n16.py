"""Session 25, call 4: why a 63- or 40-node tree verifies ~2.4 us slower than a 64-node one (R = 1, H200).

One 64-node DDTree's inputs, verified whole and truncated to its first 63 / 48 / 40 nodes (a prefix of a tree is a
tree; same data, same block of 64 rows), each with the kernel as shipped and with Triton told not to specialise on
N (`do_not_specialize`: N's divisibility by 16 is then unknown to the compiler at every N). us, graph-timed.
"""

import torch
import triton

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_build import ancestors
from sglang_dflash.kernels.tree_gdn import tree_gdn as tg

shipped = tg._tree_gdn_fused_kernel
unspecialised = triton.jit(do_not_specialize=["N"])(shipped.fn)
(q, k, v, a, b, A_log, dt_bias, pool, slots, parents), _, _ = verify_inputs(1, 64, "ddtree", "cuda")
print(torch.cuda.get_device_name(), triton.__version__)
for n in (64, 63, 48, 40):
    cut = [t[:, :n].contiguous() for t in (q, k, v, a, b)]
    par = parents[:, :n].contiguous()
    depth = int(ancestors(par, n - 1).sum(-1).max()) - 1
    mask = tg.aligned_ancestor_mask(ancestors(par, depth))
    row = []
    for name, kernel in (("shipped", shipped), ("N unspecialised", unspecialised)):
        tg._tree_gdn_fused_kernel = kernel
        f = lambda: tg.tree_gdn_verify_triton(*cut, A_log, dt_bias, pool, slots, par, ancestor_mask=mask, max_depth=depth)  # noqa: E731
        row.append(f"{name} {graph_us(f, reps=10):6.2f}")
    tg._tree_gdn_fused_kernel = shipped
    print(f"N={n:3d} depth {depth}: " + "  ".join(row), flush=True)
