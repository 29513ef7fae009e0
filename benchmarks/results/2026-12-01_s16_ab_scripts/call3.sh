#!/usr/bin/env bash
# Session 16, call 3: the gather threshold just above a block (gather_threshold.py), then session 15's half-dots A/B
# (its ab_half_dots.sh: needs the ab/ trees built on the CPU machine first, see its header).
set -u
L=$OUT
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s16_ab_scripts/gather_threshold.py > $L/gather_threshold.log 2>&1; echo rc $?
bash benchmarks/results/2026-12-01_s15_ab_scripts/ab_half_dots.sh
cat $L/gather_threshold.log
