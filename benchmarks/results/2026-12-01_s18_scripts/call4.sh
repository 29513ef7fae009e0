#!/usr/bin/env bash
# Session 18, call 4: the working tree (wt: gdn_exp2.patch + the 16-bit key-loop dots in the blocked and gather GDN
# verify) against HEAD (main) and wt without exp2 (bf16n, blocked kernel only), same run, with the gather cases; then
# the working tree's GDN and attention GPU tests and the CUDA engine test.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 240 python3 benchmarks/ab_trees.py gdn main=ab/main wt=ab/wt bf16n=ab/bf16n --out $L > $L/ab_gdn4.log 2>&1; echo rc $?
timeout 170 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place or 16bit or gather" > $L/tests_gdn.log 2>&1; echo rc $?
timeout 150 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda.log 2>&1; echo engine rc $?
echo "== summary"; tail -14 $L/ab_gdn4.log | cut -c1-200; tail -2 $L/tests_gdn.log; tail -1 $L/engine_cuda.log
