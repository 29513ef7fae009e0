#!/usr/bin/env bash
# Prepared in session 31 (not run): the merge in one pass with a running max (`merge_online.patch`, on 6eee46c)
# against HEAD's merge, then the attention's GPU tests and the engine's CUDA greedy generate with it. No carry; about
# 4 minutes. Prepare on the CPU machine first (the device's .git holds only the session's first commit):
#   git show HEAD:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
#   git apply benchmarks/results/2026-12-04_s31_scripts/merge_online.patch
# Why: call 9 (merge_steps_probe.py) timed the merge's steps alone at R = 1 x 64: the max over all splits before the
# weighted sum took it from about 4.5 to 7.7 us. Merge if it wins at every case of the table.
set -u
export PYTHONPATH=$PWD
timeout 150 python3 benchmarks/results/2026-12-04_s31_scripts/attention_ab.py HEAD "merge, running max" > $OUT/merge_online_ab.log 2>&1
echo ab rc $?
timeout 300 python3 -m pytest -q tests/test_tree_attention.py tests/test_engine.py -k "attention or cuda_generate" \
  > $OUT/merge_online_tests.log 2>&1
echo tests rc $?; tail -n 1 $OUT/merge_online_tests.log
grep -v -i warn $OUT/merge_online_ab.log | tail -n 13
