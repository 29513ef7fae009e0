#!/usr/bin/env bash
# Session 17: the blocked GDN verify's level loop without the per-level row select, its first step peeled (so that
# Triton converts the loop-invariant A operands once, outside the loop), ab/new, against HEAD (ab/main); then the GDN
# kernel's GPU tests. First, on the CPU machine:
#   rm -rf ab && mkdir -p ab/main ab/new && git archive HEAD sglang_dflash | tar -x -C ab/main && cp -r sglang_dflash ab/new/
#   rm -rf ab/*/sglang_dflash/assets/tiny-pair
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py gdn main=ab/main new=ab/new --out $L > $L/ab_gdn.log 2>&1; echo rc $?
timeout 150 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place" > $L/tests_gdn.log 2>&1; echo rc $?
echo "== summary"; tail -14 $L/ab_gdn.log | cut -c1-200; tail -1 $L/tests_gdn.log
