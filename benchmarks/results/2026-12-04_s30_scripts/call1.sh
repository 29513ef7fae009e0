#!/usr/bin/env bash
# Session 30, call 1 (carry [".whl"]): attn_lazy_ab.py (HEAD 67321c8 against the working tree's attention), the
# attention's GPU tests and the engine's CUDA greedy generate, then bench_tree_attention with its peers.
set -u
git show 67321c8:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
PYTHONPATH=$PWD timeout 150 python3 benchmarks/results/2026-12-04_s30_scripts/attn_lazy_ab.py > $OUT/call1_attn_lazy_ab.log 2>&1
echo ab rc $?
rm sglang_dflash/kernels/tree_attention/_old.py
timeout 200 python3 -m pytest -q -x tests/test_tree_attention.py tests/test_engine.py -k "attention or cuda_generate" > $OUT/call1_tests.log 2>&1
echo tests rc $?; tail -3 $OUT/call1_tests.log
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/gpu/flashinfer_python-*.whl .whl/gpu/apache_tvm_ffi-*.whl > $OUT/pip.log 2>&1; echo pip rc $?
PYTHONPATH=$PWD:/tmp/site timeout 170 python3 benchmarks/kernels/bench_tree_attention.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $OUT/call1_bench_tree_attention.log 2>&1
echo bench rc $?; tail -n 16 $OUT/call1_bench_tree_attention.log | cut -c1-200
grep -v -i warn $OUT/call1_attn_lazy_ab.log | tail -n 30
