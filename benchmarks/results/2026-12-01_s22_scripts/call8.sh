#!/usr/bin/env bash
# Session 22, call 8 (ab/ as untracked files): the GPU walk tests on the final code (4e7a28b's walk: the counters
# kept between calls with the per-round chain; call 4 ran them on `ctrch`), then the tree build's reduction tail in one
# step of [NN, NN] at B = 64 (`tree_build_tail.patch` with FB = min(128, NN); it spills at B = 256) against HEAD:
#   mkdir -p ab/main ab/tail128; git archive HEAD sglang_dflash into both; patch -p1 -d ab/tail128 < tree_build_tail.patch;
#   FB=min(128, NN) in ab/tail128's tree_build.py; rm -rf ab/*/sglang_dflash/assets/tiny-pair
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "walk or greedy" > $L/tests_walk.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/ab_trees.py build main=ab/main tail128=ab/tail128 --out $L > $L/ab_build.log 2>&1; echo build rc $?
echo "== summary"; tail -1 $L/tests_walk.log; grep "tree build" $L/ab_build.log
