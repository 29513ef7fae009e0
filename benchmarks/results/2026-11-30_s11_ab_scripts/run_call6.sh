#!/usr/bin/env bash
# session 11, GPU call 6: inside stock SGLang (TP=1, CUDA graphs), DDTREE 64 and 32 (65 and 33 nodes: the tree GDN
# verify peels the root off) with the shipped pair, judged teacher-forced against transformers beside stock SGLang
set -u
cd "$(dirname "$0")/.."
timeout 330 python3 benchmarks/gpu/harness.py --site /tmp/site --pair shipped --speculative-algorithm DDTREE \
  --budgets 64,32 --runs sglang,sglang-ddtree64,sglang-ddtree32 --num-prompts 16 --max-new-tokens 48 --skip-engine \
  --deadline 310 --out $OUT > $OUT/harness.log 2>&1; echo rc $?
cd $OUT && tar czf logs.tgz $(ls | grep -v logs.tgz) 2>/dev/null
echo "== summary"; tail -40 $OUT/harness.log
