#!/usr/bin/env bash
# session 12, GPU call 1: tree-GDN variants A/B (concat solve, low-o), build + accept with the mid case, probes
set -u
L=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $L/gpu.txt 2>&1
echo "== probe"; timeout 150 env PYTHONPATH=$PWD python3 ab/probe.py > $L/probe.log 2>&1; echo rc $?
echo "== ddtree"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree.log 2>&1; echo rc $?
echo "== ab gdn"; timeout 240 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py gdn main=ab/main concat=ab/concat lowo=ab/lowo --out $L > $L/ab_gdn.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json gpu.txt 2>/dev/null
echo "== summary"; cat $L/gpu.txt; cat $L/probe.log; tail -12 $L/ddtree.log; tail -40 $L/ab_gdn.log
