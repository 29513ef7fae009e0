#!/usr/bin/env bash
# For session 15's first GPU call (written in session 14, not run: its device time ran out). The blocked and the gather
# tree-GDN verify built with wgmma (Triton's default on Hopper) and with mma.sync (DISABLE_MMA_V3=1), about 3 minutes:
#   run(command="bash benchmarks/results/2026-11-30_s14_ab_scripts/run_next_session.sh")
set -u
L=$OUT
P=benchmarks/results/2026-11-30_s14_ab_scripts/mma_v2_probe.py
timeout 90 env PYTHONPATH=$PWD python3 $P > $L/wgmma.log 2>&1; echo rc $?
timeout 90 env DISABLE_MMA_V3=1 PYTHONPATH=$PWD python3 $P > $L/mma_sync.log 2>&1; echo rc $?
echo "== summary"; grep -h "R=" $L/wgmma.log $L/mma_sync.log
