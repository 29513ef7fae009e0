#!/usr/bin/env bash
# Prepared in session 30 (not run): the Gluon prototype's first GPU call (no carry; the device image's Triton 3.6).
# A smoke run of each build first (a wrong pipeline shows as NaN or a large difference, not as a hang), then
# gluon_ab.py: outputs against the package's kernel and the float64 reference, then timings. About 4 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/benchmarks/results/2026-12-04_s30_scripts/gluon
python3 -c "import triton; print('triton', triton.__version__)"
timeout 240 python3 -c "
import torch, benchmarks.kernels.bench_tree_attention as b
from gluon_attention import gluon_tree_attention
from sglang_dflash.kernels.tree_attention import tree_attention
a = b.attention_inputs(1, 64, torch.Generator(device='cuda').manual_seed(1))[0]
ref = tree_attention(*a, splits=22).float()
for BN, d in ((64, False), (32, False), (64, True), (32, True)):
    try:
        o = gluon_tree_attention(*a, splits=22, BN=BN, defer_pv=d).float(); torch.cuda.synchronize()
        print('smoke BN', BN, 'defer', d, 'max diff', (o - ref).abs().max().item(), 'nan', o.isnan().any().item(), flush=True)
    except Exception as e:
        print('smoke BN', BN, 'defer', d, type(e).__name__, str(e).splitlines()[-1][:300] if str(e) else '', flush=True)
" > $OUT/next1_smoke.log 2>&1
echo smoke rc $?; grep -v -i warn $OUT/next1_smoke.log | tail -6
timeout 240 python3 benchmarks/results/2026-12-04_s30_scripts/gluon/gluon_ab.py > $OUT/next1_gluon_ab.log 2>&1
echo ab rc $?; grep -v -i warn $OUT/next1_gluon_ab.log | grep -v "^ *[0-9.]* *x[0-9]" | tail -24
