import os, sys, torch
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.getcwd() + "/tests")
from tree_helpers import random_parents
from test_tree_gdn_kernel import gdn_inputs, rel_err
from sglang_dflash.kernels.tree_gdn import tree_gdn_verify_ref
from sglang_dflash.kernels.tree_build.naive import ancestors
from abtmp.gdn_split import verify_split1
for (R, N, H, HV, K, V, chain, aligned) in [(1, 64, 1, 2, 16, 16, False, True), (1, 40, 1, 1, 16, 16, True, True), (1, 64, 1, 1, 16, 16, True, True), (3, 7, 2, 6, 16, 32, False, False)]:
    gen = torch.Generator().manual_seed(N * 13 + HV)
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R + 2, gen=gen, dtype=torch.float32)
    if aligned:
        x["k"] = torch.randn(1, 1, H, K, generator=gen) + 0.05 * x["k"]
        x["b"], x["a"] = x["b"] + 6, x["a"] - 8
    slots = torch.randperm(R + 2, generator=gen)[:R]
    parents = random_parents(R, N, gen, chain)
    ref_o, _ = tree_gdn_verify_ref(**{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents, dtype=torch.float64)
    mask = ancestors(parents, N - 1)
    o, u, G = verify_split1(x["q"], x["k"], x["v"], x["a"], x["b"], x["A_log"], x["dt_bias"], x["state_pool"], slots, mask, BV=16)
    print(R, N, chain, aligned, f"{rel_err(o, ref_o.double()):.2e}")
from abtmp.gdn_split import verify_split2
for R, N, H, HV, K, V in [(3,7,2,6,16,32),(1,7,2,6,16,32),(3,7,1,1,16,16),(1,7,1,2,16,16),(1,7,2,2,16,16)]:
    gen = torch.Generator().manual_seed(N * 13 + HV)
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R + 2, gen=gen, dtype=torch.float32)
    slots = torch.randperm(R + 2, generator=gen)[:R]
    parents = random_parents(R, N, gen, False)
    ref_o, _ = tree_gdn_verify_ref(**{**x, "state_pool": x["state_pool"].double()}, slots=slots, parents=parents, dtype=torch.float64)
    mask = ancestors(parents, N - 1)
    for f in (verify_split1, verify_split2):
        o, u, G = f(x["q"], x["k"], x["v"], x["a"], x["b"], x["A_log"], x["dt_bias"], x["state_pool"], slots, mask, BV=16)
        print(R, N, H, HV, f.__name__, f"{rel_err(o, ref_o.double()):.2e}")
