#!/usr/bin/env bash
# Session 31, call 4 (carry [".whl"]; HEAD 716bdf3): the GPU tests of the attention and the engine's CUDA greedy
# generate, then lossless in the server with session 30's key tile (not run since): stock, DFLASH and DDTREE 63 with
# the shipped tiny pair, TP = 1, CUDA graphs, batch 1 and 8, teacher-forced against transformers.
set -u
PYTHONUNBUFFERED=1 timeout 200 python3 -m pytest -q tests/test_tree_attention.py tests/test_engine.py \
  -k "attention or cuda_generate" > $OUT/call4_tests.log 2>&1
echo tests rc $?; tail -n 3 $OUT/call4_tests.log
mkdir -p $OUT/h
python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DFLASH DDTREE --budgets 63 \
  --num-prompts 8 --max-new-tokens 32 --skip-engine --deadline 340 --out $OUT/h > /tmp/harness_stdout.log 2>&1
echo harness rc $?
grep -h "tree attention verify\|verify stays with\|tree GDN verify:" $OUT/h/*.log | sed 's/^.*sglang-/sglang-/' | sort | uniq -c | head
tail -n 30 /tmp/harness_stdout.log
