#!/usr/bin/env bash
# For session 17 (written in session 16, not run: no device time left). The tree attention with the tree's keys
# folded into the split holding the last prefix key (no tree split of its own: at R = 1 x 64 over 4096 tokens its 6
# programs were a second wave after 132) and, where the grid is one wave, the merge inside the kernel after a
# barrier (`attention_fused.patch`), against HEAD, same run; then the attention's GPU tests and the CUDA engine test
# with the patch, bench_tree_attention and its sweep (tiles and splits; fused wherever the grid is one wave).
# About 5 minutes, no carry. First, on the CPU machine:
#   rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main && cp -r ab/main ab/fused \
#     && patch -p1 -d ab/fused < benchmarks/results/2026-12-01_s16_ab_scripts/attention_fused.patch
# then: run(command="bash benchmarks/results/2026-12-01_s16_ab_scripts/attention_fused_call.sh")
set -u
L=$OUT
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py attention main=ab/main fused=ab/fused --out $L > $L/ab_attention.log 2>&1; echo rc $?
P=benchmarks/results/2026-12-01_s16_ab_scripts  # this copy only: the patch and its tests
git apply $P/attention_fused.patch $P/attention_fused_tests.patch || { patch -p1 < $P/attention_fused.patch && patch -p1 < $P/attention_fused_tests.patch; }; echo patch rc $?
timeout 60 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
timeout 170 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
timeout 90 env PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_attention.py > $L/bench_tree_attention.log 2>&1; echo rc $?
timeout 90 env PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_attention.py --sweep > $L/bench_tree_attention_sweep.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests_attention.log; tail -1 $L/tests_engine.log; tail -6 $L/ab_attention.log | cut -c1-200
tail -14 $L/bench_tree_attention.log | cut -c1-200
grep sweep $L/bench_tree_attention_sweep.log | cut -c1-200
