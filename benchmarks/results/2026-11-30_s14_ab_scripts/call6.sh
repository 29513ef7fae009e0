#!/usr/bin/env bash
# Session 14, call 6: the greedy walk with 4 rows a round by default (ab/la4) and also without the per-call memset of
# its barrier counters (ab/la4z, the working tree: the last program zeroes them), against HEAD (ab/main, LA 2), in
# the whole build + accept pipeline; GPU tests of the working tree's walk first.
set -u
L=$OUT
timeout 120 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_triton_tree_kernels.py > $L/tests.log 2>&1; echo rc $?
for t in main la4 la4z; do
  mkdir -p $L/$t
  timeout 80 env PYTHONPATH=$PWD/ab/$t:$PWD python3 benchmarks/bench_ddtree.py --out $L/$t --requests 1,8 --budgets 16,64 > $L/ddtree_$t.log 2>&1; echo rc $?
done
echo "== summary"; tail -1 $L/tests.log; for t in main la4 la4z; do echo "-- $t"; grep -v "^{" $L/ddtree_$t.log | tail -5; done
