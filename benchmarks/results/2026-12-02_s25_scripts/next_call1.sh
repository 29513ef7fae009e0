#!/usr/bin/env bash
# Prepared in session 25 for the next session (CPU-checked, not timed: the device time ran out). The GDN verify
# compiled for its node count (`nodes_constexpr.patch`: N a tl.constexpr, so the row masks of a whole block fold
# away): A/B against HEAD, then the GDN kernel tests on the patch, then bench_tree_gdn on it (150 s: its first cases).
# Before the call: rm -rf ab && mkdir -p ab/main ab/new && git archive HEAD sglang_dflash | tar -x -C ab/main &&
#   git archive HEAD sglang_dflash | tar -x -C ab/new && (cd ab/new && patch -p1 < ../../benchmarks/results/2026-12-02_s25_scripts/nodes_constexpr.patch) &&
#   rm -rf ab/*/sglang_dflash/assets/tiny-pair
# Carry: .whl/sglang-0.5.10.post1-py3-none-any.whl, .whl/fla_core-0.6.0-py3-none-any.whl (bench_tree_gdn's peers).
# About 9 minutes; the bench runs on the patched tree (PYTHONPATH=ab/new first).
set -u
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py gdn main=ab/main new=ab/new --out $OUT > $OUT/ab_gdn_constexpr.log 2>&1; echo ab rc $?
cat $OUT/ab_gdn_constexpr.log | cut -c1-160
PYTHONPATH=$PWD/ab/new:$PWD timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_tree_gdn_kernel.py > $OUT/gpu_tests_constexpr.log 2>&1; echo tests rc $?; tail -n 2 $OUT/gpu_tests_constexpr.log
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > /dev/null 2>&1
PYTHONPATH=$PWD/ab/new:$PWD:/tmp/site timeout 150 python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $OUT/bench_tree_gdn_constexpr.log 2>&1; echo bench rc $?
grep -v "^{" $OUT/bench_tree_gdn_constexpr.log | head -24 | cut -c1-160
