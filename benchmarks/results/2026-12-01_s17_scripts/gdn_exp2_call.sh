#!/usr/bin/env bash
# For session 18 (written in session 17, not run: no device time left). The blocked GDN verify's decay as ex2 of
# base-2 path sums (no `tl.exp` denormal guard: ~100 instructions a thread at 64 nodes) and the keys' norms folded
# into it once for W and -A (`gdn_exp2.patch`), against HEAD, same run; then the GDN kernel's GPU tests with it.
# SASS (sass_loops.py, Triton 3.8, sm_90a): R = 1 x 64 3,976 -> 3,760 instructions, R = 8 x 64 (BV 64) 4,920 ->
# 4,720, sm_86 x 32 2,504 -> 2,480; spills unchanged. CPU tests: tests/test_tree_gdn_kernel.py passes. About 4
# minutes, no carry. First, on the CPU machine:
#   rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main && rm -rf ab/main/sglang_dflash/assets/tiny-pair \
#     && cp -r ab/main ab/exp2 && patch -p1 -d ab/exp2 < benchmarks/results/2026-12-01_s17_scripts/gdn_exp2.patch
# then: run(command="bash benchmarks/results/2026-12-01_s17_scripts/gdn_exp2_call.sh")
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py gdn main=ab/main exp2=ab/exp2 --out $L > $L/ab_gdn.log 2>&1; echo rc $?
git apply benchmarks/results/2026-12-01_s17_scripts/gdn_exp2.patch; echo patch rc $?
timeout 150 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place" > $L/tests_gdn.log 2>&1; echo rc $?
echo "== summary"; tail -12 $L/ab_gdn.log | cut -c1-200; tail -1 $L/tests_gdn.log
