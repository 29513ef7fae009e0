#!/usr/bin/env bash
# Prepared in session 25 (not run): after next_call1.sh, with the same ab/ trees and no carry: the R = 8 verify by
# V tile for HEAD and for nodes_constexpr.patch (gdn_r8_bv.py). About 2 minutes.
set -u
for t in main new; do
  PYTHONPATH=$PWD/ab/$t:$PWD timeout 120 python3 benchmarks/results/2026-12-02_s25_scripts/gdn_r8_bv.py > $OUT/gdn_r8_bv_$t.log 2>&1
  echo "$t rc $?"; cat $OUT/gdn_r8_bv_$t.log
done
