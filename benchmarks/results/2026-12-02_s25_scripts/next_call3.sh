#!/usr/bin/env bash
# Prepared in session 25 (CPU-checked, not run): the tree attention with each request's prefix cut into the S splits
# on the device (`attention_device_splits.patch`) against HEAD, whose splits follow the cache's capacity T: at T equal
# to the prefix (the benchmark; expected equal) and at 2x / 8x (the engine's static cache, a server's pool
# table: HEAD leaves most splits empty there). No carry. Before the call:
#   rm -rf ab && mkdir -p ab/main ab/new && git archive HEAD sglang_dflash | tar -x -C ab/main &&
#   git archive HEAD sglang_dflash | tar -x -C ab/new &&
#   (cd ab/new && patch -p1 < ../../benchmarks/results/2026-12-02_s25_scripts/attention_device_splits.patch) &&
#   rm -rf ab/*/sglang_dflash/assets/tiny-pair
set -u
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py attention main=ab/main new=ab/new --out $OUT > $OUT/ab_attention_splits.log 2>&1
echo ab rc $?; cut -c1-160 $OUT/ab_attention_splits.log
PYTHONPATH=$PWD/ab/new:$PWD timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_tree_attention.py > $OUT/gpu_tests_attention_splits.log 2>&1
echo tests rc $?; tail -n 2 $OUT/gpu_tests_attention_splits.log
