#!/usr/bin/env bash
# Session 25, call 1: the tree attention and tree conv benchmarks with SGLang 0.5.10.post1's own kernels as peers in
# the same run (its triton backend's target-verify attention, FlashInfer's custom-mask prefill as its flashinfer
# backend runs it, its tree-mode conv). Carry: .whl/sglang-0.5.10.post1-py3-none-any.whl,
# .whl/gpu/flashinfer_python-0.6.7.post3-py3-none-any.whl, .whl/gpu/apache_tvm_ffi-0.1.15.post2-*.whl.
set -u
export PYTHONPATH=$PWD:/tmp/site
W=.whl/sglang-0.5.10.post1-py3-none-any.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/gpu/flashinfer_python-*.whl .whl/gpu/apache_tvm_ffi-*.whl > $OUT/pip.log 2>&1; echo pip rc $?
which nvcc; nvcc --version | tail -1
timeout 60 python3 -c "import flashinfer, torch; print('flashinfer', flashinfer.__version__, torch.__version__)" > $OUT/flashinfer_import.log 2>&1; echo import rc $?; tail -3 $OUT/flashinfer_import.log
timeout 420 python3 benchmarks/kernels/bench_tree_attention.py $W > $OUT/bench_tree_attention.log 2>&1; echo attention rc $?
timeout 90 python3 benchmarks/kernels/bench_tree_conv.py $W > $OUT/bench_tree_conv.log 2>&1; echo conv rc $?
for f in bench_tree_attention bench_tree_conv; do echo "---- $f"; tail -n 12 $OUT/$f.log | cut -c1-400; done
