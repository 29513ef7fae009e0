#!/usr/bin/env bash
# Session 17: the tree attention with fewer instructions a key tile (ab/new) against HEAD (ab/main), same run, then
# the attention's GPU tests and the CUDA engine test with it. First, on the CPU machine:
#   rm -rf ab && mkdir -p ab/main ab/new && git archive HEAD sglang_dflash | tar -x -C ab/main && cp -r sglang_dflash ab/new/
set -u
L=$OUT
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py attention main=ab/main new=ab/new --out $L > $L/ab_attention.log 2>&1; echo rc $?
timeout 90 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
timeout 170 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests_attention.log; tail -1 $L/tests_engine.log; tail -4 $L/ab_attention.log | cut -c1-200
