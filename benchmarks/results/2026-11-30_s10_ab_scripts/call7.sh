#!/bin/bash
# Session 10, call 7: the greedy walk by lookahead rows per round; its GPU tests.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
echo "== walk tests"; timeout 60 python3 -m pytest -q -x tests/test_triton_tree_kernels.py -k greedy_walk > $L/tests.log 2>&1; echo RC=$?; tail -1 $L/tests.log
echo "== lookahead"; timeout 150 python3 abtmp/walk_la.py 2>&1 | tee $L/walk_la.log | grep -v Warn
cd $OUT && tar czf s10_call7.tar.gz logs && rm -rf logs
