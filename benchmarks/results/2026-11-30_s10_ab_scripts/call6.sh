#!/bin/bash
# Session 10, call 6: the GDN default tile rule; attention merge variants; GPU tests of both kernels.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
echo "== tests"; timeout 80 python3 -m pytest -q -x tests/test_tree_attention.py tests/test_tree_gdn_kernel.py > $L/tests.log 2>&1; echo RC=$?; tail -1 $L/tests.log
echo "== gdn default tile"; timeout 80 python3 abtmp/gdn_default.py 2>&1 | tee $L/gdn_default.log | grep -v Warn
echo "== attention merge"; timeout 80 python3 abtmp/attn_ab2.py 2>&1 | tee $L/attn_ab2.log | grep -v "Warn\|warn_once"
cd $OUT && tar czf s10_call6.tar.gz logs && rm -rf logs
