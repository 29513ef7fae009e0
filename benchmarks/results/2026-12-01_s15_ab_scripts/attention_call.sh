#!/usr/bin/env bash
# For a GPU session (written in session 15, not run): the tree attention's GPU tests and the CUDA engine test, not run
# on a GPU since the review moved the attention's partial buffers and merge into `partials` / `merge_partials`, then
# the TMA prototype's A/B (`attention_tma_ab.py`). About 6 minutes, no carry:
#   run(command="bash benchmarks/results/2026-12-01_s15_ab_scripts/attention_call.sh")
set -u
L=$OUT
timeout 120 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
timeout 170 env PYTHONPATH=$PWD python3 -m pytest -q tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
timeout 280 env PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s15_ab_scripts/attention_tma_ab.py > $L/attention_tma_ab.log 2>&1; echo rc $?
echo "== summary"; tail -1 $L/tests_attention.log; tail -1 $L/tests_engine.log; cut -c1-400 $L/attention_tma_ab.log
