#!/usr/bin/env bash
# Session 31, call 8 (no carry): attention_ab.py (then named merge_peel_ab.py), then the attention's GPU tests.
# Prepare on the CPU machine (the device's .git holds only the session's first commit), from f27707e:
#   git show f27707e:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
#   git apply benchmarks/results/2026-12-04_s31_scripts/merge_peel.patch
set -u
export PYTHONPATH=$PWD
timeout 150 python3 benchmarks/results/2026-12-04_s31_scripts/attention_ab.py f27707e "merge peeled" > $OUT/call8_merge_peel_ab.log 2>&1
echo ab rc $?
timeout 170 python3 -m pytest -q tests/test_tree_attention.py > $OUT/call8_tests.log 2>&1; echo tests rc $?
tail -n 1 $OUT/call8_tests.log
grep -v -i warn $OUT/call8_merge_peel_ab.log | tail -n 13
