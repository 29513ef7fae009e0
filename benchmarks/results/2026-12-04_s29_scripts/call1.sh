#!/usr/bin/env bash
# Session 29, call 1 (no carry): attn_tiles_diag.py (old 4b00535 against HEAD), then the GPU tests not run since
# session 28's attention change: the attention kernel's tests and the engine's greedy generate against transformers.
set -u
git show 4b00535:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
PYTHONPATH=$PWD timeout 300 python3 benchmarks/results/2026-12-04_s29_scripts/attn_tiles_diag.py > $OUT/call1_attn_tiles_diag.log 2>&1
echo diag rc $?
rm sglang_dflash/kernels/tree_attention/_old.py
timeout 240 python3 -m pytest -q -x tests/test_tree_attention.py tests/test_engine.py -k "attention or cuda_generate" > $OUT/call1_tests.log 2>&1
echo tests rc $?; tail -3 $OUT/call1_tests.log
cat $OUT/call1_attn_tiles_diag.log
