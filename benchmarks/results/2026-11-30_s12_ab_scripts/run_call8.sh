#!/usr/bin/env bash
# session 12, GPU call 8: accept_greedy's two GPU paths at small R x N
set -u
L=$OUT
timeout 110 env PYTHONPATH=$PWD python3 ab/walk_threshold.py > $L/walk_threshold.log 2>&1; echo rc $?
cat $L/walk_threshold.log
