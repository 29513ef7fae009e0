#!/usr/bin/env bash
# Session 27, call A (carry [".whl"]; HEAD 8543607): SGLang step costs at Qwen3.6-27B shapes of one TP=2 rank (dummy
# weights, TP = 1), DDTREE 63 and DFLASH 16 each with the attention backend and with the tree attention. 542 s wall.
set -u
python3 benchmarks/gpu/sglang_step_costs.py --site /tmp/site --tp 1 --tp2-shard --budgets 63 --also-tree-attention \
  --runs sglang-ddtree63,sglang-ddtree63-treeattn,sglang-dflash,sglang-dflash-treeattn --deadline 540 --out $OUT
