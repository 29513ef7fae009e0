#!/usr/bin/env bash
# Prepared in session 26 (CPU-checked, not timed): where the 0.5-0.9 us that the per-request splits cost at a cache of
# the prefix's own length goes. Two candidates against HEAD, alone and together:
#   merge_ns_loop.patch  the merge loops over all S + 1 partials again, masked by the request's split count (HEAD
#                        loops up to the count, which it must load first)
#   sms_constexpr.patch  the SM count a constexpr: the split rule's division by it becomes a multiply
#                        (SASS sm_90a, R = 1 x 64: 2,008 -> 1,976 instructions; key loop unchanged, 751)
# Both pass tests/test_tree_attention.py on the CPU. No carry. About 2 minutes. Before the call:
#   rm -rf ab && for t in head ns sms both; do mkdir -p ab/$t && git archive HEAD sglang_dflash | tar -x -C ab/$t; done &&
#   (cd ab/ns && patch -p1 < ../../benchmarks/results/2026-12-02_s26_scripts/merge_ns_loop.patch) &&
#   (cd ab/sms && patch -p1 < ../../benchmarks/results/2026-12-02_s26_scripts/sms_constexpr.patch) &&
#   (cd ab/both && patch -p1 < ../../benchmarks/results/2026-12-02_s26_scripts/merge_ns_loop.patch &&
#    patch -p1 < ../../benchmarks/results/2026-12-02_s26_scripts/sms_constexpr.patch) && rm -rf ab/*/sglang_dflash/assets/tiny-pair
# Merge what wins at 1x without losing at 8x (the rows "cache 8x").
set -u
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py attention head=ab/head ns=ab/ns sms=ab/sms both=ab/both --out $OUT \
  > $OUT/ab_attention_overhead.log 2>&1
echo ab rc $?; cut -c1-190 $OUT/ab_attention_overhead.log
