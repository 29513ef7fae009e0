#!/usr/bin/env bash
# For session 20's first call (written in session 19, not run: no device time left). About 9 minutes, carry ab.
# Issue 2's build + accept (R = 8, B = 64, 15 deep: 119.0 us, target 100), CPU-checked patches against HEAD:
#  - walk_native_max.patch (ab/walk): the path walk takes each row's max in the logits' dtype (maxNum: NaN never wins),
#    not after a conversion to fp32 and a NaN select; the interpreter keeps the old form. SASS (Triton 3.8, sm_90a,
#    R = 8 x 65): inner loop 1,318 -> 932 instructions. Call 6's Nsight Compute: the walk executes 14.2 M
#    warp-instructions and is at 24% of DRAM bandwidth, its loads' first uses stall 19% of samples.
#  - walk_native_prefetch.patch (ab/walkpre; includes the first): also, before each round's barrier, each program
#    reduces the first block of its first span for the rows the next round reaches if the walk follows the whole chain
#    (kept in a small `held` buffer); the next round skips that block for those rows. 236 registers, no spills.
#  - vocab_exp2.patch (ab/vocab): the chunk statistics' e^(v - max) as one FFMA and ex2.approx (tl.exp's denormal
#    guard gone): 280 -> 216 SASS instructions. Call 6: the kernel is issue-bound (stall "not selected" 33%).
#  - vocab_atomic_slots.patch (ab/vocabat, on top of vocab_exp2): the row top-k's compaction takes each candidate's
#    slot from an atomic counter (zeroed by the chunk statistics) instead of two cumsum scans a tile. Untested idea:
#    the static count hardly changes (597 -> 626 instructions a tile, warp-aggregated atomics), the scans' barriers go.
# Then bench_ddtree at R = 8, B = 64 for HEAD and ab/both (walkpre + vocab), gdn_paired.py (HEAD's GDN verify in
# blocks of 64 with levels of two depths: R = 1 x 64 is 0.9 us over its target), and the GPU tests with all three
# patches (bf16 NaN rows included: test_greedy_walk_single_node_and_degenerate_rows).
# First, on the CPU machine:
#   D=benchmarks/results/2026-12-01_s19_scripts; rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main \
#     && rm -rf ab/main/sglang_dflash/assets/tiny-pair && for t in walk walkpre vocab vocabat both; do cp -r ab/main ab/$t; done \
#     && patch -s -p1 -d ab/walk < $D/walk_native_max.patch && patch -s -p1 -d ab/walkpre < $D/walk_native_prefetch.patch \
#     && patch -s -p1 -d ab/vocab < $D/vocab_exp2.patch && patch -s -p1 -d ab/vocabat < $D/vocab_exp2.patch \
#     && patch -s -p1 -d ab/vocabat < $D/vocab_atomic_slots.patch && patch -s -p1 -d ab/both < $D/walk_native_prefetch.patch \
#     && patch -s -p1 -d ab/both < $D/vocab_exp2.patch
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s19_scripts
timeout 170 python3 benchmarks/ab_trees.py walk main=ab/main walk=ab/walk walkpre=ab/walkpre --out $L > $L/ab_walk.log 2>&1; echo walk rc $?
timeout 100 python3 benchmarks/ab_trees.py build main=ab/main vocab=ab/vocab vocabat=ab/vocabat --out $L > $L/ab_build.log 2>&1; echo build rc $?
mkdir -p $L/head $L/both
PYTHONPATH=$PWD/ab/main:$PWD timeout 50 python3 benchmarks/bench_ddtree.py --requests 8 --budgets 64 --out $L/head > $L/ddtree_head.log 2>&1; echo head rc $?
PYTHONPATH=$PWD/ab/both:$PWD timeout 50 python3 benchmarks/bench_ddtree.py --requests 8 --budgets 64 --out $L/both > $L/ddtree_both.log 2>&1; echo both rc $?
timeout 50 python3 $D/gdn_paired.py > $L/gdn_paired.log 2>&1; echo paired rc $?
git apply $D/walk_native_prefetch.patch $D/vocab_exp2.patch $D/vocab_atomic_slots.patch; echo patch rc $?
timeout 110 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py > $L/tests_build_walk.log 2>&1; echo tests rc $?
echo "== summary"; tail -10 $L/ab_walk.log | cut -c1-250; tail -6 $L/ab_build.log | cut -c1-220; tail -4 $L/ddtree_head.log; tail -4 $L/ddtree_both.log; cat $L/gdn_paired.log; tail -2 $L/tests_build_walk.log
