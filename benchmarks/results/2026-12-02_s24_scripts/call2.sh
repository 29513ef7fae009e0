#!/usr/bin/env bash
# Session 24, call 2 (no carry; ab/{main,h1,h2,h3} as untracked trees): the blocked GDN verify with the loads that
# only the code after the key loop uses issued before it (h1: gates' a, b, A_log, dt_bias; h2: + v; h3: + the
# ancestor mask), against HEAD, same process; then the key loop at 128 columns (gdn_bk.py).
set -u
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-02_s24_scripts
timeout 300 python3 benchmarks/ab_trees.py gdn main=ab/main h1=ab/h1 h2=ab/h2 h3=ab/h3 --out $OUT > $OUT/gdn_hoist_ab.log 2>&1; echo ab rc $?
timeout 150 python3 $D/gdn_bk.py ab/main > $OUT/gdn_bk.log 2>&1; echo bk rc $?
cat $OUT/gdn_hoist_ab.log | cut -c1-200; cat $OUT/gdn_bk.log
