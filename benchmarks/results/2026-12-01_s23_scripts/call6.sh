#!/usr/bin/env bash
# Session 23, call 6 (no carry; ab/ as untracked files): the GDN commit deferred into the next step's verify
# (pending_commit.patch, a prototype, CPU-checked by check_pending.py under TRITON_INTERPRET=1), timed against
# HEAD's verify + commit. First, on the CPU machine:
#   D=benchmarks/results/2026-12-01_s23_scripts; rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash \
#     | tar -x -C ab/main && rm -rf ab/main/sglang_dflash/assets/tiny-pair && cp -r ab/main ab/pend \
#     && patch -s -p1 -d ab/pend < $D/pending_commit.patch
set -u
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s23_scripts
timeout 150 python3 $D/pending_ab.py ab/main ab/pend > $OUT/pending_ab.log 2>&1; echo ab rc $?
cat $OUT/pending_ab.log | tail -8
