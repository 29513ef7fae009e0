#!/usr/bin/env bash
# session 11, GPU call 3: root peel v2 (root's state) vs v3 (root in the key loop, rank-one terms); config sweeps
# (tree GDN at R = 8, tree attention); the engine end to end on the GPU (root-peeled verify at 33 and 65 nodes)
set -u
cd "$(dirname "$0")/.."
L=$OUT
echo "== ab gdn"; timeout 110 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py gdn v2=ab/root2 v3=ab/root3 --out $L > $L/ab_gdn.log 2>&1; echo rc $?
echo "== sweeps"; timeout 160 env PYTHONPATH=$PWD python3 ab/sweeps.py > $L/sweeps.log 2>&1; echo rc $?
echo "== engine"; timeout 280 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_engine.py -k cuda_generate --durations=3 > $L/tests_engine.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -12 $L/ab_gdn.log; cat $L/sweeps.log; tail -6 $L/tests_engine.log
