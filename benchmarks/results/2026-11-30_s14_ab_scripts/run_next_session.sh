#!/usr/bin/env bash
# For session 15's first GPU call (written in session 14, not run: its device time ran out). The blocked and the gather
# tree-GDN verify built with wgmma (Triton's default on Hopper) and with mma.sync (DISABLE_MMA_V3=1), then the CUDA
# engine test, about 6 minutes:
#   run(command="bash benchmarks/results/2026-11-30_s14_ab_scripts/run_next_session.sh")
set -u
L=$OUT
P=benchmarks/results/2026-11-30_s14_ab_scripts/mma_v2_probe.py
timeout 90 env PYTHONPATH=$PWD python3 $P > $L/wgmma.log 2>&1; echo rc $?
timeout 90 env DISABLE_MMA_V3=1 PYTHONPATH=$PWD python3 $P > $L/mma_sync.log 2>&1; echo rc $?
# the CUDA engine test, last run before the walk's four-row default (session 14, call 1)
timeout 200 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
echo "== summary"; grep -h "R=" $L/wgmma.log $L/mma_sync.log; tail -1 $L/tests_engine.log
