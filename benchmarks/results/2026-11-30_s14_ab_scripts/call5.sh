#!/usr/bin/env bash
# Session 14, call 5: the blocked tree-GDN verify with the root's row summed in the block's own key loop (ab/root, the
# working tree) against HEAD (ab/main), same run; GPU tests of the working tree's tree-GDN kernels first.
set -u
L=$OUT
timeout 170 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py > $L/tests.log 2>&1; echo rc $?
timeout 300 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py gdn main=ab/main root=ab/root --out $L > $L/ab_gdn.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests.log; grep -v "^{" $L/ab_gdn.log | tail -14
