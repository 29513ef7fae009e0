#!/bin/bash
# Session 10, call 8: the greedy walk with the lookahead chain's rows loaded together, by rows per round.
export PYTHONPATH=$PWD
L=$OUT/logs; mkdir -p $L
timeout 100 python3 abtmp/walk_la.py 2>&1 | tee $L/walk_la2.log | grep -v Warn
cd $OUT && tar czf s10_call8.tar.gz logs && rm -rf logs
