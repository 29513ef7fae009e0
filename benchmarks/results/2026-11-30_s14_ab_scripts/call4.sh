#!/usr/bin/env bash
# Session 14, call 4: the tree build's ancestor mask, three ways, same run: HEAD's walk up the parents by global
# loads (L + 1 dependent loads), pointer jumping over bit words in registers (ceil(log2(L + 1)) rounds of tl.gather),
# and HEAD's walk with the parents gathered from registers (tl.gather). Then bench_ddtree with each new variant.
# On the CPU machine first: ab/main = git archive HEAD, ab/jump = the working tree, ab/rwalk = HEAD with the walk's
# loads as tl.gather (see RESULTS.md, session 14).
set -u
L=$OUT
echo "== build"; timeout 200 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py build main=ab/main jump=ab/jump rwalk=ab/rwalk --out $L > $L/ab_build.log 2>&1; echo rc $?
for t in jump rwalk; do
  mkdir -p $L/$t
  echo "== bench_ddtree $t"; timeout 150 env PYTHONPATH=$PWD/ab/$t:$PWD python3 benchmarks/bench_ddtree.py --out $L/$t --requests 1,8 --budgets 16,64 > $L/ddtree_$t.log 2>&1; echo rc $?
done
echo "== summary"; grep -v "^{" $L/ab_build.log | tail -12; for t in jump rwalk; do echo "-- $t"; grep -v "^{" $L/ddtree_$t.log | tail -8; done
