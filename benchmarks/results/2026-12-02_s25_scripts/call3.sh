#!/usr/bin/env bash
# Session 25, call 3: the GDN verify reading the ancestor mask's padded rows as whole 16-byte words where N is not a
# multiple of 16 (63 nodes; 17, 33, 65 after the root): A/B against HEAD in one process (build ab/main from HEAD and
# ab/new from the working tree first, as benchmarks/ab_trees.py says), then the GDN kernel tests and the CUDA engine
# test on the new code. No carry.
set -u
export PYTHONPATH=$PWD
timeout 240 python3 benchmarks/ab_trees.py gdn main=ab/main new=ab/new --out $OUT > $OUT/ab_gdn.log 2>&1; echo ab rc $?
timeout 200 python3 -m pytest -q -x tests/test_tree_gdn_kernel.py > $OUT/gpu_tests_tree_gdn.log 2>&1; echo tests rc $?
timeout 120 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $OUT/engine_cuda.log 2>&1; echo engine rc $?
tail -n 3 $OUT/gpu_tests_tree_gdn.log; tail -n 3 $OUT/engine_cuda.log
cat $OUT/ab_gdn.log | cut -c1-200
