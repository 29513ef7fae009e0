#!/usr/bin/env bash
# Session 28, call 9 (run with QUICK=1 in the environment: the cases call 7 lost, and issue 3's).
# `attn_split_search.patch`: `key_splits` takes each wave count's candidate by a cost bound, max(waves, waves of one split) x (2 + tiles a split), so that a program runs 11
# integer divisions instead of 17, 6 of them per request, 4 of those in parallel (the same split counts: checked
# against bbbe27d's rule on 190,000 (tiles, groups, SMs) on the CPU; SASS before the first wgmma 1,188 -> 1,078, HEAD
# before the one-sequence change 957). Call 7 lost up to 1.1 us at one request over short prefixes with the splits
# cut as before; this asks whether the split search was it. No carry. Sides: bbbe27d (HEAD) / the patch.
set -u
git show bbbe27d:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_head.py
git apply benchmarks/results/2026-12-04_s28_scripts/attn_split_search.patch
PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s28_scripts/attn_splits_ab.py > $OUT/call9_attn_split_search_ab.log 2>&1
echo ab rc $?
timeout 200 python3 -m pytest -q tests/test_tree_attention.py 2>&1 | tail -2
cat $OUT/call9_attn_split_search_ab.log
