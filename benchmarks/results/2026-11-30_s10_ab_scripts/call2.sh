#!/bin/bash
# Session 10, call 2: GPU tests, bench_ddtree --profile (new tree build), walk-poll A/B.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
echo "== tests"; timeout 200 python3 -m pytest -q -x tests/test_tree_attention.py tests/test_triton_tree_kernels.py tests/test_engine.py > $L/gpu_tests.log 2>&1; echo TESTS_RC=$? | tee -a $L/gpu_tests.log; tail -3 $L/gpu_tests.log
echo "== ddtree profile"; timeout 170 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --profile --out $L 2>&1 | tee $L/ddtree_profile.log | tail -30
echo "== walk poll A/B"; for t in main poll main poll; do if [ $t = poll ]; then P=abtmp/poll:$PWD; else P=$PWD; fi
  echo "-- $t"; PYTHONPATH=$P timeout 60 python3 benchmarks/bench_ddtree.py --requests 8 --budgets 64 2>&1 | tee -a $L/walk_ab_$t.log | grep "^   8 \|CPU"; done
cd $OUT && tar czf s10_call2.tar.gz logs && rm -rf logs
