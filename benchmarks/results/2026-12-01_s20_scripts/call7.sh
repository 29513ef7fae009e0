#!/usr/bin/env bash
# Session 20, call 7 (carry ab; about 5 minutes): the path walk with bf16 rows read as int32 pairs (max.bf16x2 per
# block, then the index from one more read of the block holding the span's maximum). Trees, from the CPU machine:
#   ab/main: HEAD (ed19ee5 and RESULTS commits); ab/pairs: the working tree (`PAIRS` in path_argmax.py).
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 150 python3 benchmarks/ab_trees.py walk main=ab/main pairs=ab/pairs --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py -k "walk" > $L/tests_walk.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
echo "== summary"
python3 -c "
import json
for c in json.load(open('$L/ab_trees_walk.json')):
    u = c['us']; print(f\"{c['case']:34s}\", '  '.join(f'{k}:{v:.1f}' for k, v in u.items()), ' '.join(set(c['check'].values())))"
tail -1 $L/tests_walk.log; tail -7 $L/ddtree.log
