#!/usr/bin/env bash
# Session 23, call 5 (no carry): issue 2's whole benchmark grid on the final code (R in {1, 8, 32}, B in {16, 64, 256},
# L = 15, vocabulary 248,320, CUDA-graph timed; the CPU tree / acceptance check first).
set -u
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/bench_ddtree.py --out $OUT > $OUT/ddtree.log 2>&1; echo ddtree rc $?
tail -14 $OUT/ddtree.log | grep -v '^{'
