#!/usr/bin/env bash
# Session 14, call 2: the gather solve's step on the shapes call 1 left open.
set -u
L=$OUT
timeout 300 env PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s14_ab_scripts/solve_step_rule.py > $L/solve_step_rule.log 2>&1; echo rc $?
echo "== summary"; grep -h "^R=" $L/solve_step_rule.log
