#!/usr/bin/env bash
# Session 30, call 6 (no carry): attn_merge_tiles_ab.py (49a3828 against the 8-row merge tiles for small grids).
set -u
# _old.py (49a3828's file) made on the CPU machine: the device's git lacks this session's commits
PYTHONPATH=$PWD timeout 120 python3 benchmarks/results/2026-12-04_s30_scripts/attn_merge_tiles_ab.py > $OUT/call6_attn_merge_tiles_ab.log 2>&1
echo ab rc $?

grep -v -i warn $OUT/call6_attn_merge_tiles_ab.log | tail -n 11
