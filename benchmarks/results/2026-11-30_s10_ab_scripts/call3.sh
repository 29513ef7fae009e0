#!/bin/bash
# Session 10, call 3: tree-GDN v2 (acc-chained split dots, paired levels) vs HEAD; tree attention new vs old with
# the mask packed once; GDN kernel tests on the GPU.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
echo "== gdn A/B"; timeout 200 python3 abtmp/gdn_ab.py 2>&1 | tee $L/gdn_ab.log | grep -v Warn
echo "== attention A/B"; timeout 150 python3 abtmp/attn_ab.py 2>&1 | tee $L/attn_ab.log | grep -v "Warn\|warn_once\|^ \+0.0 "
echo "== gdn tests"; timeout 120 python3 -m pytest -q -x tests/test_tree_gdn_kernel.py > $L/gdn_tests.log 2>&1; echo RC=$?; tail -2 $L/gdn_tests.log
cd $OUT && tar czf s10_call3.tar.gz logs && rm -rf logs
