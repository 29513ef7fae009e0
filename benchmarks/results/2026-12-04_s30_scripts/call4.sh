#!/usr/bin/env bash
# Session 30, call 4 (no carry): attn_sm86_tiles_ab.py (HEAD 67321c8 against the lazy rescale, A6000 tiles on the H200).
set -u
git show 67321c8:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
PYTHONPATH=$PWD timeout 150 python3 benchmarks/results/2026-12-04_s30_scripts/attn_sm86_tiles_ab.py > $OUT/call4_attn_sm86_tiles_ab.log 2>&1
echo ab rc $?
rm sglang_dflash/kernels/tree_attention/_old.py
grep -v -i warn $OUT/call4_attn_sm86_tiles_ab.log | tail -n 9
