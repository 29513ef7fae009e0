#!/usr/bin/env bash
# For session 19's first call (written in session 18, not run). About 6 minutes, carry ab. The GDN gates (softplus,
# sigmoid) moved after the key loop (gdn_gates_late.patch: the key loop's loads are then issued at SASS instruction
# ~380 instead of ~1,030) and, on top, softplus by ex2.approx + lg2.approx (gdn_fast_gates.patch: tl.log is a
# ~20-instruction polynomial, computed for 16 nodes a thread in the [64] column layout), against HEAD, same run,
# blocked and gather kernels; then the GDN GPU tests and the CUDA engine test with gdn_fast_gates.patch.
# SASS (sass_loops.py, Triton 3.8, sm_90a), HEAD -> late -> fast: R = 1 x 64 3,832 -> 3,816 -> 3,432 instructions
# (spills 40 -> 16 -> 16 B); R = 8 x 64 4,752 -> 4,648 -> 4,224 (296 -> 88 -> 80 B); 16-node chain 1,440 -> 1,480 ->
# 1,432 (231 -> 128 registers with fast); sm_86 x 32 2,496 -> 2,392. CPU tests pass with either (the interpreter
# keeps tl.log; the inline PTX runs only on the GPU). First, on the CPU machine:
#   D=benchmarks/results/2026-12-01_s18_scripts; rm -rf ab && mkdir -p ab/main && git archive HEAD sglang_dflash | tar -x -C ab/main \
#     && rm -rf ab/main/sglang_dflash/assets/tiny-pair && cp -r ab/main ab/late && cp -r ab/main ab/fast \
#     && patch -s -p1 -d ab/late < $D/gdn_gates_late.patch && patch -s -p1 -d ab/fast < $D/gdn_fast_gates.patch
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s18_scripts
timeout 240 python3 benchmarks/ab_trees.py gdn main=ab/main late=ab/late fast=ab/fast --out $L > $L/ab_gdn_gates.log 2>&1; echo ab rc $?
git apply $D/gdn_fast_gates.patch; echo patch rc $?
timeout 200 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place or 16bit or gather" > $L/tests_gdn_fast.log 2>&1; echo tests rc $?
timeout 150 python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/engine_cuda_fast.log 2>&1; echo engine rc $?
echo "== summary"; tail -14 $L/ab_gdn_gates.log | cut -c1-200; tail -2 $L/tests_gdn_fast.log; tail -1 $L/engine_cuda_fast.log
