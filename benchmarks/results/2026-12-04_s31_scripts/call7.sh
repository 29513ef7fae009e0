#!/usr/bin/env bash
# Session 31, call 7 (no carry; deferred_commit.patch applied in the working tree): the prototype's test on the GPU,
# then deferred_commit_ab.py.
set -u
export PYTHONPATH=$PWD
S=benchmarks/results/2026-12-04_s31_scripts
git apply --check -R $S/deferred_commit.patch 2>/dev/null || git apply $S/deferred_commit.patch || exit 1  # applied once
timeout 120 python3 -m pytest -q $S/check_deferred_commit.py > $OUT/call7_test.log 2>&1; echo test rc $?; tail -n 1 $OUT/call7_test.log
timeout 240 python3 $S/deferred_commit_ab.py > $OUT/call7_ab.log 2>&1; echo ab rc $?
grep -v -i warn $OUT/call7_ab.log | tail -n 12
