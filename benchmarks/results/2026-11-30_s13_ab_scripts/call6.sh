#!/usr/bin/env bash
# Session 13, call 6: the gather verify's coefficients once per QK head, A/B (ab/old = HEAD, ab/new = working tree).
set -u
L=$OUT
timeout 60 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "gather" > $L/tests.log 2>&1; echo tests rc $?
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_coeffs_ab.py > $L/gather_coeffs_ab.log 2>&1; echo rc $?
tail -1 $L/tests.log; cat $L/gather_coeffs_ab.log | grep -v Warning
