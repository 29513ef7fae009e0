import sys, os, torch
sys.path.insert(0, os.getcwd())
os.environ.pop("TRITON_INTERPRET", None)
from benchmarks.kernels.ptxas_tree_gdn import recorded_launches, ptxas_report
from abtmp.gdn_split import verify_split1, verify_split2
HV, H, K = 24, 8, 128
e, bf16 = torch.empty, torch.bfloat16
for sm in (86, 90):
    for N in (64,):
        with recorded_launches(sm) as seen:
            q, v, g = e(1, N, H, K, dtype=bf16), e(1, N, HV, K, dtype=bf16), e(1, N, HV, dtype=bf16)
            mask = torch.zeros(1, N, N, dtype=torch.bool)
            for BV in (16, 32):
                verify_split1(q, q, v, g, g, e(HV), e(HV), e(2, HV, K, K), e(1, dtype=torch.long), mask, BV=BV, sync=torch.zeros(1 + HV, dtype=torch.int32))
                verify_split2(q, q, v, g, g, e(HV), e(HV), e(2, HV, K, K), e(1, dtype=torch.long), mask, BV=BV, tri_warps=BV // 2)
        for kernel, args, kw in seen:
            try:
                shared, info, warn = ptxas_report(kernel, args, kw, sm)
                print(sm, N, kernel.fn.__name__, kw.get("BV"), shared, info, warn, flush=True)
            except Exception as ex:
                print(sm, N, kernel.fn.__name__, kw.get("BV"), "FAIL", str(ex)[:300], flush=True)
