#!/usr/bin/env bash
# Session 30, call 2 (carry [".whl"]): the GPU tests of the attention (fused merge) and of the walk (its barrier now
# device.group_barrier), the engine's CUDA greedy generate, attn_fused_ab.py, then bench_tree_attention with peers.
set -u
# smoke first: a barrier that never opens would hang every later step
PYTHONPATH=$PWD timeout 60 python3 -c "
import torch, benchmarks.kernels.bench_tree_attention as b
from sglang_dflash.kernels.tree_attention import tree_attention
a = b.attention_inputs(1, 64, torch.Generator(device='cuda').manual_seed(1))[0]
for _ in range(3): o = tree_attention(*a)
torch.cuda.synchronize(); print('smoke ok', o.float().abs().mean().item())" > $OUT/call2_smoke.log 2>&1
rc=$?; echo smoke rc $rc; tail -2 $OUT/call2_smoke.log; [ $rc -eq 0 ] || exit 1
timeout 240 python3 -m pytest -q -x tests/test_tree_attention.py tests/test_triton_tree_kernels.py tests/test_engine.py -k "attention or walk or cuda_generate" > $OUT/call2_tests.log 2>&1
echo tests rc $?; tail -3 $OUT/call2_tests.log
git show 67321c8:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
PYTHONPATH=$PWD timeout 150 python3 benchmarks/results/2026-12-04_s30_scripts/attn_fused_ab.py > $OUT/call2_attn_fused_ab.log 2>&1
echo ab rc $?
rm sglang_dflash/kernels/tree_attention/_old.py
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/gpu/flashinfer_python-*.whl .whl/gpu/apache_tvm_ffi-*.whl > $OUT/pip.log 2>&1; echo pip rc $?
PYTHONPATH=$PWD:/tmp/site timeout 150 python3 benchmarks/kernels/bench_tree_attention.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $OUT/call2_bench_tree_attention.log 2>&1
echo bench rc $?; tail -n 5 $OUT/call2_bench_tree_attention.log | cut -c1-200
grep -v -i warn $OUT/call2_attn_fused_ab.log | tail -n 22
