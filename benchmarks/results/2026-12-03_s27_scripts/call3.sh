#!/usr/bin/env bash
# Session 27, call 3 (carry [".whl"]; HEAD 1478b31): DDTREE 63 step costs at Qwen3.6-27B shapes of one TP=2 rank (dummy weights,
# TP = 1), 8 prompts so that batch 8 runs 8 requests, with the tree attention (the default here) and with SGLang's
# triton backend (-backendattn); the kernels of each batch size's 20th step. Then the SGLang-side GPU tests again.
set -u
python3 benchmarks/gpu/sglang_step_costs.py --site /tmp/site --tp 1 --tp2-shard --budgets 63 --also-backend-attention \
  --runs sglang-ddtree63-backendattn,sglang-ddtree63 --num-prompts 8 --deadline 450 --out $OUT > $OUT/call3.log 2>&1
echo step costs rc $?
PYTHONPATH=/tmp/site:$PWD timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_tree_attention_backend.py \
  tests/test_tree_attention.py > $OUT/gpu_tests.log 2>&1
echo tests rc $?; tail -n 3 $OUT/gpu_tests.log
for f in $OUT/*.kernels.txt; do echo "== $(basename $f)"; grep -h "^step\|_fwd_kernel\|_tree_attention_kernel\|_merge_kernel\|Self CUDA time total" $f | awk '/^step/ {print; next} {print $1, $(NF-4), $(NF-1), $NF}'; done
tail -n 22 $OUT/call3.log | cut -c1-250
