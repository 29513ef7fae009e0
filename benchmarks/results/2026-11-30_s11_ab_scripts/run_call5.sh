#!/usr/bin/env bash
# session 11, GPU call 5: build + accept with the walk's default of 2 rows a round (bench_ddtree); tree attention
# tiles for small trees
set -u
cd "$(dirname "$0")/.."
L=$OUT
echo "== ddtree"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree.log 2>&1; echo rc $?
echo "== attn"; timeout 150 env PYTHONPATH=$PWD python3 ab/attn_small.py > $L/attn_small.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -7 $L/ddtree.log; cat $L/attn_small.log
