#!/usr/bin/env bash
# Session 13, call 5: the two-launch ancestor tables on the GPU (tests, time per step against the torch reference),
# the gather verify's tiling sweep, the walk's tests at 8 warps.
set -u
L=$OUT
echo "== gpu tests"
timeout 120 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "ancestor or gather" > $L/tests.log 2>&1; echo rc $?
timeout 90 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_triton_tree_kernels.py -k "walk" > $L/tests_walk.log 2>&1; echo rc $?
echo "== tables and gather sweep"; timeout 200 env PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_sweep.py > $L/gather_sweep.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests.log; tail -1 $L/tests_walk.log; cat $L/gather_sweep.log | cut -c1-400
