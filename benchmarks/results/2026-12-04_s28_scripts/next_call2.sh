#!/usr/bin/env bash
# Prepared in session 28 (not run). Issue 3's three benchmarks on the current code, each with its peers in the same
# process: bench_tree_gdn (SGLang's tree-mode GDN kernel, fla's chain kernels), bench_tree_conv (SGLang's tree conv),
# bench_tree_attention (SGLang's triton backend and FlashInfer's custom-mask prefill, JIT-built with the machine's
# nvcc). Session 28 changed the attention's splits and the commit's loads; RESULTS' first table has session 26's
# figures. Carry [".whl"] (sglang and fla_core wheels, .whl/gpu's flashinfer and apache-tvm-ffi; where fla_core is
# missing: pip download --no-deps -d .whl fla-core==0.6.0 on the CPU machine first). About 8 minutes.
set -u
W=.whl/sglang-0.5.10.post1-py3-none-any.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl .whl/gpu/flashinfer_python-*.whl \
  .whl/gpu/apache_tvm_ffi-*.whl > $OUT/pip.log 2>&1; echo pip rc $?
export PYTHONPATH=$PWD:/tmp/site
timeout 260 python3 benchmarks/kernels/bench_tree_gdn.py $W > $OUT/bench_tree_gdn.log 2>&1; echo gdn rc $?
timeout 90 python3 benchmarks/kernels/bench_tree_conv.py $W > $OUT/bench_tree_conv.log 2>&1; echo conv rc $?
timeout 150 python3 benchmarks/kernels/bench_tree_attention.py $W > $OUT/bench_tree_attention.log 2>&1; echo attention rc $?
for f in bench_tree_gdn bench_tree_conv bench_tree_attention; do echo "---- $f"; tail -n 22 $OUT/$f.log | cut -c1-220; done
