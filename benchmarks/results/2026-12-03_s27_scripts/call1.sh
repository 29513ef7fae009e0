#!/usr/bin/env bash
# Session 27, call 1 (session 26's next_call1.sh, as prepared; carry [".whl"]): the opt-in tree attention
# (SGLANG_DFLASH_TREE_ATTENTION=1) inside SGLang, DDTREE 63 with the shipped tiny pair, TP = 1, CUDA graphs, batch 1
# and 8, teacher-forced against transformers beside stock SGLang. 215 s wall.
set -u
python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DDTREE --budgets 63 \
  --runs sglang,sglang-ddtree63 --num-prompts 16 --max-new-tokens 48 --skip-engine \
  --plugin-env SGLANG_DFLASH_TREE_ATTENTION=1 --deadline 540 --out $OUT > $OUT/harness_attention.log 2>&1
echo harness rc $?
tail -n 30 $OUT/harness_attention.log
grep -h "tree attention verify\|tree GDN verify" $OUT/*.log | sort | uniq -c | head
