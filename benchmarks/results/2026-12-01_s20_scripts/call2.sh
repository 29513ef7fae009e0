#!/usr/bin/env bash
# Session 20, call 2 (no carry; about 8 minutes), with walk_native_max.patch and vocab_exp2.patch merged in the
# working tree: the chunk statistics by entries a program and warps (vocab_sweep.py), the walk / vocabulary GPU tests,
# the CUDA engine test, then bench_ddtree's build + accept table for README.
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s20_scripts
timeout 90 python3 $D/vocab_sweep.py > $L/vocab_sweep.log 2>&1; echo sweep rc $?
timeout 180 python3 -m pytest -q tests/test_triton_tree_kernels.py -k "walk or draft or argmax" > $L/tests_walk_vocab.log 2>&1; echo tests rc $?
timeout 150 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda.log 2>&1; echo engine rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
echo "== summary"; cat $L/vocab_sweep.log | cut -c1-400; tail -2 $L/tests_walk_vocab.log; tail -1 $L/engine_cuda.log; tail -12 $L/ddtree.log
