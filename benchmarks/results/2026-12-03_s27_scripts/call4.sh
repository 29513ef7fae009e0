#!/usr/bin/env bash
# Session 27, call 4 (carry [".whl"]; HEAD 1478b31): call 3's tree-attention run alone (call 3's deadline
# stopped it during batch 1), 48 tokens a prompt so that it fits. 203 s wall.
set -u
python3 benchmarks/gpu/sglang_step_costs.py --site /tmp/site --tp 1 --tp2-shard --budgets 63 --runs sglang-ddtree63 \
  --num-prompts 8 --max-new-tokens 48 --deadline 350 --out $OUT > $OUT/call4.log 2>&1
echo rc $?
for f in $OUT/*.kernels.txt; do grep -h "^step\|_fwd_kernel\|_tree_attention_kernel\|_merge_kernel\|Self CUDA time total" $f | awk '/^step/ {print; next} {print $1, $(NF-4), $(NF-1), $NF}'; done
grep "^| sglang" $OUT/call4.log | cut -c1-200
