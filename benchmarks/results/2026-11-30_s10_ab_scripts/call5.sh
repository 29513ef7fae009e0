#!/bin/bash
# Session 10, call 5: tree attention with the one-load merge against 0f7fa73; GDN warps/tile at R = 8; ddtree table.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
echo "== tests"; timeout 60 python3 -m pytest -q -x tests/test_tree_attention.py > $L/tests.log 2>&1; echo RC=$?; tail -1 $L/tests.log
echo "== attention A/B"; timeout 110 python3 abtmp/attn_ab.py 2>&1 | tee $L/attn_ab.log | grep -v "Warn\|warn_once\|^ \+0.0 "
echo "== attention bench"; timeout 50 python3 benchmarks/kernels/bench_tree_attention.py > $L/attn_bench.log 2>&1; grep R $L/attn_bench.log
echo "== gdn R=8 sweep"; timeout 80 python3 abtmp/gdn_r8_sweep.py 2>&1 | tee $L/gdn_r8_sweep.log | grep -v Warn
echo "== ddtree"; timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; tail -14 $L/ddtree.log
cd $OUT && tar czf s10_call5.tar.gz logs && rm -rf logs
