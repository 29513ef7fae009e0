#!/usr/bin/env bash
# Session 20, call 5 (carry ab; about 6 minutes): the path walk's block loop software-pipelined (tl.range num_stages:
# the next block's loads go out as cp.async copies before this block is reduced). Trees, from the CPU machine:
#   ab/main: HEAD (ed19ee5); ab/st2: the working tree (STAGES = 2: at R = 8, LA 4, two [4, 8192] blocks a span, both
#   in flight); ab/st2b4k: MAX_BLOCK = 8192 (four [4, 4096] blocks a span), 2 stages; ab/st3b4k: the same, 3 stages.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 230 python3 benchmarks/ab_trees.py walk main=ab/main st2=ab/st2 st2b4k=ab/st2b4k st3b4k=ab/st3b4k --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
for t in st2 st2b4k; do mkdir -p $L/$t
  PYTHONPATH=$PWD/ab/$t:$PWD timeout 60 python3 benchmarks/bench_ddtree.py --requests 8 --budgets 64 --out $L/$t > $L/ddtree_$t.log 2>&1; echo $t rc $?
done
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py -k "walk" > $L/tests_walk.log 2>&1; echo tests rc $?
echo "== summary"
python3 -c "
import json
for c in json.load(open('$L/ab_trees_walk.json')):
    u = c['us']; print(f\"{c['case']:34s}\", '  '.join(f'{k}:{v:.1f}' for k, v in u.items() if 'LA4' in k or 'LA8' in k))"
tail -1 $L/ddtree_st2.log; tail -1 $L/ddtree_st2b4k.log; tail -1 $L/tests_walk.log
