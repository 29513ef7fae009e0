#!/usr/bin/env bash
# Session 15, call 6: GPU tests of the key-loop rule (`key_loop`), then bench_tree_gdn with SGLang's kernel, then the CUDA
# engine test (greedy output against transformers').
set -u
L=$OUT
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > $L/pip.log 2>&1
timeout 120 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py > $L/tests.log 2>&1; echo rc $?
timeout 270 env PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo rc $?
timeout 170 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
ls $L
echo "== summary"; tail -1 $L/tests.log; tail -1 $L/tests_engine.log; sed -n '/two verify kernels/,/chains against/p' $L/bench_tree_gdn.log
