#!/usr/bin/env bash
# For session 24's first call (written in session 23, not run: no device time left; no carry, ab/ as untracked
# files, about 2 minutes). The deferred GDN commit again, in the form the first try's ptxas report asks for:
# pending_prologue.patch applies the previous step's accepted path to each program's S0 tile in a pass before the key
# loop (load, one [BK, 16] x [16, BV] dot, store, then a barrier; the key loop reads the new tile back, an L2 hit)
# instead of inside the key loop (pending_commit.patch, call 6: R = 8 x 64 65.1 us against 45.1 for verify + commit;
# ptxas sm_90a at R = 8, BV 64: 472 B of spills against HEAD's 80; the prologue form (its two chunks unrolled, each
# loading its own operands): 104; at R = 1, BV 32: 92, 16 for HEAD, 32 for the prologue (80 with a rolled loop)).
# CPU-checked: check_pending.py ab/pend2 (TRITON_INTERPRET=1) passes. What it must beat, per layer: verify + the
# 48-layer commit's share, 12.50 us at R = 1 x 64 and 45.11 at R = 8 x 64 (call 6). At R = 8 the commit is 7.76 us
# of bandwidth (25 MB) that the verify's other programs could hide. First, on the CPU machine:
#   D=benchmarks/results/2026-12-01_s23_scripts; rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash \
#     | tar -x -C ab/main && rm -rf ab/main/sglang_dflash/assets/tiny-pair && cp -r ab/main ab/pend \
#     && cp -r ab/main ab/pend2 && patch -s -p1 -d ab/pend < $D/pending_commit.patch \
#     && patch -s -p1 -d ab/pend2 < $D/pending_prologue.patch
set -u
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s23_scripts
timeout 200 python3 $D/pending_ab.py ab/main ab/pend ab/pend2 > $OUT/pending_ab.log 2>&1; echo ab rc $?
tail -8 $OUT/pending_ab.log
