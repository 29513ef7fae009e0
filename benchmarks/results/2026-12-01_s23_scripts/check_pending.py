"""CPU check (TRITON_INTERPRET=1) of pending_commit.patch: a verify with the previous step's commit deferred into it
equals the commit (S0 <- e^{G_l} S0 + sum_j k_j u_j^T, applied in torch) followed by the reference verify, and leaves
that committed state in the pool. Run from the repository root: python3 check_pending.py ab/pend (a tree built as next_call1.sh says)"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.ab_trees import load_tree  # noqa: E402
from sglang_dflash.kernels.tree_gdn.naive import tree_gdn_verify_ref  # noqa: E402 (the same in every tree)

tree_gdn_verify_triton = load_tree(sys.argv[1]).gdn.tree_gdn_verify_triton

torch.manual_seed(0)
fails = 0
for R, N, HV, H, K, V, P in [(2, 13, 4, 2, 32, 32, 16), (1, 16, 2, 1, 16, 32, 16), (3, 7, 6, 3, 32, 16, 32)]:
    q, k = torch.randn(R, N, H, K), torch.randn(R, N, H, K)
    v, a, b = torch.randn(R, N, HV, V), torch.randn(R, N, HV), torch.randn(R, N, HV)
    A_log, dt_bias = torch.rand(HV) * 2 - 3, torch.randn(HV)
    pool = torch.randn(R + 2, HV, V, K) * 0.1
    slots = torch.tensor([R + 1, 0, 2][:R], dtype=torch.int32)
    slots[-1] = -1 if R == 3 else slots[-1]  # a dead slot: left alone
    parents = torch.tensor([[-1] + [int(torch.randint(0, i, (1,))) for i in range(1, N)] for _ in range(R)])
    pk = torch.nn.functional.normalize(torch.randn(R, P, H, K), dim=-1)
    pu = torch.randn(R, P, HV, V) * 0.3
    pu[:, P // 2 :] = 0  # a path shorter than P: its tail is zero
    peg = torch.rand(R, HV) * 0.9 + 0.1
    expect = pool.clone()
    for r in range(R):
        s = int(slots[r])
        if s < 0:
            continue
        kk = pk[r].repeat_interleave(HV // H, dim=1)  # [P, HV, K]
        expect[s] = peg[r][:, None, None] * pool[s] + torch.einsum("phv,phk->hvk", pu[r], kk)
    live = slots >= 0
    ref, _ = tree_gdn_verify_ref(q, k, v, a, b, A_log, dt_bias, expect.double(), slots, parents, dtype=torch.float64)
    work = pool.clone()
    out, _ = tree_gdn_verify_triton(q, k, v, a, b, A_log, dt_bias, work, slots, parents, pending=(pu, pk, peg), peel_root=False)
    err = ((out.double() - ref)[live].norm() / ref[live].norm()).item()
    perr = ((work - expect).norm() / expect.norm()).item()
    ok = err < 1e-5 and perr < 1e-6 and (R != 3 or torch.equal(work[1], pool[1]))
    fails += not ok
    print(f"R={R} N={N} HV={HV} H={H} K={K} V={V} P={P}: out rel {err:.1e}, pool rel {perr:.1e}", "ok" if ok else "FAIL")
    # a mutation: without the pending update the outputs must differ
    out2, _ = tree_gdn_verify_triton(q, k, v, a, b, A_log, dt_bias, pool.clone(), slots, parents, peel_root=False)
    assert ((out2.double() - ref)[live].norm() / ref[live].norm()).item() > 1e-3
sys.exit(fails)
