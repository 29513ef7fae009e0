#!/usr/bin/env bash
# Session 20, call 3 (carry ab; about 7 minutes): the path walk with the next round's likely rows prefetched into L2
# before each round's barrier (prefetch.global.L2, no registers held). Trees, from the CPU machine:
#   rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main   # HEAD: ed19ee5, no prefetch
#   for t in pf1 pf2 pf1s; do mkdir -p ab/$t && git ls-files sglang_dflash | tar -cf - -T - | tar -x -C ab/$t; done
#   (the working tree: PREFETCH_BLOCKS = 1, PREFETCH_BYTES = 128); ab/pf2: PREFETCH_BLOCKS = 2; ab/pf1s: PREFETCH_BYTES = 32
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 230 python3 benchmarks/ab_trees.py walk main=ab/main pf1=ab/pf1 pf2=ab/pf2 pf1s=ab/pf1s --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
for t in pf1 pf2; do mkdir -p $L/$t
  PYTHONPATH=$PWD/ab/$t:$PWD timeout 60 python3 benchmarks/bench_ddtree.py --requests 8 --budgets 64 --out $L/$t > $L/ddtree_$t.log 2>&1; echo $t rc $?
done
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py -k "walk" > $L/tests_walk.log 2>&1; echo tests rc $?
echo "== summary"; tail -8 $L/ab_walk.log | cut -c1-330; tail -1 $L/ddtree_pf1.log; tail -1 $L/ddtree_pf2.log; tail -1 $L/tests_walk.log
