#!/usr/bin/env bash
# Session 19, call 4 (no carry; about 5 minutes): the GDN verify by register cap (gdn_regcap.py, the working tree with
# `register_cap`), then the GDN GPU tests.
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s19_scripts
timeout 240 python3 $D/gdn_regcap.py > $L/gdn_regcap.log 2>&1; echo regcap rc $?
timeout 200 python3 -m pytest -q tests/test_tree_gdn_kernel.py > $L/tests_gdn_regcap.log 2>&1; echo tests rc $?
echo "== summary"; cat $L/gdn_regcap.log; tail -2 $L/tests_gdn_regcap.log
