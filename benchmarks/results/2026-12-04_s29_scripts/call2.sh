#!/usr/bin/env bash
# Session 29, call 2 (carry [".whl"]): attn_forced_diag.py, then session 28's next_call2.sh (issue 3's three
# benchmarks with their peers on the current code).
set -u
git show 4b00535:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
PYTHONPATH=$PWD timeout 90 python3 benchmarks/results/2026-12-04_s29_scripts/attn_forced_diag.py > $OUT/call2_attn_forced_diag.log 2>&1
echo diag rc $?
rm sglang_dflash/kernels/tree_attention/_old.py
bash benchmarks/results/2026-12-04_s28_scripts/next_call2.sh
grep -v Warn $OUT/call2_attn_forced_diag.log | grep -v warn_once
