#!/usr/bin/env bash
# For session 18 (written in session 17, not run: no device time left). The tree attention's partial outputs stored
# without normalising (the merge divides once by the weighted sum of the l's, and no longer loads each split's l in
# its loop): `attention_unnormalised.patch` against HEAD, same run; then the attention's GPU tests with it and the
# bench. SASS (sass_loops.py, Triton 3.8, sm_90a, N = 64): the attention kernel 2,024 -> 1,872 instructions (the
# epilogue's 128 multiplies a thread and the reciprocal gone), key loop unchanged. CPU: tests/test_tree_attention.py
# passes. About 3 minutes, no carry. First, on the CPU machine:
#   rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main && rm -rf ab/main/sglang_dflash/assets/tiny-pair \
#     && cp -r ab/main ab/unnorm && patch -p1 -d ab/unnorm < benchmarks/results/2026-12-01_s17_scripts/attention_unnormalised.patch
# then: run(command="bash benchmarks/results/2026-12-01_s17_scripts/attention_unnormalised_call.sh")
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 150 python3 benchmarks/ab_trees.py attention main=ab/main unnorm=ab/unnorm --out $L > $L/ab_attention.log 2>&1; echo rc $?
git apply benchmarks/results/2026-12-01_s17_scripts/attention_unnormalised.patch; echo patch rc $?
timeout 60 python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
timeout 90 python3 benchmarks/kernels/bench_tree_attention.py > $L/bench_tree_attention.log 2>&1; echo rc $?
echo "== summary"; tail -3 $L/ab_attention.log | cut -c1-200; tail -1 $L/tests_attention.log
grep -E '^\{' $L/bench_tree_attention.log | cut -c1-200
